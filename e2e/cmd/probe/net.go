package main

import (
	"bufio"
	"context"
	"crypto/tls"
	"crypto/x509"
	"encoding/base64"
	"errors"
	"flag"
	"fmt"
	"io"
	"net"
	"net/http"
	"net/url"
	"os"
	"strings"
	"sync"
	"time"
)

// dialResult is one `dial` attempt.
type dialResult struct {
	Addr      string `json:"addr"`
	Connected bool   `json:"connected"`
	Error     string `json:"error,omitempty"`
}

// dialAll tries every address at once and reports in input order.
func dialAll(addrs []string, timeout time.Duration) []dialResult {
	out := make([]dialResult, len(addrs))
	var wg sync.WaitGroup
	for i, a := range addrs {
		wg.Add(1)
		go func() {
			defer wg.Done()
			r := dialResult{Addr: a}
			conn, err := net.DialTimeout("tcp", a, timeout)
			if err != nil {
				r.Error = err.Error()
			} else {
				r.Connected = true
				conn.Close()
			}
			out[i] = r
		}()
	}
	wg.Wait()
	return out
}

// fetchResult is what `fetch` reports. ProxyStatus is the proxy's answer to
// CONNECT (https) or the response status (http through the proxy); Status
// and Body are the destination's answer when one was reached.
type fetchResult struct {
	URL         string `json:"url"`
	ProxyStatus int    `json:"proxy_status"`
	ProxyBody   string `json:"proxy_body,omitempty"`
	Status      int    `json:"status,omitempty"`
	Body        string `json:"body,omitempty"`
	Error       string `json:"error,omitempty"`
}

func fetchCmd(args []string, getenv func(string) string) (fetchResult, error) {
	fs := flag.NewFlagSet("fetch", flag.ContinueOnError)
	caFile := fs.String("ca", "", "extra CA certificate (PEM) to trust for the destination")
	timeout := fs.Duration("timeout", 15*time.Second, "overall timeout")
	proxyFlag := fs.String("proxy", "", "proxy URL (default $HTTPS_PROXY or $HTTP_PROXY by scheme)")
	if err := fs.Parse(args); err != nil {
		return fetchResult{}, err
	}
	if fs.NArg() != 1 {
		return fetchResult{}, errors.New("want exactly one URL")
	}
	target, err := url.Parse(fs.Arg(0))
	if err != nil || (target.Scheme != "https" && target.Scheme != "http") || target.Host == "" {
		return fetchResult{}, fmt.Errorf("%q is not an http(s) URL", fs.Arg(0))
	}
	proxyEnv := "HTTP_PROXY"
	if target.Scheme == "https" {
		proxyEnv = "HTTPS_PROXY"
	}
	proxyURL := getenv(proxyEnv)
	if *proxyFlag != "" {
		proxyURL = *proxyFlag
	}
	proxy, err := url.Parse(proxyURL)
	if err != nil || proxy.Host == "" {
		return fetchResult{}, fmt.Errorf("$%s is not a proxy URL", proxyEnv)
	}
	roots, err := x509.SystemCertPool()
	if err != nil || roots == nil {
		roots = x509.NewCertPool()
	}
	if *caFile != "" {
		pem, err := os.ReadFile(*caFile)
		if err != nil {
			return fetchResult{}, err
		}
		if !roots.AppendCertsFromPEM(pem) {
			return fetchResult{}, fmt.Errorf("%s holds no PEM certificate", *caFile)
		}
	}
	ctx, cancel := context.WithTimeout(context.Background(), *timeout)
	defer cancel()
	res := fetchResult{URL: target.String()}
	if err := fetchVia(ctx, proxy, target, roots, &res); err != nil {
		res.Error = err.Error()
	}
	return res, nil
}

// fetchVia does by hand what an HTTP client does with a proxy, so that the
// proxy's own answer (status and text) is visible.
func fetchVia(ctx context.Context, proxy, target *url.URL, roots *x509.CertPool, res *fetchResult) error {
	var d net.Dialer
	conn, err := d.DialContext(ctx, "tcp", proxy.Host)
	if err != nil {
		return fmt.Errorf("dialing the proxy: %w", err)
	}
	defer conn.Close()
	if dl, ok := ctx.Deadline(); ok {
		_ = conn.SetDeadline(dl)
	}
	auth := ""
	if pass, ok := proxy.User.Password(); ok {
		auth = "Basic " + base64.StdEncoding.EncodeToString([]byte(proxy.User.Username()+":"+pass))
	}
	br := bufio.NewReader(conn)
	if target.Scheme == "http" {
		req, _ := http.NewRequestWithContext(ctx, http.MethodGet, target.String(), nil)
		if auth != "" {
			req.Header.Set("Proxy-Authorization", auth)
		}
		if err := req.WriteProxy(conn); err != nil {
			return fmt.Errorf("writing the request: %w", err)
		}
		resp, err := http.ReadResponse(br, req)
		if err != nil {
			return fmt.Errorf("reading the response: %w", err)
		}
		defer resp.Body.Close()
		body, _ := io.ReadAll(io.LimitReader(resp.Body, 4096))
		res.ProxyStatus = resp.StatusCode
		if resp.StatusCode == http.StatusOK {
			res.Status, res.Body = resp.StatusCode, string(body)
		} else {
			res.ProxyBody = strings.TrimSpace(string(body))
		}
		return nil
	}

	authority := target.Host
	if target.Port() == "" {
		authority = net.JoinHostPort(target.Hostname(), "443")
	}
	connect := "CONNECT " + authority + " HTTP/1.1\r\nHost: " + authority + "\r\n"
	if auth != "" {
		connect += "Proxy-Authorization: " + auth + "\r\n"
	}
	if _, err := io.WriteString(conn, connect+"\r\n"); err != nil {
		return fmt.Errorf("writing CONNECT: %w", err)
	}
	resp, err := http.ReadResponse(br, &http.Request{Method: http.MethodConnect})
	if err != nil {
		return fmt.Errorf("reading the CONNECT answer: %w", err)
	}
	res.ProxyStatus = resp.StatusCode
	if resp.StatusCode != http.StatusOK {
		body, _ := io.ReadAll(io.LimitReader(resp.Body, 4096))
		resp.Body.Close()
		res.ProxyBody = strings.TrimSpace(string(body))
		return nil
	}
	tconn := tls.Client(&bufferedConn{Conn: conn, r: br}, &tls.Config{ServerName: target.Hostname(), RootCAs: roots, MinVersion: tls.VersionTLS12})
	if err := tconn.HandshakeContext(ctx); err != nil {
		return fmt.Errorf("TLS through the tunnel: %w", err)
	}
	req, _ := http.NewRequestWithContext(ctx, http.MethodGet, target.String(), nil)
	req.Close = true
	if err := req.Write(tconn); err != nil {
		return fmt.Errorf("writing the request: %w", err)
	}
	r2, err := http.ReadResponse(bufio.NewReader(tconn), req)
	if err != nil {
		return fmt.Errorf("reading the response: %w", err)
	}
	defer r2.Body.Close()
	body, _ := io.ReadAll(io.LimitReader(r2.Body, 4096))
	res.Status, res.Body = r2.StatusCode, string(body)
	return nil
}

// bufferedConn reads first what the CONNECT reader already buffered.
type bufferedConn struct {
	net.Conn
	r *bufio.Reader
}

func (c *bufferedConn) Read(p []byte) (int, error) { return c.r.Read(p) }
