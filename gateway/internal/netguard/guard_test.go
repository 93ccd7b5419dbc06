package netguard

import (
	"context"
	"errors"
	"io"
	"net"
	"net/http"
	"net/http/httptest"
	"net/netip"
	"strconv"
	"testing"
	"time"

	"ironcurtain.dev/gateway/internal/netguard/netguardtest"
	"ironcurtain.dev/gateway/netpolicy"
)

var _ Resolver = (*netguardtest.Resolver)(nil)

var loopback8 = netpolicy.AddressPolicy{UnsafeAllow: []netip.Prefix{netip.MustParsePrefix("127.0.0.0/8")}}

// listen starts a TCP listener on addr that writes its own name to every
// connection, so a test can tell which listener a dial reached.
func listen(t *testing.T, addr, name string) int {
	t.Helper()
	ln, err := net.Listen("tcp", addr)
	if err != nil {
		t.Fatalf("listening on %s: %v", addr, err)
	}
	t.Cleanup(func() { ln.Close() })
	go func() {
		for {
			c, err := ln.Accept()
			if err != nil {
				return
			}
			_, _ = io.WriteString(c, name)
			c.Close()
		}
	}()
	return ln.Addr().(*net.TCPAddr).Port
}

func readName(t *testing.T, c net.Conn) string {
	t.Helper()
	defer c.Close()
	_ = c.SetReadDeadline(time.Now().Add(5 * time.Second))
	b, err := io.ReadAll(c)
	if err != nil {
		t.Fatalf("reading from dialed conn: %v", err)
	}
	return string(b)
}

func TestGuardDial(t *testing.T) {
	port := listen(t, "127.0.0.1:0", "A")
	tests := []struct {
		name      string
		allow     []string
		addresses netpolicy.AddressPolicy
		answers   map[string][]string
		host      string
		wantErr   error // nil: success
		wantClass netpolicy.Class
		lookups   int
	}{
		{name: "allowed name on loopback with unsafe allow", allow: []string{"svc.test"}, addresses: loopback8,
			answers: map[string][]string{"svc.test": {"127.0.0.1"}}, host: "svc.test", lookups: 1},
		{name: "loopback refused without unsafe allow", allow: []string{"svc.test"},
			answers: map[string][]string{"svc.test": {"127.0.0.1"}}, host: "svc.test",
			wantErr: netpolicy.ErrAddressDenied, wantClass: netpolicy.Loopback, lookups: 1},
		{name: "metadata refused", allow: []string{"*.test"}, addresses: loopback8,
			answers: map[string][]string{"meta.test": {"169.254.169.254"}}, host: "meta.test",
			wantErr: netpolicy.ErrAddressDenied, wantClass: netpolicy.Metadata, lookups: 1},
		{name: "mapped metadata refused", allow: []string{"*.test"}, addresses: loopback8,
			answers: map[string][]string{"meta.test": {"::ffff:169.254.169.254"}}, host: "meta.test",
			wantErr: netpolicy.ErrAddressDenied, wantClass: netpolicy.Metadata, lookups: 1},
		{name: "nat64 metadata refused", allow: []string{"*.test"}, addresses: loopback8,
			answers: map[string][]string{"meta.test": {"64:ff9b::a9fe:a9fe"}}, host: "meta.test",
			wantErr: netpolicy.ErrAddressDenied, wantClass: netpolicy.NAT64, lookups: 1},
		{name: "one bad address refuses the answer", allow: []string{"*.test"}, addresses: loopback8,
			answers: map[string][]string{"mixed.test": {"127.0.0.1", "10.0.0.1"}}, host: "mixed.test",
			wantErr: netpolicy.ErrAddressDenied, wantClass: netpolicy.Private, lookups: 1},
		{name: "unlisted host never resolved", allow: []string{"svc.test"}, addresses: loopback8,
			answers: map[string][]string{"exfil.evil.test": {"127.0.0.1"}}, host: "exfil.evil.test",
			wantErr: ErrHostNotAllowed, lookups: 0},
		{name: "resolve failure", allow: []string{"*.test"}, addresses: loopback8,
			host: "nx.test", wantErr: ErrResolve, lookups: 1},
		{name: "ip literal listed", allow: []string{"127.0.0.1"}, addresses: loopback8, host: "2130706433", lookups: 0},
		{name: "ip literal not matched by star", allow: []string{"*"}, addresses: loopback8, host: "127.0.0.1",
			wantErr: ErrHostNotAllowed, lookups: 0},
		{name: "ip literal listed but loopback", allow: []string{"127.0.0.1"}, host: "127.0.0.1",
			wantErr: netpolicy.ErrAddressDenied, wantClass: netpolicy.Loopback, lookups: 0},
		{name: "mapped literal not covered by v4 unsafe prefix", allow: []string{"[::ffff:127.0.0.1]"}, addresses: loopback8,
			host: "::ffff:127.0.0.1", wantErr: netpolicy.ErrAddressDenied, wantClass: netpolicy.IPv4Mapped, lookups: 0},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			res := netguardtest.NewResolver()
			for name, as := range tt.answers {
				res.Set(name, as...)
			}
			g, err := NewGuard(GuardConfig{Allow: netpolicy.MustParsePatterns(tt.allow...), Addresses: tt.addresses, Resolver: res, DialTimeout: 5 * time.Second})
			if err != nil {
				t.Fatal(err)
			}
			h, err := netpolicy.ParseHost(tt.host)
			if err != nil {
				t.Fatal(err)
			}
			c, addr, err := g.Dial(context.Background(), h, port)
			if got := res.Count(h.String()); got != tt.lookups {
				t.Errorf("lookups = %d; want %d", got, tt.lookups)
			}
			if tt.wantErr != nil {
				if c != nil {
					c.Close()
				}
				if !errors.Is(err, tt.wantErr) {
					t.Fatalf("Dial = %v; want %v", err, tt.wantErr)
				}
				if tt.wantClass != netpolicy.Public && !errors.Is(err, tt.wantClass) {
					t.Fatalf("Dial = %v; want class %v", err, tt.wantClass)
				}
				return
			}
			if err != nil {
				t.Fatalf("Dial: %v", err)
			}
			if addr != netip.MustParseAddr("127.0.0.1") {
				t.Errorf("dialed %v", addr)
			}
			if got := readName(t, c); got != "A" {
				t.Fatalf("reached %q; want A", got)
			}
		})
	}
}

// A name whose answer changes between lookups (DNS rebinding) cannot move
// the connection: the Guard looks up once and dials the address it checked.
func TestGuardDNSRebinding(t *testing.T) {
	portA := listen(t, "127.0.0.1:0", "A")
	// The same port on another loopback address: where a second lookup would go.
	lnB, err := net.Listen("tcp", "127.0.0.2:"+strconv.Itoa(portA))
	if err != nil {
		t.Skipf("cannot listen on 127.0.0.2:%d: %v", portA, err)
	}
	lnB.Close()
	listen(t, "127.0.0.2:"+strconv.Itoa(portA), "B")

	res := netguardtest.NewResolver().Set("rebind.test", "127.0.0.1").Set("rebind.test", "127.0.0.2")
	g, err := NewGuard(GuardConfig{
		Allow:     netpolicy.MustParsePatterns("rebind.test"),
		Addresses: netpolicy.AddressPolicy{UnsafeAllow: []netip.Prefix{netip.MustParsePrefix("127.0.0.1/32")}},
		Resolver:  res,
	})
	if err != nil {
		t.Fatal(err)
	}
	c, err := g.DialContext(context.Background(), "tcp", "rebind.test:"+strconv.Itoa(portA))
	if err != nil {
		t.Fatalf("first dial: %v", err)
	}
	if got := readName(t, c); got != "A" {
		t.Fatalf("reached %q; want A", got)
	}
	if n := res.Count("rebind.test"); n != 1 {
		t.Fatalf("%d lookups for one dial; want 1", n)
	}
	// The next dial sees the rebound answer and is refused, not redirected.
	_, err = g.DialContext(context.Background(), "tcp", "rebind.test:"+strconv.Itoa(portA))
	if !errors.Is(err, netpolicy.Loopback) {
		t.Fatalf("second dial = %v; want refused as loopback", err)
	}
}

func TestGuardDialContextInput(t *testing.T) {
	g, err := NewGuard(GuardConfig{Allow: netpolicy.MustParsePatterns("*.test"), Addresses: loopback8, Resolver: netguardtest.NewResolver()})
	if err != nil {
		t.Fatal(err)
	}
	tests := []struct {
		name    string
		network string
		addr    string
		wantErr error
	}{
		{name: "udp", network: "udp", addr: "a.test:53", wantErr: ErrBadNetwork},
		{name: "no port", network: "tcp", addr: "a.test", wantErr: netpolicy.ErrPortRequired},
		{name: "port 65536", network: "tcp", addr: "a.test:65536", wantErr: netpolicy.ErrInvalidPort},
		{name: "userinfo", network: "tcp", addr: "x@a.test:80", wantErr: netpolicy.ErrInvalidHost},
		{name: "backslash", network: "tcp", addr: "a.test\\@evil:80", wantErr: netpolicy.ErrInvalidHost},
		{name: "not allowed", network: "tcp", addr: "evil.example:443", wantErr: ErrHostNotAllowed},
		{name: "ip not allowed by wildcard", network: "tcp", addr: "127.0.0.1:80", wantErr: ErrHostNotAllowed},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			c, err := g.DialContext(context.Background(), tt.network, tt.addr)
			if c != nil {
				c.Close()
			}
			if !errors.Is(err, tt.wantErr) {
				t.Fatalf("DialContext(%s, %q) = %v; want %v", tt.network, tt.addr, err, tt.wantErr)
			}
		})
	}
}

// The dialer's control hook refuses an address the policy does not allow,
// even if a bug handed it one directly.
func TestGuardControlHook(t *testing.T) {
	port := listen(t, "127.0.0.1:0", "A")
	g, err := NewGuard(GuardConfig{})
	if err != nil {
		t.Fatal(err)
	}
	c, err := g.dialer.DialContext(context.Background(), "tcp", "127.0.0.1:"+strconv.Itoa(port))
	if c != nil {
		c.Close()
	}
	if !errors.Is(err, ErrUncheckedAddress) {
		t.Fatalf("raw dial = %v; want ErrUncheckedAddress", err)
	}
}

// Used as http.Transport.DialContext, the Guard checks every redirect hop.
func TestGuardRedirectHopsAreChecked(t *testing.T) {
	final := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		_, _ = io.WriteString(w, "secret")
	}))
	defer final.Close()
	finalPort := final.Listener.Addr().(*net.TCPAddr).Port
	start := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		target := r.URL.Query().Get("to")
		http.Redirect(w, r, "http://"+target+":"+strconv.Itoa(finalPort)+"/", http.StatusFound)
	}))
	defer start.Close()
	startPort := start.Listener.Addr().(*net.TCPAddr).Port

	res := netguardtest.NewResolver().Set("start.test", "127.0.0.1").Set("other.test", "127.0.0.1").Set("allowed.test", "127.0.0.1")
	g, err := NewGuard(GuardConfig{Allow: netpolicy.MustParsePatterns("start.test", "allowed.test"), Addresses: loopback8, Resolver: res})
	if err != nil {
		t.Fatal(err)
	}
	client := &http.Client{Transport: &http.Transport{DialContext: g.DialContext, Proxy: nil}}
	tests := []struct {
		name    string
		to      string
		wantErr error
	}{
		{name: "redirect to allowed host", to: "allowed.test"},
		{name: "redirect to unlisted host", to: "other.test", wantErr: ErrHostNotAllowed},
		{name: "redirect to ip literal", to: "127.0.0.1", wantErr: ErrHostNotAllowed},
		{name: "redirect to metadata", to: "169.254.169.254", wantErr: ErrHostNotAllowed},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			resp, err := client.Get("http://start.test:" + strconv.Itoa(startPort) + "/?to=" + tt.to)
			if resp != nil {
				resp.Body.Close()
			}
			if tt.wantErr == nil {
				if err != nil || resp.StatusCode != http.StatusOK {
					t.Fatalf("GET = %v, %v", resp, err)
				}
				return
			}
			if !errors.Is(err, tt.wantErr) {
				t.Fatalf("GET = %v; want %v", err, tt.wantErr)
			}
		})
	}
	if n := res.Count("other.test"); n != 0 {
		t.Fatalf("the unlisted redirect target was resolved %d times", n)
	}
}

func TestNewGuardValidates(t *testing.T) {
	if _, err := NewGuard(GuardConfig{DialTimeout: -1}); err == nil {
		t.Fatal("negative timeout accepted")
	}
	if _, err := NewGuard(GuardConfig{Addresses: netpolicy.AddressPolicy{UnsafeAllow: []netip.Prefix{{}}}}); err == nil {
		t.Fatal("invalid prefix accepted")
	}
}

// DialApproved skips the allowlist but not the address policy.
func TestGuardDialApproved(t *testing.T) {
	port := listen(t, "127.0.0.1:0", "A")
	res := netguardtest.NewResolver().Set("approved.test", "127.0.0.1").Set("meta.test", "169.254.169.254")
	g, err := NewGuard(GuardConfig{Addresses: loopback8, Resolver: res})
	if err != nil {
		t.Fatal(err)
	}
	tests := []struct {
		name    string
		host    string
		wantErr error
	}{
		{name: "approved host", host: "approved.test"},
		{name: "approved host resolving to metadata", host: "meta.test", wantErr: netpolicy.Metadata},
		{name: "approved mapped literal", host: "::ffff:127.0.0.1", wantErr: netpolicy.IPv4Mapped},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			h, err := netpolicy.ParseHost(tt.host)
			if err != nil {
				t.Fatal(err)
			}
			c, _, err := g.DialApproved(context.Background(), h, port)
			if tt.wantErr != nil {
				if c != nil {
					c.Close()
				}
				if !errors.Is(err, tt.wantErr) {
					t.Fatalf("DialApproved = %v; want %v", err, tt.wantErr)
				}
				return
			}
			if err != nil {
				t.Fatal(err)
			}
			if got := readName(t, c); got != "A" {
				t.Fatalf("reached %q", got)
			}
		})
	}
	if _, _, err := g.DialApproved(context.Background(), netpolicy.Host{}, port); !errors.Is(err, ErrHostNotAllowed) {
		t.Fatalf("zero host: %v", err)
	}
}
