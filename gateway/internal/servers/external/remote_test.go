package external

import (
	"context"
	"encoding/json"
	"errors"
	"net/http"
	"net/http/httptest"
	"net/netip"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/mark3labs/mcp-go/mcp"
	"github.com/mark3labs/mcp-go/server"

	"ironcurtain.dev/gateway/internal/audit"
	"ironcurtain.dev/gateway/internal/netguard"
	"ironcurtain.dev/gateway/internal/servers"
	"ironcurtain.dev/gateway/netpolicy"
)

// remoteToken is the bearer token the gateway holds for the url: server.
const remoteToken = "rt-7f3c9e1d5a2b8c4e6f0a1b2c3d4e5f60"

// memSink keeps every event it is given, as the JSON rows a sink would store.
type memSink struct {
	mu     sync.Mutex
	events []*audit.EgressEvent
	rows   []string
}

func (m *memSink) Record(_ context.Context, e audit.Event) error {
	b, err := json.Marshal(e)
	if err != nil {
		return err
	}
	m.mu.Lock()
	defer m.mu.Unlock()
	m.rows = append(m.rows, string(b))
	if ev, ok := e.(*audit.EgressEvent); ok {
		m.events = append(m.events, ev)
	}
	return nil
}

func (m *memSink) snapshot() ([]*audit.EgressEvent, string) {
	m.mu.Lock()
	defer m.mu.Unlock()
	return append([]*audit.EgressEvent(nil), m.events...), strings.Join(m.rows, "\n")
}

// remoteMCP is a streamable-HTTP MCP server on 127.0.0.1 (the fake
// internet) that remembers the Authorization headers it was sent.
type remoteMCP struct {
	srv     *httptest.Server
	handler atomic.Pointer[http.Handler]
	auth    sync.Map // header value -> true
}

func newRemoteMCP(t testing.TB) *remoteMCP {
	t.Helper()
	r := &remoteMCP{}
	r.reset()
	r.srv = httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, req *http.Request) {
		r.auth.Store(req.Header.Get("Authorization"), true)
		(*r.handler.Load()).ServeHTTP(w, req)
	}))
	t.Cleanup(r.srv.Close)
	return r
}

// reset replaces the MCP server by a fresh one: every session is lost.
func (r *remoteMCP) reset() {
	s := server.NewMCPServer("remote-notes", "1", server.WithToolCapabilities(true))
	s.AddTool(mcp.NewTool("echo", mcp.WithDescription("Echo text."), mcp.WithString("text", mcp.Required())),
		func(_ context.Context, req mcp.CallToolRequest) (*mcp.CallToolResult, error) {
			return mcp.NewToolResultText(req.GetString("text", "")), nil
		})
	s.AddTool(mcp.NewTool("fail"), func(context.Context, mcp.CallToolRequest) (*mcp.CallToolResult, error) {
		return nil, errors.New("the notes database is locked")
	})
	var h http.Handler = server.NewStreamableHTTPServer(s)
	r.handler.Store(&h)
}

func (r *remoteMCP) sawToken() bool {
	_, ok := r.auth.Load("Bearer " + remoteToken)
	return ok
}

// loopbackGuard is the Guard a url: server is dialed through, told
// (the unsafe allowance) that 127.0.0.1 is reachable, as tests must.
func loopbackGuard(t *testing.T, hosts ...string) *netguard.Guard {
	t.Helper()
	allow, err := netpolicy.ParsePatterns(hosts)
	if err != nil {
		t.Fatal(err)
	}
	g, err := netguard.NewGuard(netguard.GuardConfig{Allow: allow, Addresses: netpolicy.AddressPolicy{
		UnsafeAllow: []netip.Prefix{netip.MustParsePrefix("127.0.0.1/32")},
	}})
	if err != nil {
		t.Fatal(err)
	}
	return g
}

func startRemote(t *testing.T, rawURL string, guard Dialer, sink audit.Sink) (*Server, error) {
	t.Helper()
	u, err := netpolicy.ParseURL(rawURL)
	if err != nil {
		t.Fatal(err)
	}
	tr, err := NewHTTPTransport(HTTPConfig{Name: "notes", URL: u, Headers: map[string]string{"Authorization": "Bearer " + remoteToken}},
		HTTPDeps{Dialer: guard, Sink: sink})
	if err != nil {
		t.Fatal(err)
	}
	s, err := Start(context.Background(), Config{Name: "notes", Transport: tr, StartTimeout: 5 * time.Second,
		MinBackoff: 20 * time.Millisecond, MaxBackoff: 50 * time.Millisecond}, Deps{})
	if err == nil {
		t.Cleanup(func() { _ = s.Close() })
	}
	return s, err
}

func TestURLServerListsAndCalls(t *testing.T) {
	r := newRemoteMCP(t)
	sink := &memSink{}
	s, err := startRemote(t, r.srv.URL+"/mcp", loopbackGuard(t, "127.0.0.1"), sink)
	if err != nil {
		t.Fatal(err)
	}
	var names []string
	for _, tl := range s.Tools() {
		names = append(names, tl.Name)
	}
	if strings.Join(names, ",") != "echo,fail" {
		t.Fatalf("tools = %v, want echo,fail", names)
	}
	ctx := servers.WithCallInfo(context.Background(), servers.CallInfo{CallID: "call-1", SessionID: "sess-1"})
	res, err := s.Call(ctx, "echo", map[string]any{"text": "hello"})
	if err != nil || res.IsError || len(res.Content) != 1 || res.Content[0].Text != "hello" {
		t.Fatalf("echo = %+v, %v", res, err)
	}
	res, err = s.Call(ctx, "fail", map[string]any{})
	if err != nil || !res.IsError {
		t.Fatalf("fail = %+v, %v; want a tool error", res, err)
	}
	if strings.Contains(res.Content[0].Text, remoteToken) {
		t.Fatal("the bearer token reached the agent in a tool error")
	}
	if !r.sawToken() {
		t.Fatal("the bearer token did not reach the server")
	}
	evs, rows := sink.snapshot()
	if strings.Contains(rows, remoteToken) {
		t.Fatal("the bearer token is in an audit row")
	}
	var sawCall bool
	for _, ev := range evs {
		if ev.Kind != EgressKind || ev.Rule != "servers.notes.url" || ev.Host != "127.0.0.1" || ev.Decision != "allow" {
			t.Errorf("egress event = %+v", ev)
		}
		if ev.ToolCallID == "call-1" && ev.SessionID == "sess-1" && ev.Method == http.MethodPost {
			sawCall = true
		}
	}
	if len(evs) < 3 || !sawCall {
		t.Fatalf("want every request recorded, the tool call's with its id; got %d events, call linked: %v", len(evs), sawCall)
	}
}

func TestURLServerRefusedDestinations(t *testing.T) {
	r := newRemoteMCP(t)
	redirect := httptest.NewServer(http.RedirectHandler("http://10.0.0.1/mcp", http.StatusTemporaryRedirect))
	t.Cleanup(redirect.Close)
	tests := []struct {
		name  string
		url   string
		guard Dialer
		want  error
	}{
		{name: "cloud metadata address", url: "http://169.254.169.254/mcp", guard: loopbackGuard(t, "169.254.169.254"), want: netpolicy.ErrAddressDenied},
		{name: "host not on the allowlist", url: r.srv.URL + "/mcp", guard: loopbackGuard(t, "mcp.example.com"), want: netguard.ErrHostNotAllowed},
		{name: "redirect to a private address", url: redirect.URL + "/mcp", guard: loopbackGuard(t, "127.0.0.1", "10.0.0.1"), want: ErrRedirect},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			sink := &memSink{}
			_, err := startRemote(t, tt.url, tt.guard, sink)
			if !errors.Is(err, tt.want) {
				t.Fatalf("err = %v, want %v", err, tt.want)
			}
			if strings.Contains(err.Error(), remoteToken) {
				t.Fatal("the bearer token is in the error")
			}
			evs, rows := sink.snapshot()
			if len(evs) == 0 {
				t.Fatal("the refused request was not recorded")
			}
			if strings.Contains(rows, remoteToken) {
				t.Fatal("the bearer token is in an audit row")
			}
			if tt.want != ErrRedirect && evs[0].Decision != "deny" {
				t.Errorf("decision = %q, want deny", evs[0].Decision)
			}
		})
	}
}

func TestURLServerNewSessionAfterLoss(t *testing.T) {
	r := newRemoteMCP(t)
	s, err := startRemote(t, r.srv.URL+"/mcp", loopbackGuard(t, "127.0.0.1"), &memSink{})
	if err != nil {
		t.Fatal(err)
	}
	r.reset() // the server restarted: our session is unknown to it (404)
	deadline := time.Now().Add(5 * time.Second)
	for {
		res, err := s.Call(context.Background(), "echo", map[string]any{"text": "again"})
		if err == nil && !res.IsError && res.Content[0].Text == "again" {
			return
		}
		if err != nil && strings.Contains(err.Error(), remoteToken) {
			t.Fatal("the bearer token is in an error")
		}
		if time.Now().After(deadline) {
			t.Fatalf("no new session: %+v %v", res, err)
		}
		time.Sleep(20 * time.Millisecond)
	}
}

// TestURLServerResponseCap: a response past the cap fails the read (and
// the run), whatever the server sends.
func TestURLServerResponseCap(t *testing.T) {
	big := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, _ *http.Request) {
		w.Header().Set("Content-Type", "application/json")
		_, _ = w.Write([]byte(`{"jsonrpc":"2.0","id":0,"result":{"pad":"` + strings.Repeat("x", 4096) + `"}}`))
	}))
	t.Cleanup(big.Close)
	u, _ := netpolicy.ParseURL(big.URL + "/mcp")
	tr, err := NewHTTPTransport(HTTPConfig{Name: "big", URL: u}, HTTPDeps{Dialer: loopbackGuard(t, "127.0.0.1"), Sink: &memSink{}})
	if err != nil {
		t.Fatal(err)
	}
	tr.client.Transport.(*recorder).max = 1024
	_, err = Start(context.Background(), Config{Name: "big", Transport: tr, StartTimeout: 5 * time.Second}, Deps{})
	if !errors.Is(err, ErrResponseTooLarge) {
		t.Fatalf("err = %v, want ErrResponseTooLarge", err)
	}
}

// BenchmarkURLServerCall is one tool call to a url: server on loopback:
// Guard-checked connection (kept alive), one recorded request.
func BenchmarkURLServerCall(b *testing.B) {
	r := newRemoteMCP(b)
	u, _ := netpolicy.ParseURL(r.srv.URL + "/mcp")
	allow, _ := netpolicy.ParsePatterns([]string{"127.0.0.1"})
	g, _ := netguard.NewGuard(netguard.GuardConfig{Allow: allow, Addresses: netpolicy.AddressPolicy{UnsafeAllow: []netip.Prefix{netip.MustParsePrefix("127.0.0.1/32")}}})
	tr, err := NewHTTPTransport(HTTPConfig{Name: "notes", URL: u}, HTTPDeps{Dialer: g, Sink: discardSink{}})
	if err != nil {
		b.Fatal(err)
	}
	s, err := Start(context.Background(), Config{Name: "notes", Transport: tr}, Deps{})
	if err != nil {
		b.Fatal(err)
	}
	defer s.Close()
	args := map[string]any{"text": "hello"}
	b.ReportAllocs()
	for b.Loop() {
		if res, err := s.Call(context.Background(), "echo", args); err != nil || res.IsError {
			b.Fatal(res, err)
		}
	}
}
