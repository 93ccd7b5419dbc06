package netpolicy

import (
	"net/netip"
	"testing"
)

func BenchmarkParseHost(b *testing.B) {
	cases := []struct {
		name string
		in   string
	}{
		{name: "ascii", in: "api.github.com"},
		{name: "ascii-upper", in: "API.GitHub.com."},
		{name: "idna", in: "bücher.example"},
		{name: "ipv4-decimal", in: "2130706433"},
		{name: "ipv6", in: "[2001:db8::1]"},
	}
	for _, c := range cases {
		b.Run(c.name, func(b *testing.B) {
			b.ReportAllocs()
			for b.Loop() {
				if _, err := ParseHost(c.in); err != nil {
					b.Fatal(err)
				}
			}
		})
	}
}

func BenchmarkParseURL(b *testing.B) {
	b.ReportAllocs()
	for b.Loop() {
		if _, err := ParseURL("https://api.github.com:443/repos/acme/app/pulls?state=open"); err != nil {
			b.Fatal(err)
		}
	}
}

func BenchmarkParseAuthority(b *testing.B) {
	b.ReportAllocs()
	for b.Loop() {
		if _, _, err := ParseAuthority("api.github.com:443", 0); err != nil {
			b.Fatal(err)
		}
	}
}

func BenchmarkMatch(b *testing.B) {
	ps := MustParsePatterns("github.com", "*.githubusercontent.com", "pypi.org", "*.pythonhosted.org",
		"registry.npmjs.org", "proxy.golang.org", "sum.golang.org", "*.docker.io", "deb.debian.org", "*.example.com")
	h := mustHost("objects.githubusercontent.com")
	miss := mustHost("evil.example.net")
	b.Run("hit", func(b *testing.B) {
		b.ReportAllocs()
		for b.Loop() {
			if !MatchAny(ps, h) {
				b.Fatal("no match")
			}
		}
	})
	b.Run("miss", func(b *testing.B) {
		b.ReportAllocs()
		for b.Loop() {
			if MatchAny(ps, miss) {
				b.Fatal("match")
			}
		}
	})
}

func BenchmarkClassify(b *testing.B) {
	addrs := []netip.Addr{netip.MustParseAddr("140.82.112.3"), netip.MustParseAddr("2606:50c0:8000::153"), netip.MustParseAddr("2002:7f00:1::")}
	b.ReportAllocs()
	for b.Loop() {
		for _, a := range addrs {
			_ = Classify(a)
		}
	}
}
