package egress

import (
	"net/netip"
	"testing"
	"time"

	"ironcurtain.dev/gateway/config"
	"ironcurtain.dev/gateway/internal/netlimit"
)

func TestProxyConfigFrom(t *testing.T) {
	c, err := config.Parse("gateway.yaml", []byte(`
egress:
  allowed_hosts: ["github.com", "*.githubusercontent.com"]
  allowed_ports: [443]
  escalate_unknown_hosts: true
  idle_timeout: 90s
  unsafe_allow_addresses: ["10.9.0.0/16"]
servers:
  fetch:
    allowed_domains: ["*"]
`))
	if err != nil {
		t.Fatal(err)
	}
	pc, err := ProxyConfigFrom(&c.Egress)
	if err != nil {
		t.Fatal(err)
	}
	if len(pc.Allow) != 2 || pc.Allow[1].String() != "*.githubusercontent.com" || !pc.EscalateUnknownHosts ||
		pc.IdleTimeout != 90*time.Second || len(pc.AllowedPorts) != 1 ||
		pc.Addresses.UnsafeAllow[0] != netip.MustParsePrefix("10.9.0.0/16") || pc.UnsafeSkipSNICheck {
		t.Fatalf("ProxyConfigFrom = %+v", pc)
	}
	bad := config.EgressConfig{AllowedHosts: []string{"a.*"}}
	if _, err := ProxyConfigFrom(&bad); err == nil {
		t.Fatal("bad pattern accepted")
	}
}

func TestProxyConfigConnLimits(t *testing.T) {
	for _, tt := range []struct {
		name string
		c    ProxyConfig
		want netlimit.Limits
	}{
		{name: "defaults", want: netlimit.Limits{MaxConns: DefaultMaxConnections, MaxPerClient: DefaultMaxConnsPerClient}},
		{name: "a small cap bounds the per-client default", c: ProxyConfig{MaxConnections: 100}, want: netlimit.Limits{MaxConns: 100, MaxPerClient: 100}},
		{name: "both set", c: ProxyConfig{MaxConnections: 100, MaxConnectionsPerClient: 10}, want: netlimit.Limits{MaxConns: 100, MaxPerClient: 10}},
	} {
		t.Run(tt.name, func(t *testing.T) {
			if got := tt.c.ConnLimits(); got != tt.want {
				t.Fatalf("ConnLimits() = %+v; want %+v", got, tt.want)
			}
		})
	}
}
