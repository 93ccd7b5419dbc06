package netpolicy

import (
	"errors"
	"net/netip"
	"strings"
	"testing"
)

func TestParseHost(t *testing.T) {
	tests := []struct {
		name    string
		in      string
		want    string // canonical form; "" means an error is expected
		wantIP  bool
		wantErr error
	}{
		// Plain names: lower-cased, one trailing dot removed.
		{name: "plain", in: "github.com", want: "github.com"},
		{name: "uppercase", in: "GitHub.COM", want: "github.com"},
		{name: "one trailing dot", in: "github.com.", want: "github.com"},
		{name: "two trailing dots", in: "github.com..", wantErr: ErrInvalidHost},
		{name: "only a dot", in: ".", wantErr: ErrInvalidHost},
		{name: "leading dot", in: ".github.com", wantErr: ErrInvalidHost},
		{name: "empty label", in: "a..b", wantErr: ErrInvalidHost},
		{name: "single label", in: "localhost", want: "localhost"},
		{name: "hyphens in 3-4", in: "r3---sn-x.googlevideo.com", want: "r3---sn-x.googlevideo.com"},
		{name: "leading hyphen", in: "-a.com", wantErr: ErrInvalidHost},
		{name: "trailing hyphen", in: "a-.com", wantErr: ErrInvalidHost},
		{name: "underscore", in: "a_b.com", wantErr: ErrInvalidHost},
		{name: "label of 63", in: strings.Repeat("a", 63) + ".com", want: strings.Repeat("a", 63) + ".com"},
		{name: "label of 64", in: strings.Repeat("a", 64) + ".com", wantErr: ErrInvalidHost},
		{name: "name of 254", in: strings.Repeat("a.", 126) + "ab", wantErr: ErrInvalidHost},
		{name: "huge input", in: strings.Repeat("a", 5000), wantErr: ErrInvalidHost},
		{name: "empty", in: "", wantErr: ErrInvalidHost},

		// IDNA UTS #46.
		{name: "idna unicode", in: "bücher.example", want: "xn--bcher-kva.example"},
		{name: "idna a-label", in: "xn--bcher-kva.example", want: "xn--bcher-kva.example"},
		{name: "idna a-label upper", in: "XN--BCHER-KVA.example", want: "xn--bcher-kva.example"},
		{name: "idna bad punycode", in: "xn--zz-.example", wantErr: ErrInvalidHost},
		{name: "idna ascii-only a-label", in: "xn--abc-.com", wantErr: ErrInvalidHost},
		{name: "idna fullwidth", in: "ｇｉｔｈｕｂ．ｃｏｍ", want: "github.com"},
		{name: "idna ideographic dot", in: "github。com", want: "github.com"},
		{name: "idna fullwidth at", in: "evil.com＠github.com", wantErr: ErrInvalidHost},
		{name: "idna fullwidth slash", in: "evil.com／github.com", wantErr: ErrInvalidHost},
		{name: "idna fullwidth colon", in: "github.com：443", wantErr: ErrInvalidHost},
		{name: "idna sharp s non-transitional", in: "faß.de", want: "xn--fa-hia.de"},
		{name: "idna bidi violation", in: "a\u05d0.com", wantErr: ErrInvalidHost},
		{name: "idna soft hyphen", in: "git\u00adhub.com", wantErr: ErrInvalidHost},
		{name: "idna zero width space", in: "git\u200bhub.com", wantErr: ErrInvalidHost},
		{name: "idna zero width joiner", in: "git\u200dhub.com", wantErr: ErrInvalidHost},
		{name: "idna variation selector", in: "github\ufe0f.com", wantErr: ErrInvalidHost},
		{name: "idna no-break space", in: "github.com\u00a0", wantErr: ErrInvalidHost},
		{name: "idna line separator", in: "github.com\u2028", wantErr: ErrInvalidHost},
		{name: "invalid utf8", in: "git\xffhub.com", wantErr: ErrInvalidHost},

		// Characters other parsers read differently.
		{name: "backslash", in: "evil.com\\github.com", wantErr: ErrInvalidHost},
		{name: "tab", in: "github.com\t", wantErr: ErrInvalidHost},
		{name: "newline", in: "github.com\n", wantErr: ErrInvalidHost},
		{name: "nul", in: "github.com\x00.evil", wantErr: ErrInvalidHost},
		{name: "del", in: "github.com\x7f", wantErr: ErrInvalidHost},
		{name: "space", in: "github.com ", wantErr: ErrInvalidHost},
		{name: "leading space", in: " github.com", wantErr: ErrInvalidHost},
		{name: "percent escape", in: "git%68ub.com", wantErr: ErrInvalidHost},
		{name: "percent dot", in: "127%2e0.0.1", wantErr: ErrInvalidHost},
		{name: "userinfo", in: "user@github.com", wantErr: ErrInvalidHost},
		{name: "two at", in: "a@b@github.com", wantErr: ErrInvalidHost},
		{name: "slash", in: "github.com/x", wantErr: ErrInvalidHost},
		{name: "question", in: "github.com?x", wantErr: ErrInvalidHost},
		{name: "hash", in: "github.com#x", wantErr: ErrInvalidHost},
		{name: "port", in: "github.com:443", wantErr: ErrInvalidHost},
		{name: "star", in: "*.github.com", wantErr: ErrInvalidHost},

		// Every IPv4 notation is an IP, never a name.
		{name: "dotted quad", in: "127.0.0.1", want: "127.0.0.1", wantIP: true},
		{name: "dotted quad trailing dot", in: "127.0.0.1.", want: "127.0.0.1", wantIP: true},
		{name: "dotted quad two dots", in: "127.0.0.1..", wantErr: ErrInvalidHost},
		{name: "decimal", in: "2130706433", want: "127.0.0.1", wantIP: true},
		{name: "hex", in: "0x7f000001", want: "127.0.0.1", wantIP: true},
		{name: "hex upper", in: "0X7F000001", want: "127.0.0.1", wantIP: true},
		{name: "octal", in: "0177.0.0.1", want: "127.0.0.1", wantIP: true},
		{name: "octal long zeros", in: "000000177.0.0.01", want: "127.0.0.1", wantIP: true},
		{name: "short 2", in: "127.1", want: "127.0.0.1", wantIP: true},
		{name: "short 3", in: "127.0.1", want: "127.0.0.1", wantIP: true},
		{name: "mixed", in: "0x7f.0.01", want: "127.0.0.1", wantIP: true},
		{name: "hex parts", in: "0xa9.0xfe.0xa9.0xfe", want: "169.254.169.254", wantIP: true},
		{name: "decimal metadata", in: "2852039166", want: "169.254.169.254", wantIP: true},
		{name: "zero", in: "0", want: "0.0.0.0", wantIP: true},
		{name: "bare 0x", in: "0x", want: "0.0.0.0", wantIP: true},
		{name: "circled digits", in: "①②⑦.⓪.⓪.①", want: "127.0.0.1", wantIP: true},
		{name: "fullwidth digits", in: "１２７．０．０．１", want: "127.0.0.1", wantIP: true},
		{name: "max short", in: "1.16777215", want: "1.255.255.255", wantIP: true},
		{name: "overflow short", in: "1.16777216", wantErr: ErrInvalidHost},
		{name: "overflow octet", in: "256.0.0.1", wantErr: ErrInvalidHost},
		{name: "overflow decimal", in: "4294967296", wantErr: ErrInvalidHost},
		{name: "overflow huge", in: "99999999999999999999999", wantErr: ErrInvalidHost},
		{name: "bad octal", in: "08.0.0.1", wantErr: ErrInvalidHost},
		{name: "bad hex", in: "0xg.0.0.1", wantErr: ErrInvalidHost},
		{name: "five parts", in: "1.2.3.4.5", wantErr: ErrInvalidHost},
		{name: "numeric tld", in: "example.123", wantErr: ErrInvalidHost},
		{name: "hex tld", in: "example.0x1", wantErr: ErrInvalidHost},
		{name: "numeric inner label is a name", in: "127.0.0.1.nip.io", want: "127.0.0.1.nip.io"},
		{name: "hex-looking name", in: "0x7f000001.com", want: "0x7f000001.com"},

		// IPv6 literals: brackets optional, canonical without brackets.
		{name: "v6 loopback", in: "::1", want: "::1", wantIP: true},
		{name: "v6 brackets", in: "[::1]", want: "::1", wantIP: true},
		{name: "v6 upper", in: "[2001:DB8::1]", want: "2001:db8::1", wantIP: true},
		{name: "v6 long", in: "2001:0db8:0000:0000:0000:0000:0000:0001", want: "2001:db8::1", wantIP: true},
		{name: "v6 mapped", in: "[::ffff:127.0.0.1]", want: "::ffff:127.0.0.1", wantIP: true},
		{name: "v6 mapped hex", in: "[::ffff:7f00:1]", want: "::ffff:127.0.0.1", wantIP: true},
		{name: "v6 zone", in: "[fe80::1%eth0]", wantErr: ErrInvalidHost},
		{name: "v6 zone escaped", in: "[fe80::1%25eth0]", wantErr: ErrInvalidHost},
		{name: "v6 unbalanced", in: "[::1", wantErr: ErrInvalidHost},
		{name: "v6 with port", in: "[::1]:80", wantErr: ErrInvalidHost},
		{name: "v4 in brackets", in: "[127.0.0.1]", wantErr: ErrInvalidHost},
		{name: "name in brackets", in: "[github.com]", wantErr: ErrInvalidHost},
		{name: "v6 bad", in: "::g", wantErr: ErrInvalidHost},
		{name: "v6 leading zero v4", in: "::ffff:127.0.0.01", wantErr: ErrInvalidHost},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			h, err := ParseHost(tt.in)
			if tt.wantErr != nil {
				if !errors.Is(err, tt.wantErr) {
					t.Fatalf("ParseHost(%q) = %q, %v; want error %v", tt.in, h, err, tt.wantErr)
				}
				if !h.IsZero() {
					t.Fatalf("ParseHost(%q) returned a non-zero host %q with an error", tt.in, h)
				}
				return
			}
			if err != nil {
				t.Fatalf("ParseHost(%q): %v", tt.in, err)
			}
			if h.String() != tt.want || h.IsIP() != tt.wantIP {
				t.Fatalf("ParseHost(%q) = %q (ip %v); want %q (ip %v)", tt.in, h, h.IsIP(), tt.want, tt.wantIP)
			}
			if tt.wantIP && h.Addr().String() != tt.want {
				t.Fatalf("Addr() = %v; want %v", h.Addr(), tt.want)
			}
			again, err := ParseHost(h.String())
			if err != nil || again != h {
				t.Fatalf("not idempotent: ParseHost(%q) = %q, %v", h, again, err)
			}
		})
	}
}

func TestHostForms(t *testing.T) {
	tests := []struct {
		name     string
		in       string
		urlHost  string
		hostPort string
	}{
		{name: "name", in: "Example.com", urlHost: "example.com", hostPort: "example.com:443"},
		{name: "v4", in: "0x7f.1", urlHost: "127.0.0.1", hostPort: "127.0.0.1:443"},
		{name: "v6", in: "::1", urlHost: "[::1]", hostPort: "[::1]:443"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			h, err := ParseHost(tt.in)
			if err != nil {
				t.Fatal(err)
			}
			if got := h.URLHost(); got != tt.urlHost {
				t.Errorf("URLHost() = %q; want %q", got, tt.urlHost)
			}
			if got := h.HostPort(443); got != tt.hostPort {
				t.Errorf("HostPort(443) = %q; want %q", got, tt.hostPort)
			}
			b, _ := h.MarshalText()
			var back Host
			if err := back.UnmarshalText(b); err != nil || back != h {
				t.Errorf("text round trip = %q, %v", back, err)
			}
		})
	}
	var zero Host
	if !zero.IsZero() || zero.IsIP() || zero.Addr().IsValid() {
		t.Fatal("zero Host must be zero, not an IP")
	}
	if err := zero.UnmarshalText([]byte("a b")); err == nil {
		t.Fatal("UnmarshalText accepted a bad host")
	}
}

func TestParseErrorIsShortAndSafe(t *testing.T) {
	long := strings.Repeat("a", 500) + "\\"
	_, err := ParseHost(long)
	var pe *ParseError
	if !errors.As(err, &pe) {
		t.Fatalf("error %T is not a *ParseError", err)
	}
	if len(err.Error()) > 200 {
		t.Fatalf("error message is %d bytes; want it bounded", len(err.Error()))
	}
	if !strings.Contains(err.Error(), "backslash") {
		t.Fatalf("error %q does not say why", err)
	}
}

func TestParseIPv4LooseMatchesNetip(t *testing.T) {
	// Every canonical dotted quad parses to itself.
	for _, s := range []string{"0.0.0.0", "1.2.3.4", "255.255.255.255", "10.0.0.1"} {
		a, ok := parseIPv4Loose(s)
		if !ok || a != netip.MustParseAddr(s) {
			t.Errorf("parseIPv4Loose(%q) = %v, %v", s, a, ok)
		}
	}
}
