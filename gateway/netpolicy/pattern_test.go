package netpolicy

import (
	"errors"
	"testing"
)

func TestParsePattern(t *testing.T) {
	tests := []struct {
		name    string
		in      string
		want    string
		wantErr bool
	}{
		{name: "exact", in: "GitHub.com.", want: "github.com"},
		{name: "suffix", in: "*.GitHub.com", want: "*.github.com"},
		{name: "any", in: "*", want: "*"},
		{name: "ipv4", in: "0x7f.1", want: "127.0.0.1"},
		{name: "ipv6", in: "[::1]", want: "[::1]"},
		{name: "ipv6 bare", in: "2001:db8::1", want: "[2001:db8::1]"},
		{name: "idna suffix", in: "*.bücher.example", want: "*.xn--bcher-kva.example"},
		{name: "star inside", in: "a.*.com", wantErr: true},
		{name: "star prefix no dot", in: "*example.com", wantErr: true},
		{name: "double star", in: "*.*.com", wantErr: true},
		{name: "star dot only", in: "*.", wantErr: true},
		{name: "star suffix", in: "example.*", wantErr: true},
		{name: "wildcard ip", in: "*.127.0.0.1", wantErr: true},
		{name: "wildcard decimal ip", in: "*.2130706433", wantErr: true},
		{name: "empty", in: "", wantErr: true},
		{name: "port", in: "github.com:443", wantErr: true},
		{name: "space", in: " github.com", wantErr: true},
		{name: "url", in: "https://github.com", wantErr: true},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			p, err := ParsePattern(tt.in)
			if tt.wantErr {
				if !errors.Is(err, ErrInvalidPattern) {
					t.Fatalf("ParsePattern(%q) = %q, %v; want ErrInvalidPattern", tt.in, p, err)
				}
				return
			}
			if err != nil || p.String() != tt.want {
				t.Fatalf("ParsePattern(%q) = %q, %v; want %q", tt.in, p, err, tt.want)
			}
			again, err := ParsePattern(p.String())
			if err != nil || again != p {
				t.Fatalf("not idempotent: %q, %v", again, err)
			}
		})
	}
}

func TestPatternMatch(t *testing.T) {
	tests := []struct {
		name    string
		pattern string
		host    string
		want    bool
	}{
		{name: "exact", pattern: "github.com", host: "github.com", want: true},
		{name: "exact case and dot", pattern: "github.com", host: "GITHUB.com.", want: true},
		{name: "exact not subdomain", pattern: "github.com", host: "api.github.com", want: false},
		{name: "exact not suffix", pattern: "github.com", host: "evilgithub.com", want: false},
		{name: "suffix apex", pattern: "*.github.com", host: "github.com", want: true},
		{name: "suffix sub", pattern: "*.github.com", host: "api.github.com", want: true},
		{name: "suffix deep", pattern: "*.github.com", host: "a.b.github.com", want: true},
		{name: "suffix dot boundary", pattern: "*.github.com", host: "evilgithub.com", want: false},
		{name: "suffix not prefix", pattern: "*.github.com", host: "github.com.evil.com", want: false},
		{name: "suffix not parent", pattern: "*.api.github.com", host: "github.com", want: false},
		{name: "suffix idna", pattern: "*.bücher.example", host: "www.xn--bcher-kva.example", want: true},
		{name: "any name", pattern: "*", host: "example.com", want: true},
		{name: "any never ipv4", pattern: "*", host: "127.0.0.1", want: false},
		{name: "any never decimal ip", pattern: "*", host: "2130706433", want: false},
		{name: "any never ipv6", pattern: "*", host: "::1", want: false},
		{name: "ip exact", pattern: "127.0.0.1", host: "127.0.0.1", want: true},
		{name: "ip exact other notation", pattern: "127.0.0.1", host: "0x7f000001", want: true},
		{name: "ip exact not mapped", pattern: "127.0.0.1", host: "::ffff:127.0.0.1", want: false},
		{name: "ip exact other ip", pattern: "127.0.0.1", host: "127.0.0.2", want: false},
		{name: "ipv6 exact", pattern: "[2001:db8::1]", host: "2001:DB8:0::1", want: true},
		{name: "name pattern not ip", pattern: "localhost", host: "127.0.0.1", want: false},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			p, err := ParsePattern(tt.pattern)
			if err != nil {
				t.Fatalf("ParsePattern(%q): %v", tt.pattern, err)
			}
			h, err := ParseHost(tt.host)
			if err != nil {
				t.Fatalf("ParseHost(%q): %v", tt.host, err)
			}
			if got := p.Match(h); got != tt.want {
				t.Fatalf("%q.Match(%q) = %v; want %v", p, h, got, tt.want)
			}
		})
	}
	// A suffix pattern cannot be built over an IP, but Match must not rely on that.
	if (Pattern{kind: patternSuffix, host: Host{name: "0.0.1"}}).Match(mustHost("127.0.0.1")) {
		t.Fatal("a suffix pattern matched an IP literal")
	}
	if (Pattern{}).Match(mustHost("a.com")) {
		t.Fatal("zero Pattern matched")
	}
	if MustParsePatterns("*")[0].Match(Host{}) {
		t.Fatal("a pattern matched the zero Host")
	}
}

func TestMatchAny(t *testing.T) {
	ps := MustParsePatterns("github.com", "*.githubusercontent.com", "192.0.2.7")
	tests := []struct {
		name     string
		host     string
		want     bool
		wantRule string
	}{
		{name: "first", host: "github.com", want: true, wantRule: "github.com"},
		{name: "second", host: "raw.githubusercontent.com", want: true, wantRule: "*.githubusercontent.com"},
		{name: "ip", host: "192.0.2.7", want: true, wantRule: "192.0.2.7"},
		{name: "none", host: "gist.github.com", want: false},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			h := mustHost(tt.host)
			p, ok := FirstMatch(ps, h)
			if ok != tt.want || MatchAny(ps, h) != tt.want || (ok && p.String() != tt.wantRule) {
				t.Fatalf("FirstMatch(%q) = %q, %v; want %q, %v", h, p, ok, tt.wantRule, tt.want)
			}
		})
	}
}

func TestParsePatterns(t *testing.T) {
	_, err := ParsePatterns([]string{"a.com", "b.*"})
	var ie *IndexError
	if !errors.As(err, &ie) || ie.Index != 1 || !errors.Is(err, ErrInvalidPattern) {
		t.Fatalf("ParsePatterns error = %v; want an IndexError at 1", err)
	}
	ps, err := ParsePatterns([]string{"a.com", "*.b.com"})
	if err != nil || len(ps) != 2 {
		t.Fatalf("ParsePatterns = %v, %v", ps, err)
	}
	var p Pattern
	if err := p.UnmarshalText([]byte("*.x.com")); err != nil || p.String() != "*.x.com" {
		t.Fatalf("UnmarshalText = %q, %v", p, err)
	}
	if err := p.UnmarshalText([]byte("x.*")); err == nil {
		t.Fatal("UnmarshalText accepted a bad pattern")
	}
}
