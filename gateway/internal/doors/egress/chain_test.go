package egress

import (
	"context"
	"errors"
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"

	"ironcurtain.dev/gateway/netpolicy"
)

// Whatever reaches goproxy without a decision (here: straight to its
// handler, bypassing ServeHTTP) is refused by the catch-alls, never allowed
// by goproxy's default.
func TestGoproxyChainDefaultDeny(t *testing.T) {
	p, err := NewProxy(ProxyConfig{Allow: netpolicy.MustParsePatterns("*")}, Deps{Auth: staticAuthForTest(t), Sink: newMemSink()})
	if err != nil {
		t.Fatal(err)
	}
	tests := []struct {
		name   string
		method string
		target string
	}{
		{name: "connect", method: http.MethodConnect, target: "example.com:443"},
		{name: "plain http", method: http.MethodGet, target: "http://example.com/"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			req := httptest.NewRequest(tt.method, tt.target, nil)
			req.Header.Set("Proxy-Authorization", basicAuth(tokenS1))
			rec := httptest.NewRecorder()
			p.gp.ServeHTTP(rec, req)
			if rec.Code != http.StatusForbidden || !strings.Contains(rec.Body.String(), ruleCatchAll) {
				t.Fatalf("got %d %q; want 403 by %s", rec.Code, rec.Body.String(), ruleCatchAll)
			}
		})
	}
}

// The pinned dialer dials only the destination decided for the request.
func TestPinnedDialRefusesUndecided(t *testing.T) {
	p, err := NewProxy(ProxyConfig{Allow: netpolicy.MustParsePatterns("*")}, Deps{Auth: staticAuthForTest(t), Sink: newMemSink()})
	if err != nil {
		t.Fatal(err)
	}
	allowed := newState("http", "GET")
	allowed.host, allowed.port = mustParseHost(t, "example.com"), 80
	allowed.allow("test", "test")
	denied := newState("http", "GET")
	denied.host, denied.port = mustParseHost(t, "example.com"), 80
	tests := []struct {
		name string
		ctx  context.Context
		addr string
	}{
		{name: "no state", ctx: context.Background(), addr: "example.com:80"},
		{name: "not allowed", ctx: withState(context.Background(), denied), addr: "example.com:80"},
		{name: "other host", ctx: withState(context.Background(), allowed), addr: "evil.test:80"},
		{name: "other port", ctx: withState(context.Background(), allowed), addr: "example.com:8080"},
		{name: "same host other notation", ctx: withState(context.Background(), allowed), addr: "93.184.215.14:80"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			c, err := p.pinnedDial(tt.ctx, "tcp", tt.addr)
			if c != nil {
				c.Close()
			}
			if !errors.Is(err, errNotDecided) {
				t.Fatalf("pinnedDial(%q) = %v; want errNotDecided", tt.addr, err)
			}
		})
	}
}

func mustParseHost(t *testing.T, s string) netpolicy.Host {
	t.Helper()
	h, err := netpolicy.ParseHost(s)
	if err != nil {
		t.Fatal(err)
	}
	return h
}
