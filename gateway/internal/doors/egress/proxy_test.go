package egress

import (
	"crypto/tls"
	"io"
	"net"
	"net/http"
	"net/http/httptest"
	"net/netip"
	"strconv"
	"strings"
	"testing"
	"time"

	"ironcurtain.dev/gateway/internal/netguard/netguardtest"
	"ironcurtain.dev/gateway/netpolicy"
)

// An allowed host tunnels, the upstream never sees the agent token, and
// the tunnel's record has the session, address, decision and byte counts.
func TestProxyConnectAllowed(t *testing.T) {
	_, port, roots := tlsUpstream(t)
	tp := startProxy(t, port)
	resp, err := proxyClient(tp.addr, tokenS1, roots).Get("https://example.com:" + strconv.Itoa(port) + "/x")
	if err != nil {
		t.Fatalf("GET through the proxy: %v", err)
	}
	if got := body(t, resp); resp.StatusCode != http.StatusOK || !strings.HasPrefix(got, "hello from example.com") {
		t.Fatalf("upstream answered %d %q", resp.StatusCode, got)
	}
	ev := tp.sink.wait(t, 1)
	if ev.Kind != "connect" || ev.Decision != "allow" || ev.SessionID != "s1" || ev.Host != "example.com" ||
		ev.Port != port || ev.ResolvedIP != "127.0.0.1" || ev.Rule != "egress.allowed_hosts[example.com]" {
		t.Fatalf("event = %+v", ev)
	}
	if ev.BytesUp < 100 || ev.BytesDown < 100 || ev.Duration <= 0 || ev.ID == "" {
		t.Fatalf("event counts = %+v", ev)
	}
	if n := tp.resolver.Count("example.com"); n != 1 {
		t.Fatalf("%d lookups for one tunnel", n)
	}
}

// Every refusal before the tunnel: status, a plain-text reason naming the
// host and the rule, and a deny record.
func TestProxyConnectRefused(t *testing.T) {
	_, port, _ := tlsUpstream(t)
	tests := []struct {
		name       string
		opts       []proxyOpt
		target     string
		auth       string
		wantStatus int
		wantRule   string
		wantBody   string
		noLookup   string // a name that must never reach the resolver
	}{
		{name: "no credentials", target: hostPort("example.com", port), wantStatus: 407, wantRule: ruleAuth},
		{name: "unknown token", target: hostPort("example.com", port), auth: basicAuth("not-a-valid-token-at-all"), wantStatus: 407, wantRule: ruleAuth},
		{name: "token as user name only", target: hostPort("example.com", port), auth: "Basic " + b64(tokenS1+":"), wantStatus: 407, wantRule: ruleAuth},
		{name: "unknown scheme", target: hostPort("example.com", port), auth: "Digest " + tokenS1, wantStatus: 407, wantRule: ruleAuth},
		{name: "unlisted host", target: hostPort("exfil-data.evil.test", port), auth: basicAuth(tokenS1),
			wantStatus: 403, wantRule: ruleAllowlist, wantBody: "exfil-data.evil.test", noLookup: "exfil-data.evil.test"},
		{name: "suffix without dot boundary", target: hostPort("evilallowed.test", port), auth: basicAuth(tokenS1),
			wantStatus: 403, wantRule: ruleAllowlist, noLookup: "evilallowed.test"},
		{name: "port not allowed", target: "example.com:22", auth: basicAuth(tokenS1), wantStatus: 403, wantRule: rulePorts},
		{name: "no port", target: "example.com", auth: basicAuth(tokenS1), wantStatus: 400, wantRule: ruleRequest},
		{name: "port 65536", target: "example.com:65536", auth: basicAuth(tokenS1), wantStatus: 400, wantRule: ruleRequest},
		{name: "trailing dots in target", target: "example.com..:" + strconv.Itoa(port), auth: basicAuth(tokenS1), wantStatus: 400, wantRule: ruleRequest},
		{name: "decimal ip never matches star", opts: []proxyOpt{withConfig(func(c *ProxyConfig) { c.Allow = netpolicy.MustParsePatterns("*") })},
			target: "2130706433:" + strconv.Itoa(port), auth: basicAuth(tokenS1), wantStatus: 403, wantRule: ruleAllowlist, wantBody: "127.0.0.1"},
		{name: "listed loopback literal without unsafe allow", opts: []proxyOpt{withConfig(func(c *ProxyConfig) {
			c.Allow = netpolicy.MustParsePatterns("127.0.0.1")
			c.Addresses = netpolicy.AddressPolicy{}
		})}, target: "0x7f.1:" + strconv.Itoa(port), auth: basicAuth(tokenS1), wantStatus: 403, wantRule: ruleAddresses, wantBody: "loopback"},
		{name: "name resolving to loopback without unsafe allow", opts: []proxyOpt{withConfig(func(c *ProxyConfig) { c.Addresses = netpolicy.AddressPolicy{} })},
			target: hostPort("example.com", port), auth: basicAuth(tokenS1), wantStatus: 403, wantRule: ruleAddresses, wantBody: "loopback"},
		{name: "name resolving to metadata", opts: []proxyOpt{withConfig(func(c *ProxyConfig) {
			c.Resolver = netguardtest.NewResolver().Set("a.allowed.test", "169.254.169.254")
		})}, target: hostPort("a.allowed.test", port), auth: basicAuth(tokenS1), wantStatus: 403, wantRule: ruleAddresses, wantBody: "metadata"},
		{name: "name resolving to mapped loopback", opts: []proxyOpt{withConfig(func(c *ProxyConfig) {
			c.Addresses = netpolicy.AddressPolicy{}
			c.Resolver = netguardtest.NewResolver().Set("a.allowed.test", "::ffff:127.0.0.1")
		})}, target: hostPort("a.allowed.test", port), auth: basicAuth(tokenS1), wantStatus: 403, wantRule: ruleAddresses, wantBody: "loopback"},
		{name: "name resolving to public and private", opts: []proxyOpt{withConfig(func(c *ProxyConfig) {
			c.Resolver = netguardtest.NewResolver().Set("a.allowed.test", "127.0.0.1", "192.168.1.10")
		})}, target: hostPort("a.allowed.test", port), auth: basicAuth(tokenS1), wantStatus: 403, wantRule: ruleAddresses, wantBody: "private"},
		{name: "name that does not resolve", target: hostPort("nx.allowed.test", port), auth: basicAuth(tokenS1), wantStatus: 502, wantRule: ruleDial},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			tp := startProxy(t, port, tt.opts...)
			c, resp := rawConnect(t, tp.addr, tt.target, tt.auth)
			defer c.Close()
			text := body(t, resp)
			if resp.StatusCode != tt.wantStatus {
				t.Fatalf("status %d (%q); want %d", resp.StatusCode, text, tt.wantStatus)
			}
			if !strings.Contains(text, "rule: "+tt.wantRule) || !strings.Contains(text, tt.wantBody) {
				t.Fatalf("body %q does not name rule %q and %q", text, tt.wantRule, tt.wantBody)
			}
			if strings.Contains(text, tokenS1) {
				t.Fatal("the refusal echoes the token")
			}
			if tt.wantStatus == 407 {
				if got := resp.Header.Values("Proxy-Authenticate"); len(got) == 0 || !strings.HasPrefix(got[0], "Basic ") {
					t.Fatalf("Proxy-Authenticate = %q", got)
				}
			}
			if tt.wantStatus == 407 {
				// Unauthenticated: no row per request, one per source and minute.
				assertAuthAggregated(t, tp, 1)
				return
			}
			ev := tp.sink.wait(t, 1)
			wantSess := ""
			if tt.auth == basicAuth(tokenS1) && tt.wantStatus != 400 {
				wantSess = "s1"
			}
			if tt.wantStatus == 403 && ev.Decision != "deny" || ev.SessionID != wantSess || ev.Kind != "connect" {
				t.Fatalf("event = %+v", ev)
			}
			if tt.wantStatus == 403 && ev.Rule != tt.wantRule {
				t.Fatalf("event rule %q; want %q", ev.Rule, tt.wantRule)
			}
			if tt.noLookup != "" && tp.resolver.Count(tt.noLookup) != 0 {
				t.Fatalf("%s was resolved before the host decision", tt.noLookup)
			}
		})
	}
}

// A DNS answer that changes between lookups cannot redirect a tunnel: each
// tunnel looks up once and dials what it checked; the rebound answer is
// refused on the next tunnel instead of being dialed.
// Targets net/http itself refuses as malformed never reach a decision or a
// dial (they are not audited: there is no session or host to record).
func TestProxyMalformedTargetRefusedByHTTPServer(t *testing.T) {
	_, port, _ := tlsUpstream(t)
	tests := []struct {
		name   string
		target string
	}{
		{name: "userinfo", target: "user@example.com:" + strconv.Itoa(port)},
		{name: "percent", target: "ex%61mple.com:" + strconv.Itoa(port)},
		{name: "backslash", target: "example.com\\@evil.test:" + strconv.Itoa(port)},
		{name: "bare ipv6", target: "::1:" + strconv.Itoa(port)},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			tp := startProxy(t, port)
			c, resp := rawConnect(t, tp.addr, tt.target, basicAuth(tokenS1))
			defer c.Close()
			body(t, resp)
			if resp.StatusCode != http.StatusBadRequest {
				t.Fatalf("status %d; want 400", resp.StatusCode)
			}
			if tp.resolver.Count("example.com") != 0 {
				t.Fatal("resolved a malformed target")
			}
			for _, ev := range tp.sink.all() {
				if ev.Decision == "allow" {
					t.Fatalf("allowed: %+v", ev)
				}
			}
		})
	}
}

func TestProxyDNSRebinding(t *testing.T) {
	_, port, roots := tlsUpstream(t)
	res := netguardtest.NewResolver().Set("example.com", "127.0.0.1").Set("example.com", "127.0.0.2")
	tp := startProxy(t, port, withConfig(func(c *ProxyConfig) {
		c.Resolver = res
		c.Addresses = netpolicy.AddressPolicy{UnsafeAllow: []netip.Prefix{netip.MustParsePrefix("127.0.0.1/32")}}
	}))
	client := proxyClient(tp.addr, tokenS1, roots)
	resp, err := client.Get("https://example.com:" + strconv.Itoa(port) + "/")
	if err != nil {
		t.Fatalf("first GET: %v", err)
	}
	body(t, resp)
	if n := res.Count("example.com"); n != 1 {
		t.Fatalf("%d lookups for the first tunnel; want 1", n)
	}
	_, err = client.Get("https://example.com:" + strconv.Itoa(port) + "/")
	if err == nil {
		t.Fatal("second GET went through although the name now resolves to a refused address")
	}
	tp.sink.wait(t, 2)
	var allowed, denied int
	for _, ev := range tp.sink.all() {
		switch {
		case ev.Decision == "allow" && ev.ResolvedIP == "127.0.0.1" && ev.BytesDown > 0:
			allowed++
		case ev.Decision == "deny" && ev.Rule == ruleAddresses && ev.ResolvedIP == "":
			denied++
		default:
			t.Errorf("unexpected event %+v", ev)
		}
	}
	if allowed != 1 || denied != 1 {
		t.Fatalf("%d allowed and %d denied tunnels; want 1 and 1", allowed, denied)
	}
	if n := res.Count("example.com"); n != 2 {
		t.Fatalf("%d lookups for two tunnels; want 2", n)
	}
}

// The TLS ClientHello must name the CONNECT host; non-TLS tunnels are
// refused; UnsafeSkipSNICheck turns the check off.
func TestProxySNI(t *testing.T) {
	_, port, roots := tlsUpstream(t)
	tests := []struct {
		name       string
		skip       bool
		connect    string // the CONNECT host, example.com when empty
		serverName string // "" sends plain text instead of TLS
		wantOK     bool
	}{
		{name: "matching sni", serverName: "example.com", wantOK: true},
		{name: "matching sni uppercase, as the CONNECT spelled it", connect: "EXAMPLE.COM", serverName: "EXAMPLE.COM", wantOK: true},
		{name: "canonical sni for an upper-case CONNECT", connect: "Example.COM", serverName: "example.com", wantOK: true},
		{name: "CONNECT with a trailing dot, sni without", connect: "example.com.", serverName: "example.com", wantOK: true},
		// The ClientHello is relayed as it arrived: a server name that differs from the
		// scanned CONNECT host only in case would carry unscanned bits to the upstream.
		{name: "sni case differs from the CONNECT host", serverName: "ExAmPlE.cOm"},
		{name: "other sni (domain fronting)", serverName: "evil.test"},
		{name: "no tls"},
		{name: "other sni with check off", skip: true, serverName: "evil.test"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			tp := startProxy(t, port, withConfig(func(c *ProxyConfig) { c.UnsafeSkipSNICheck = tt.skip }))
			connect := tt.connect
			if connect == "" {
				connect = "example.com"
			}
			c, resp := rawConnect(t, tp.addr, hostPort(connect, port), basicAuth(tokenS1))
			defer c.Close()
			if resp.StatusCode != http.StatusOK {
				t.Fatalf("CONNECT status %d", resp.StatusCode)
			}
			_ = c.SetDeadline(time.Now().Add(5 * time.Second))
			if tt.serverName == "" {
				_, _ = io.WriteString(c, "GET / HTTP/1.1\r\nHost: example.com\r\n\r\n")
				n, _ := c.Read(make([]byte, 1))
				if n != 0 {
					t.Fatal("plain text went through the tunnel")
				}
			} else {
				tc := tls.Client(c, &tls.Config{ServerName: tt.serverName, RootCAs: roots, InsecureSkipVerify: tt.skip})
				err := tc.Handshake()
				if tt.wantOK || tt.skip {
					if err != nil {
						t.Fatalf("handshake: %v", err)
					}
				} else if err == nil {
					t.Fatal("handshake succeeded with a mismatched SNI")
				}
				tc.Close()
			}
			c.Close()
			ev := tp.sink.wait(t, 1)
			wantDecision := "deny"
			if tt.wantOK || tt.skip {
				wantDecision = "allow"
			}
			if ev.Decision != wantDecision || (wantDecision == "deny" && ev.Rule != ruleSNI) {
				t.Fatalf("event = %+v", ev)
			}
		})
	}
}

// Plain HTTP: forwarded with the canonical Host, without the agent's
// credentials; a Host header that differs from the URL is refused; https
// must use CONNECT; origin-form requests are refused.
func TestProxyPlainHTTP(t *testing.T) {
	var sawAuth, sawHost string
	up := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		sawAuth, sawHost = r.Header.Get("Proxy-Authorization"), r.Host
		_, _ = io.WriteString(w, "plain ok")
	}))
	defer up.Close()
	port := up.Listener.Addr().(*net.TCPAddr).Port
	target := "http://EXAMPLE.com.:" + strconv.Itoa(port) + "/p?q=1"
	tests := []struct {
		name       string
		req        string
		wantStatus int
		wantBody   string
		wantRule   string
	}{
		{name: "allowed", req: "GET " + target + " HTTP/1.1\r\nHost: example.com:" + strconv.Itoa(port) + "\r\nProxy-Authorization: " + basicAuth(tokenS1) + "\r\n\r\n",
			wantStatus: 200, wantBody: "plain ok"},
		{name: "post body", req: "POST " + target + " HTTP/1.1\r\nHost: example.com:" + strconv.Itoa(port) + "\r\nContent-Length: 11\r\nProxy-Authorization: " + basicAuth(tokenS1) + "\r\n\r\nhello world",
			wantStatus: 200, wantBody: "plain ok"},
		{name: "bearer token", req: "GET " + target + " HTTP/1.1\r\nHost: example.com:" + strconv.Itoa(port) + "\r\nProxy-Authorization: Bearer " + tokenS1 + "\r\n\r\n",
			wantStatus: 200, wantBody: "plain ok"},
		{name: "host header differs", req: "GET " + target + " HTTP/1.1\r\nHost: evil.test\r\nProxy-Authorization: " + basicAuth(tokenS1) + "\r\n\r\n",
			wantStatus: 400, wantBody: "Host header", wantRule: ruleRequest},
		{name: "host header differs in port", req: "GET " + target + " HTTP/1.1\r\nHost: example.com\r\nProxy-Authorization: " + basicAuth(tokenS1) + "\r\n\r\n",
			wantStatus: 400, wantBody: "Host header", wantRule: ruleRequest},
		{name: "lower-case host field", req: "GET " + target + " HTTP/1.1\r\nhost: evil.test\r\nProxy-Authorization: " + basicAuth(tokenS1) + "\r\n\r\n",
			wantStatus: 400, wantBody: "Host header", wantRule: ruleRequest},
		{name: "https absolute form", req: "GET https://example.com:" + strconv.Itoa(port) + "/ HTTP/1.1\r\nHost: example.com:" + strconv.Itoa(port) + "\r\nProxy-Authorization: " + basicAuth(tokenS1) + "\r\n\r\n",
			wantStatus: 400, wantBody: "use CONNECT", wantRule: ruleRequest},
		{name: "userinfo in url", req: "GET http://user@example.com:" + strconv.Itoa(port) + "/ HTTP/1.1\r\nHost: example.com:" + strconv.Itoa(port) + "\r\nProxy-Authorization: " + basicAuth(tokenS1) + "\r\n\r\n",
			wantStatus: 400, wantRule: ruleRequest},
		{name: "unlisted", req: "GET http://evil.test:" + strconv.Itoa(port) + "/ HTTP/1.1\r\nHost: evil.test:" + strconv.Itoa(port) + "\r\nProxy-Authorization: " + basicAuth(tokenS1) + "\r\n\r\n",
			wantStatus: 403, wantBody: "evil.test", wantRule: ruleAllowlist},
		{name: "no credentials", req: "GET " + target + " HTTP/1.1\r\nHost: example.com:" + strconv.Itoa(port) + "\r\n\r\n",
			wantStatus: 407, wantRule: ruleAuth},
		{name: "origin form", req: "GET / HTTP/1.1\r\nHost: example.com\r\nProxy-Authorization: " + basicAuth(tokenS1) + "\r\n\r\n",
			wantStatus: 400, wantBody: "this is a proxy", wantRule: ruleRequest},
		{name: "websocket upgrade", req: "GET " + target + " HTTP/1.1\r\nHost: example.com:" + strconv.Itoa(port) + "\r\nConnection: Upgrade\r\nUpgrade: websocket\r\nProxy-Authorization: " + basicAuth(tokenS1) + "\r\n\r\n",
			wantStatus: 403, wantRule: ruleRequest},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			sawAuth, sawHost = "", ""
			tp := startProxy(t, port)
			c, err := net.Dial("tcp", tp.addr)
			if err != nil {
				t.Fatal(err)
			}
			defer c.Close()
			resp := rawRoundTrip(t, c, tt.req, http.MethodGet)
			text := body(t, resp)
			if resp.StatusCode != tt.wantStatus || !strings.Contains(text, tt.wantBody) {
				t.Fatalf("got %d %q; want %d containing %q", resp.StatusCode, text, tt.wantStatus, tt.wantBody)
			}
			if !resp.Close {
				t.Fatal("the proxy keeps the connection open after a plain HTTP response")
			}
			if tt.wantStatus == 407 {
				assertAuthAggregated(t, tp, 1)
				return
			}
			ev := tp.sink.wait(t, 1)
			if ev.Kind != "http" || ev.Method != strings.Fields(tt.req)[0] {
				t.Fatalf("event = %+v", ev)
			}
			if tt.wantStatus == 200 {
				if sawAuth != "" {
					t.Fatal("Proxy-Authorization was forwarded upstream")
				}
				if want := "example.com:" + strconv.Itoa(port); sawHost != want {
					t.Fatalf("upstream Host %q; want %q", sawHost, want)
				}
				if ev.Decision != "allow" || ev.ResolvedIP != "127.0.0.1" || ev.BytesDown == 0 || ev.Host != "example.com" {
					t.Fatalf("event = %+v", ev)
				}
				if ev.Method == "POST" && ev.BytesUp != 11 {
					t.Fatalf("bytes up %d; want 11", ev.BytesUp)
				}
				return
			}
			if ev.Decision != "deny" || ev.Rule != tt.wantRule {
				t.Fatalf("event = %+v; want deny by %s", ev, tt.wantRule)
			}
		})
	}
}

// A second request on a kept-alive connection cannot slip past the raw
// Host check.
func TestProxyPlainHTTPSecondRequestRefused(t *testing.T) {
	up := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) { _, _ = io.WriteString(w, "ok") }))
	defer up.Close()
	port := up.Listener.Addr().(*net.TCPAddr).Port
	tp := startProxy(t, port)
	c, err := net.Dial("tcp", tp.addr)
	if err != nil {
		t.Fatal(err)
	}
	defer c.Close()
	one := "GET http://example.com:" + strconv.Itoa(port) + "/ HTTP/1.1\r\nHost: example.com:" + strconv.Itoa(port) + "\r\nProxy-Authorization: " + basicAuth(tokenS1) + "\r\n\r\n"
	two := "GET http://example.com:" + strconv.Itoa(port) + "/ HTTP/1.1\r\nHost: evil.test\r\nProxy-Authorization: " + basicAuth(tokenS1) + "\r\n\r\n"
	_ = c.SetDeadline(time.Now().Add(5 * time.Second))
	if _, err := io.WriteString(c, one+two); err != nil {
		t.Fatal(err)
	}
	all, _ := io.ReadAll(c)
	if n := strings.Count(string(all), "HTTP/1.1 "); n != 1 {
		t.Fatalf("%d responses on one connection; want 1:\n%s", n, all)
	}
}

// IPv6 targets: listed literals in brackets work; the IPv4-mapped spelling of
// an allowed IPv4 range does not.
func TestProxyIPv6Targets(t *testing.T) {
	ln6, err := net.Listen("tcp", "[::1]:0")
	if err != nil {
		t.Skipf("no IPv6 loopback: %v", err)
	}
	defer ln6.Close()
	go func() {
		for {
			c, err := ln6.Accept()
			if err != nil {
				return
			}
			c.Close()
		}
	}()
	port6 := ln6.Addr().(*net.TCPAddr).Port
	port := echoUpstream(t)
	tests := []struct {
		name       string
		allow      []string
		unsafe     []string
		target     string
		wantStatus int
		port       int
	}{
		{name: "listed v6 loopback with unsafe allow", allow: []string{"[0:0::1]"}, unsafe: []string{"::1/128"},
			target: "[0:0:0:0:0:0:0:1]:" + strconv.Itoa(port6), wantStatus: 200, port: port6},
		{name: "mapped loopback refused", allow: []string{"[::ffff:127.0.0.1]"}, unsafe: []string{"127.0.0.0/8"},
			target: "[::ffff:127.0.0.1]:" + strconv.Itoa(port), wantStatus: 403},
		{name: "v6 loopback not allowed by v4 prefix", allow: []string{"[::1]"}, unsafe: []string{"127.0.0.0/8"},
			target: "[::1]:" + strconv.Itoa(port), wantStatus: 403},
		{name: "wildcard never matches v6 literal", allow: []string{"*"}, unsafe: []string{"::1/128"},
			target: "[::1]:" + strconv.Itoa(port), wantStatus: 403},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			var prefixes []netip.Prefix
			for _, u := range tt.unsafe {
				prefixes = append(prefixes, netip.MustParsePrefix(u))
			}
			upstream := port
			if tt.port != 0 {
				upstream = tt.port
			}
			tp := startProxy(t, upstream, withConfig(func(c *ProxyConfig) {
				noSNI(c)
				c.Allow = netpolicy.MustParsePatterns(tt.allow...)
				c.Addresses = netpolicy.AddressPolicy{UnsafeAllow: prefixes}
			}))
			c, resp := rawConnect(t, tp.addr, tt.target, basicAuth(tokenS1))
			body(t, resp)
			c.Close()
			if resp.StatusCode != tt.wantStatus {
				t.Fatalf("status %d; want %d", resp.StatusCode, tt.wantStatus)
			}
		})
	}
}
