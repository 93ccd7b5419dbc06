package netguard

import (
	"testing"

	"ironcurtain.dev/gateway/netpolicy"
)

// BenchmarkGuardCheckHost is the per-request host decision.
func BenchmarkGuardCheckHost(b *testing.B) {
	g, err := NewGuard(GuardConfig{Allow: netpolicy.MustParsePatterns("github.com", "*.githubusercontent.com", "pypi.org", "*.pythonhosted.org")})
	if err != nil {
		b.Fatal(err)
	}
	h, _ := netpolicy.ParseHost("objects.githubusercontent.com")
	b.ReportAllocs()
	for b.Loop() {
		if err := g.CheckHost(h); err != nil {
			b.Fatal(err)
		}
	}
}
