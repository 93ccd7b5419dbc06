package egress

import (
	"bufio"
	"context"
	"crypto/tls"
	"crypto/x509"
	"encoding/base64"
	"errors"
	"fmt"
	"io"
	"log"
	"net"
	"net/http"
	"net/http/httptest"
	"net/netip"
	"net/url"
	"strconv"
	"sync"
	"testing"
	"time"

	"github.com/prometheus/client_golang/prometheus"

	"ironcurtain.dev/gateway/internal/audit"
	"ironcurtain.dev/gateway/internal/escalation"
	"ironcurtain.dev/gateway/internal/netguard"
	"ironcurtain.dev/gateway/internal/netguard/netguardtest"
	"ironcurtain.dev/gateway/internal/session"
	"ironcurtain.dev/gateway/netpolicy"
)

const (
	tokenS1 = "token-session-one-0123456789"
	tokenS2 = "token-session-two-0123456789"
)

// memSink is an in-memory audit.Sink; fail makes Record return an error.
type memSink struct {
	mu     sync.Mutex
	events []*audit.EgressEvent
	fail   bool
	added  chan struct{}
}

func newMemSink() *memSink { return &memSink{added: make(chan struct{}, 1024)} }

func (s *memSink) Record(_ context.Context, e audit.Event) error {
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.fail {
		return errors.New("sink down")
	}
	ev, ok := e.(*audit.EgressEvent)
	if !ok {
		return fmt.Errorf("unexpected event %T", e)
	}
	s.events = append(s.events, ev)
	s.added <- struct{}{}
	return nil
}

func (s *memSink) setFail(v bool) {
	s.mu.Lock()
	s.fail = v
	s.mu.Unlock()
}

// wait returns the n-th event (1-based) once it is recorded.
func (s *memSink) wait(t *testing.T, n int) *audit.EgressEvent {
	t.Helper()
	deadline := time.After(5 * time.Second)
	for {
		s.mu.Lock()
		if len(s.events) >= n {
			ev := s.events[n-1]
			s.mu.Unlock()
			return ev
		}
		s.mu.Unlock()
		select {
		case <-s.added:
		case <-deadline:
			t.Fatalf("audit event %d never recorded", n)
		}
	}
}

func (s *memSink) all() []*audit.EgressEvent {
	s.mu.Lock()
	defer s.mu.Unlock()
	return append([]*audit.EgressEvent(nil), s.events...)
}

func (s *memSink) count() int {
	s.mu.Lock()
	defer s.mu.Unlock()
	return len(s.events)
}

// testProxy is a running proxy on loopback with its collaborators.
type testProxy struct {
	p        *Proxy
	addr     string
	sink     *memSink
	resolver *netguardtest.Resolver
	reg      *prometheus.Registry
	stop     func() error
}

type proxyOpt func(*ProxyConfig, *Deps)

func withConfig(f func(*ProxyConfig)) proxyOpt {
	return func(c *ProxyConfig, _ *Deps) { f(c) }
}

func withDeps(f func(*Deps)) proxyOpt {
	return func(_ *ProxyConfig, d *Deps) { f(d) }
}

// loopback8 lets the proxy under test dial the loopback upstreams.
var loopback8 = netpolicy.AddressPolicy{UnsafeAllow: []netip.Prefix{netip.MustParsePrefix("127.0.0.0/8")}}

// startProxy runs a proxy that allows example.com and *.allowed.test,
// resolves names with a fake resolver (all of them to 127.0.0.1 unless a
// test says otherwise) and may dial 127.0.0.0/8.
func startProxy(t testing.TB, upstreamPort int, opts ...proxyOpt) *testProxy {
	t.Helper()
	auth, err := session.NewStatic(map[string]string{"s1": tokenS1, "s2": tokenS2})
	if err != nil {
		t.Fatal(err)
	}
	res := netguardtest.NewResolver().Set("example.com", "127.0.0.1").Set("a.allowed.test", "127.0.0.1")
	cfg := ProxyConfig{
		Allow:             netpolicy.MustParsePatterns("example.com", "*.allowed.test"),
		AllowedPorts:      []int{upstreamPort},
		Addresses:         loopback8,
		ReadHeaderTimeout: 2 * time.Second,
		IdleTimeout:       5 * time.Second,
		DrainTimeout:      2 * time.Second,
		Resolver:          res,
	}
	reg := prometheus.NewRegistry()
	sink := newMemSink()
	deps := Deps{Auth: auth, Sink: sink, Registerer: reg}
	for _, o := range opts {
		o(&cfg, &deps)
	}
	if r, ok := cfg.Resolver.(*netguardtest.Resolver); ok {
		res = r
	}
	p, err := NewProxy(cfg, deps)
	if err != nil {
		t.Fatalf("NewProxy: %v", err)
	}
	lc := ListenConfig() // the production listener
	ln, err := lc.Listen(context.Background(), "tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan error, 1)
	go func() { done <- p.Serve(ctx, ln) }()
	var once sync.Once
	var serveErr error
	stop := func() error {
		once.Do(func() {
			cancel()
			select {
			case serveErr = <-done:
			case <-time.After(30 * time.Second):
				serveErr = errors.New("Serve did not return")
			}
		})
		return serveErr
	}
	t.Cleanup(func() {
		if err := stop(); err != nil {
			t.Errorf("Serve: %v", err)
		}
	})
	return &testProxy{p: p, addr: ln.Addr().String(), sink: sink, resolver: res, reg: reg, stop: stop}
}

func b64(s string) string { return base64.StdEncoding.EncodeToString([]byte(s)) }

func basicAuth(token string) string {
	return "Basic " + base64.StdEncoding.EncodeToString([]byte("agent:"+token))
}

// rawConnect sends a CONNECT with the given Proxy-Authorization (none when
// empty) and returns the connection and the response.
func rawConnect(t testing.TB, proxyAddr, target, auth string) (net.Conn, *http.Response) {
	t.Helper()
	c, err := net.Dial("tcp", proxyAddr)
	if err != nil {
		t.Fatal(err)
	}
	req := "CONNECT " + target + " HTTP/1.1\r\nHost: " + target + "\r\n"
	if auth != "" {
		req += "Proxy-Authorization: " + auth + "\r\n"
	}
	req += "\r\n"
	return c, rawRoundTrip(t, c, req, http.MethodConnect)
}

func rawRoundTrip(t testing.TB, c net.Conn, req, method string) *http.Response {
	t.Helper()
	_ = c.SetDeadline(time.Now().Add(10 * time.Second))
	if _, err := io.WriteString(c, req); err != nil {
		t.Fatal(err)
	}
	resp, err := http.ReadResponse(bufio.NewReader(c), &http.Request{Method: method})
	if err != nil {
		t.Fatalf("reading proxy response: %v", err)
	}
	_ = c.SetDeadline(time.Time{})
	return resp
}

// body reads and closes a response body; a 200 answer to CONNECT has none
// (what follows is the tunnel).
func body(t testing.TB, r *http.Response) string {
	t.Helper()
	if r.Request != nil && r.Request.Method == http.MethodConnect && r.StatusCode == http.StatusOK {
		return ""
	}
	b, err := io.ReadAll(r.Body)
	if err != nil {
		t.Fatal(err)
	}
	r.Body.Close()
	return string(b)
}

// tlsUpstream is an HTTPS server on 127.0.0.1 whose certificate names
// example.com (httptest's certificate).
func tlsUpstream(t testing.TB) (*httptest.Server, int, *x509.CertPool) {
	t.Helper()
	srv := httptest.NewUnstartedServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if r.Header.Get("Proxy-Authorization") != "" {
			http.Error(w, "proxy credentials leaked upstream", http.StatusTeapot)
			return
		}
		_, _ = io.WriteString(w, "hello from "+r.Host)
	}))
	srv.Config.ErrorLog = log.New(io.Discard, "", 0) // refused handshakes are the point of some tests
	srv.StartTLS()
	t.Cleanup(srv.Close)
	pool := x509.NewCertPool()
	pool.AddCert(srv.Certificate())
	return srv, srv.Listener.Addr().(*net.TCPAddr).Port, pool
}

// proxyClient is an http.Client that uses the proxy with token.
func proxyClient(proxyAddr, token string, roots *x509.CertPool) *http.Client {
	pu := &url.URL{Scheme: "http", Host: proxyAddr}
	if token != "" {
		pu.User = url.UserPassword("agent", token)
	}
	return &http.Client{
		Timeout: 10 * time.Second,
		Transport: &http.Transport{
			Proxy:             http.ProxyURL(pu),
			TLSClientConfig:   &tls.Config{RootCAs: roots},
			DisableKeepAlives: true,
		},
	}
}

func hostPort(h string, port int) string { return net.JoinHostPort(h, strconv.Itoa(port)) }

// fakeEscalator answers every escalation with approved (or not) and counts.
type fakeEscalator struct {
	mu       sync.Mutex
	approve  bool
	err      error
	delay    time.Duration
	requests []escalation.Request
}

func (f *fakeEscalator) Escalate(ctx context.Context, req escalation.Request) (escalation.Result, error) {
	f.mu.Lock()
	f.requests = append(f.requests, req)
	approve, err, delay := f.approve, f.err, f.delay
	f.mu.Unlock()
	if delay > 0 {
		select {
		case <-time.After(delay):
		case <-ctx.Done():
			return escalation.Result{}, ctx.Err()
		}
	}
	if err != nil {
		return escalation.Result{}, err
	}
	if approve {
		return escalation.Result{ID: "esc-1", Approved: true, Status: "approved", DecidedBy: "alice"}, nil
	}
	return escalation.Result{ID: "esc-1", Status: "denied", DecidedBy: "alice"}, nil
}

func (f *fakeEscalator) count() int {
	f.mu.Lock()
	defer f.mu.Unlock()
	return len(f.requests)
}

// staticApprovals approves the listed session/host pairs.
type staticApprovals map[string]string

func (a staticApprovals) Allowed(sessionID string, h netpolicy.Host, _ int) bool {
	return a[sessionID] == h.String()
}

var _ netguard.Resolver = (*netguardtest.Resolver)(nil)
var _ = netip.Addr{}

func staticAuthForTest(t *testing.T) session.Authenticator {
	t.Helper()
	auth, err := session.NewStatic(map[string]string{"s1": tokenS1})
	if err != nil {
		t.Fatal(err)
	}
	return auth
}
