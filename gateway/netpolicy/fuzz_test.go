package netpolicy

import (
	"net/netip"
	"strings"
	"testing"
)

var fuzzHostSeeds = []string{
	"github.com", "GitHub.COM.", "github.com..", "bücher.example", "xn--bcher-kva.example",
	"①②⑦.⓪.⓪.①", "2130706433", "0x7f000001", "0177.0.0.1", "127.1", "0x", "[::1]", "::ffff:127.0.0.1",
	"[fe80::1%eth0]", "evil\\@github.com", "a@b@c", "git%68ub.com", "faß.de", "a\u05d0.com",
	"ｇｉｔｈｕｂ．ｃｏｍ", "r3---sn-x.googlevideo.com", "1.2.3.4.5", "example.123", "",
}

// FuzzParseHost: never panics; a parsed host is canonical (idempotent), its
// text is plain ASCII with no characters other parsers treat specially, and an
// IP host's text is the address's own canonical text.
func FuzzParseHost(f *testing.F) {
	for _, s := range fuzzHostSeeds {
		f.Add(s)
	}
	f.Fuzz(func(t *testing.T, raw string) {
		h, err := ParseHost(raw)
		if err != nil {
			if !h.IsZero() {
				t.Fatalf("error with non-zero host %q", h)
			}
			return
		}
		s := h.String()
		if s == "" {
			t.Fatalf("ParseHost(%q) gave an empty host", raw)
		}
		again, err := ParseHost(s)
		if err != nil || again != h {
			t.Fatalf("not idempotent: ParseHost(%q) = %q; ParseHost(%q) = %q, %v", raw, h, s, again, err)
		}
		if h.IsIP() {
			if h.Addr().String() != s || h.Addr().Zone() != "" {
				t.Fatalf("IP host %q has address %v", s, h.Addr())
			}
			return
		}
		for i := 0; i < len(s); i++ {
			c := s[i]
			if !('a' <= c && c <= 'z' || '0' <= c && c <= '9' || c == '-' || c == '.') {
				t.Fatalf("name %q (from %q) contains %q", s, raw, c)
			}
		}
		if strings.HasSuffix(s, ".") || strings.HasPrefix(s, ".") || strings.Contains(s, "..") {
			t.Fatalf("name %q has an empty label", s)
		}
		if endsInNumber(s) {
			t.Fatalf("name %q ends in a number but is not an IP", s)
		}
		if _, err := netip.ParseAddr(s); err == nil {
			t.Fatalf("name %q parses as an IP address", s)
		}
	})
}

// FuzzParseURL: never panics; a parsed URL round-trips through String, and
// its host is what ParseHost makes of the authority.
func FuzzParseURL(f *testing.F) {
	for _, s := range []string{
		"https://github.com/a?b#c", "http://[::1]:8080/", "https://evil\\@github.com/", "https:/\\evil/",
		"http://github.com\t/", "http://a@b/", "http://x:65536/", "http://①②⑦.⓪.⓪.①/", "HTTPS://X.COM:443",
		"http://x:0443/", "http://2130706433/", "http://x/%zz", "http://[fe80::1%25en0]/",
	} {
		f.Add(s)
	}
	f.Fuzz(func(t *testing.T, raw string) {
		u, err := ParseURL(raw)
		if err != nil {
			return
		}
		if u.Port < 1 || u.Port > 65535 || u.Host.IsZero() || (u.Scheme != "http" && u.Scheme != "https") {
			t.Fatalf("ParseURL(%q) = %+v", raw, u)
		}
		if !u.IsString(u.String()) || u.IsString(raw) != (raw == u.String()) {
			t.Fatalf("IsString disagrees with String: %q -> %q", raw, u.String())
		}
		again, err := ParseURL(u.String())
		if err != nil || again != u {
			t.Fatalf("not idempotent: %q -> %q -> %+v, %v", raw, u.String(), again, err)
		}
		h, port, err := ParseAuthority(u.Authority(), 0)
		if err != nil || h != u.Host || port != u.Port {
			t.Fatalf("authority %q reparsed as %q %d %v", u.Authority(), h, port, err)
		}
	})
}

// FuzzParseAuthority: never panics; ports are in range; the result
// round-trips through HostPort.
func FuzzParseAuthority(f *testing.F) {
	for _, s := range []string{"github.com:443", "[::1]:80", "a.com", "a.com:", "a.com:+1", "a.com:65536", "::1:80", "[::1]x"} {
		f.Add(s)
	}
	f.Fuzz(func(t *testing.T, raw string) {
		h, port, err := ParseAuthority(raw, 0)
		if err != nil {
			return
		}
		if port < 1 || port > 65535 {
			t.Fatalf("ParseAuthority(%q) port %d", raw, port)
		}
		h2, port2, err := ParseAuthority(h.HostPort(port), 0)
		if err != nil || h2 != h || port2 != port {
			t.Fatalf("round trip of %q: %q %d %v", raw, h2, port2, err)
		}
		// AuthorityHost splits as ParseAuthority does: its text is the host as given.
		text := AuthorityHost(raw)
		if strings.Contains(text, ":") && !strings.HasPrefix(text, "[") {
			t.Fatalf("AuthorityHost(%q) = %q keeps the port", raw, text)
		}
		if h3, err := ParseHost(text); err != nil || h3 != h {
			t.Fatalf("AuthorityHost(%q) = %q, which parses to %q %v; want %q", raw, text, h3, err, h)
		}
	})
}

// FuzzPatternMatch: never panics; Match true means the host equals the
// pattern or is a dot-suffix of it; an IP host never matches a wildcard.
func FuzzPatternMatch(f *testing.F) {
	f.Add("*.github.com", "api.github.com")
	f.Add("*.github.com", "evilgithub.com")
	f.Add("*", "127.0.0.1")
	f.Add("*", "2130706433")
	f.Add("127.0.0.1", "0x7f.1")
	f.Add("github.com", "GITHUB.COM.")
	f.Add("*.bücher.example", "a.xn--bcher-kva.example")
	f.Fuzz(func(t *testing.T, pattern, host string) {
		p, err := ParsePattern(pattern)
		if err != nil {
			return
		}
		h, err := ParseHost(host)
		if err != nil {
			return
		}
		if !p.Match(h) {
			return
		}
		if h.IsIP() && p.IsWildcard() {
			t.Fatalf("wildcard %q matched IP %q", p, h)
		}
		switch {
		case p.kind == patternAny:
		case p.kind == patternExact:
			if p.host != h {
				t.Fatalf("exact %q matched %q", p, h)
			}
		default:
			s, n := p.host.String(), h.String()
			if n != s && !strings.HasSuffix(n, "."+s) {
				t.Fatalf("%q matched %q", p, h)
			}
		}
	})
}

// FuzzClassify: never panics; Check agrees with Classify; an address whose
// embedded IPv4 address is not public is never public itself.
func FuzzClassify(f *testing.F) {
	for _, s := range []string{"127.0.0.1", "::ffff:127.0.0.1", "2002:7f00:1::", "64:ff9b::a9fe:a9fe", "2001::1", "8.8.8.8", "2606:4700::1"} {
		a := netip.MustParseAddr(s).As16()
		f.Add(a[:])
	}
	f.Fuzz(func(t *testing.T, b []byte) {
		var a netip.Addr
		switch len(b) {
		case 4:
			a = netip.AddrFrom4([4]byte(b))
		case 16:
			a = netip.AddrFrom16([16]byte(b))
		default:
			return
		}
		c := Classify(a)
		err := AddressPolicy{}.Check(a)
		if (c == Public) != (err == nil) {
			t.Fatalf("Classify(%v) = %v but Check = %v", a, c, err)
		}
		if a.Is4In6() {
			if c&IPv4Mapped == 0 {
				t.Fatalf("%v not classed as mapped", a)
			}
			if inner := Classify(a.Unmap()); !c.Has(inner) {
				t.Fatalf("%v is %v but its IPv4 address is %v", a, c, inner)
			}
		}
	})
}
