package netpolicy

import (
	"errors"
	"testing"
)

func TestParseURL(t *testing.T) {
	tests := []struct {
		name    string
		in      string
		want    URL
		wantStr string
		wantErr error
	}{
		{name: "https default port", in: "https://github.com/a/b?x=1",
			want:    URL{Scheme: "https", Host: mustHost("github.com"), Port: 443, Path: "/a/b", RawQuery: "x=1"},
			wantStr: "https://github.com/a/b?x=1"},
		{name: "http default port", in: "http://example.com",
			want:    URL{Scheme: "http", Host: mustHost("example.com"), Port: 80, Path: "/"},
			wantStr: "http://example.com/"},
		{name: "upper scheme and host", in: "HTTPS://GitHub.COM:443/", want: URL{Scheme: "https", Host: mustHost("github.com"), Port: 443, Path: "/"},
			wantStr: "https://github.com/"},
		{name: "explicit port", in: "https://example.com:8443/x", want: URL{Scheme: "https", Host: mustHost("example.com"), Port: 8443, Path: "/x"},
			wantStr: "https://example.com:8443/x"},
		{name: "fragment dropped", in: "https://example.com/x#frag?y", want: URL{Scheme: "https", Host: mustHost("example.com"), Port: 443, Path: "/x"},
			wantStr: "https://example.com/x"},
		{name: "query only", in: "https://example.com?q", want: URL{Scheme: "https", Host: mustHost("example.com"), Port: 443, Path: "/", RawQuery: "q"},
			wantStr: "https://example.com/?q"},
		{name: "ipv6", in: "http://[::1]:8080/p", want: URL{Scheme: "http", Host: mustHost("::1"), Port: 8080, Path: "/p"},
			wantStr: "http://[::1]:8080/p"},
		{name: "circled loopback", in: "http://①②⑦.⓪.⓪.①/", want: URL{Scheme: "http", Host: mustHost("127.0.0.1"), Port: 80, Path: "/"},
			wantStr: "http://127.0.0.1/"},
		{name: "decimal loopback", in: "http://2130706433/", want: URL{Scheme: "http", Host: mustHost("127.0.0.1"), Port: 80, Path: "/"},
			wantStr: "http://127.0.0.1/"},
		{name: "trailing dot", in: "https://github.com./", want: URL{Scheme: "https", Host: mustHost("github.com"), Port: 443, Path: "/"},
			wantStr: "https://github.com/"},
		{name: "escaped path kept", in: "https://example.com/a%2Fb", want: URL{Scheme: "https", Host: mustHost("example.com"), Port: 443, Path: "/a%2Fb"},
			wantStr: "https://example.com/a%2Fb"},

		// Parser confusion: all rejected.
		{name: "backslash userinfo", in: "https://evil\\@github.com/", wantErr: ErrInvalidURL},
		{name: "slash backslash", in: "https:/\\evil/", wantErr: ErrInvalidURL},
		{name: "backslash in path", in: "https://github.com\\..\\evil/", wantErr: ErrInvalidURL},
		{name: "tab in host", in: "http://github.com\t/", wantErr: ErrInvalidURL},
		{name: "newline in path", in: "http://github.com/\nHost: evil", wantErr: ErrInvalidURL},
		{name: "space in path", in: "http://github.com/a b", wantErr: ErrInvalidURL},
		{name: "userinfo", in: "https://user:pass@github.com/", wantErr: ErrInvalidURL},
		{name: "userinfo evil host", in: "https://github.com@evil.com/", wantErr: ErrInvalidURL},
		{name: "two at", in: "https://a@github.com@evil.com/", wantErr: ErrInvalidURL},
		{name: "empty userinfo", in: "https://@github.com/", wantErr: ErrInvalidURL},
		{name: "percent host", in: "https://git%68ub.com/", wantErr: ErrInvalidHost},
		{name: "empty host", in: "https:///path", wantErr: ErrInvalidHost},
		{name: "single slash", in: "https:/github.com/", wantErr: ErrInvalidURL},
		{name: "no slashes", in: "https:github.com", wantErr: ErrInvalidURL},
		{name: "relative", in: "//github.com/", wantErr: ErrInvalidURL},
		{name: "no scheme", in: "github.com/x", wantErr: ErrInvalidURL},
		{name: "file scheme", in: "file:///etc/passwd", wantErr: ErrInvalidURL},
		{name: "ftp scheme", in: "ftp://example.com/", wantErr: ErrInvalidURL},
		{name: "javascript", in: "javascript://example.com/%0aalert(1)", wantErr: ErrInvalidURL},
		{name: "port 65536", in: "http://example.com:65536/", wantErr: ErrInvalidPort},
		{name: "port 0", in: "http://example.com:0/", wantErr: ErrInvalidPort},
		{name: "port plus", in: "http://example.com:+80/", wantErr: ErrInvalidPort},
		{name: "port leading zero", in: "http://example.com:080/", wantErr: ErrInvalidPort},
		{name: "port empty", in: "http://example.com:/", wantErr: ErrInvalidPort},
		{name: "port letters", in: "http://example.com:80a/", wantErr: ErrInvalidPort},
		{name: "port huge", in: "http://example.com:99999999999999999999/", wantErr: ErrInvalidPort},
		{name: "two ports", in: "http://example.com:80:80/", wantErr: ErrInvalidHost},
		{name: "bare ipv6", in: "http://::1/", wantErr: ErrInvalidHost},
		{name: "ipv6 zone", in: "http://[fe80::1%25eth0]/", wantErr: ErrInvalidHost},
		{name: "two trailing dots", in: "https://github.com../", wantErr: ErrInvalidHost},
		{name: "bad escape in path", in: "https://example.com/%zz", wantErr: ErrInvalidURL},
		{name: "unicode space", in: "https://example.com/\u3000", wantErr: ErrInvalidURL},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			u, err := ParseURL(tt.in)
			if tt.wantErr != nil {
				if !errors.Is(err, tt.wantErr) {
					t.Fatalf("ParseURL(%q) = %+v, %v; want error %v", tt.in, u, err, tt.wantErr)
				}
				return
			}
			if err != nil {
				t.Fatalf("ParseURL(%q): %v", tt.in, err)
			}
			if u != tt.want {
				t.Fatalf("ParseURL(%q) = %+v; want %+v", tt.in, u, tt.want)
			}
			if s := u.String(); s != tt.wantStr {
				t.Fatalf("String() = %q; want %q", s, tt.wantStr)
			}
			again, err := ParseURL(u.String())
			if err != nil || again != u {
				t.Fatalf("not idempotent: %+v, %v", again, err)
			}
		})
	}
}

func TestParseURLScheme(t *testing.T) {
	schemes := map[string]int{"ssh": 22, "git": 0}
	tests := []struct {
		name     string
		in       string
		wantPort int
		wantErr  error
	}{
		{name: "ssh default", in: "ssh://github.com/acme/app.git", wantPort: 22},
		{name: "git with port", in: "git://example.com:9418/x", wantPort: 9418},
		{name: "git without port", in: "git://example.com/x", wantErr: ErrPortRequired},
		{name: "http not asked for", in: "http://example.com/", wantErr: ErrInvalidURL},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			u, err := ParseURLScheme(tt.in, schemes)
			if tt.wantErr != nil {
				if !errors.Is(err, tt.wantErr) {
					t.Fatalf("got %+v, %v; want %v", u, err, tt.wantErr)
				}
				return
			}
			if err != nil || u.Port != tt.wantPort {
				t.Fatalf("got %+v, %v; want port %d", u, err, tt.wantPort)
			}
		})
	}
}

func TestParseAuthority(t *testing.T) {
	tests := []struct {
		name        string
		in          string
		defaultPort int
		wantHost    string
		wantPort    int
		wantErr     error
	}{
		{name: "connect", in: "github.com:443", wantHost: "github.com", wantPort: 443},
		{name: "connect upper", in: "GitHub.com.:443", wantHost: "github.com", wantPort: 443},
		{name: "connect no port", in: "github.com", wantErr: ErrPortRequired},
		{name: "host header default", in: "github.com", defaultPort: 80, wantHost: "github.com", wantPort: 80},
		{name: "ipv6", in: "[::1]:8080", wantHost: "::1", wantPort: 8080},
		{name: "ipv6 no port", in: "[::1]", wantErr: ErrPortRequired},
		{name: "ipv6 default", in: "[::1]", defaultPort: 443, wantHost: "::1", wantPort: 443},
		{name: "bare ipv6", in: "::1:443", wantErr: ErrInvalidHost},
		{name: "decimal ip", in: "2130706433:443", wantHost: "127.0.0.1", wantPort: 443},
		{name: "port 65535", in: "a.com:65535", wantHost: "a.com", wantPort: 65535},
		{name: "port 65536", in: "a.com:65536", wantErr: ErrInvalidPort},
		{name: "port 0", in: "a.com:0", wantErr: ErrInvalidPort},
		{name: "port space", in: "a.com: 443", wantErr: ErrInvalidPort},
		{name: "port plus", in: "a.com:+443", wantErr: ErrInvalidPort},
		{name: "port minus", in: "a.com:-1", wantErr: ErrInvalidPort},
		{name: "port empty", in: "a.com:", wantErr: ErrInvalidPort},
		{name: "port hex", in: "a.com:0x1bb", wantErr: ErrInvalidPort},
		{name: "userinfo", in: "user@a.com:443", wantErr: ErrInvalidHost},
		{name: "text after bracket", in: "[::1]x", wantErr: ErrInvalidHost},
		{name: "unbalanced", in: "[::1:443", wantErr: ErrInvalidHost},
		{name: "empty", in: "", wantErr: ErrInvalidHost},
		{name: "only port", in: ":443", wantErr: ErrInvalidHost},
		{name: "bad default", in: "a.com", defaultPort: 70000, wantErr: ErrInvalidPort},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			h, port, err := ParseAuthority(tt.in, tt.defaultPort)
			if tt.wantErr != nil {
				if !errors.Is(err, tt.wantErr) {
					t.Fatalf("ParseAuthority(%q) = %q, %d, %v; want %v", tt.in, h, port, err, tt.wantErr)
				}
				return
			}
			if err != nil || h.String() != tt.wantHost || port != tt.wantPort {
				t.Fatalf("ParseAuthority(%q) = %q, %d, %v; want %q, %d", tt.in, h, port, err, tt.wantHost, tt.wantPort)
			}
		})
	}
}

func mustHost(s string) Host {
	h, err := ParseHost(s)
	if err != nil {
		panic(err)
	}
	return h
}

func TestAuthorityHost(t *testing.T) {
	tests := []struct{ in, want string }{
		{in: "AKIA.Example.COM:443", want: "AKIA.Example.COM"},
		{in: "Example.COM.", want: "Example.COM."},
		{in: "[::1]:80", want: "[::1]"},
		{in: "[::1]", want: "[::1]"},
		{in: "bücher.DE:8080", want: "bücher.DE"},
		{in: "::1:80", want: "::1:80"}, // ParseAuthority refuses it; nothing is cut
		{in: "", want: ""},
	}
	for _, tt := range tests {
		t.Run(tt.in, func(t *testing.T) {
			if got := AuthorityHost(tt.in); got != tt.want {
				t.Fatalf("AuthorityHost(%q) = %q; want %q", tt.in, got, tt.want)
			}
		})
	}
}

// TestURLIsString: IsString agrees with String on canonical and
// non-canonical spellings (case, default and explicit ports, IPv6, empty
// path, query, fragment).
func TestURLIsString(t *testing.T) {
	for _, raw := range []string{
		"https://pkg.go.dev/net/url", "https://PKG.go.dev/net/url", "HTTPS://pkg.go.dev/net/url", "https://pkg.go.dev",
		"https://pkg.go.dev:443/", "http://x.com:8080/a?b=c", "http://x.com:8080/a?b=c#d", "http://x.com:80/",
		"http://[::1]:8080/", "http://[::1]/x", "http://[0:0::1]/", "https://x.com/?", "https://x.com/a?b", "http://127.0.0.1/",
	} {
		u, err := ParseURL(raw)
		if err != nil {
			t.Fatalf("ParseURL(%q): %v", raw, err)
		}
		if got, want := u.IsString(raw), raw == u.String(); got != want {
			t.Errorf("%q (String %q): IsString = %v, want %v", raw, u.String(), got, want)
		}
		if !u.IsString(u.String()) {
			t.Errorf("%q: IsString(String()) = false", raw)
		}
		for _, other := range []string{"", u.String() + "x", u.String()[:len(u.String())-1]} {
			if u.IsString(other) {
				t.Errorf("%q: IsString(%q) = true", raw, other)
			}
		}
	}
}
