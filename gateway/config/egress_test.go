package config

import (
	"net/netip"
	"strings"
	"testing"
	"time"
)

func TestEgressSection(t *testing.T) {
	yaml := `
egress:
  listen: "127.0.0.1:3128"
  allowed_hosts: ["GitHub.com.", "*.githubusercontent.com"]
  allowed_ports: [443]
  escalate_unknown_hosts: true
  max_tunnels_per_session: 8
  connect_timeout: 3s
  idle_timeout: 2m
  read_header_timeout: 5s
  max_header_bytes: 16384
  drain_timeout: 15s
  unsafe_allow_addresses: ["127.0.0.0/8", "::1"]
  unsafe_skip_sni_check: true
`
	c, err := Parse("gateway.yaml", withFetch(yaml))
	if err != nil {
		t.Fatalf("Parse: %v", err)
	}
	e := c.Egress
	if e.ConnectTimeout != 3*time.Second || e.IdleTimeout != 2*time.Minute || e.DrainTimeout != 15*time.Second ||
		e.MaxTunnelsPerSession != 8 || !e.EscalateUnknownHosts || !e.UnsafeSkipSNICheck || e.ListenAddr() != "127.0.0.1:3128" {
		t.Fatalf("egress = %+v", e)
	}
	ps, err := e.Patterns()
	if err != nil || len(ps) != 2 || ps[0].String() != "github.com" {
		t.Fatalf("Patterns = %v, %v", ps, err)
	}
	pfx, err := e.UnsafePrefixes()
	if err != nil || len(pfx) != 2 || pfx[1] != netip.MustParsePrefix("::1/128") {
		t.Fatalf("UnsafePrefixes = %v, %v", pfx, err)
	}
	var empty EgressConfig
	if empty.ListenAddr() != DefaultEgressListen {
		t.Fatal("default listen address")
	}
}

func TestEgressSectionErrors(t *testing.T) {
	tests := []struct {
		name string
		yaml string
		want string // substring of the error: file and field path
	}{
		{name: "bad pattern", yaml: "egress:\n  allowed_hosts: [\"a.com\", \"*.\"]\n", want: "gateway.yaml: egress.allowed_hosts[1]"},
		{name: "wildcard ip", yaml: "egress:\n  allowed_hosts: [\"*.127.0.0.1\"]\n", want: "egress.allowed_hosts[0]"},
		{name: "port range", yaml: "egress:\n  allowed_ports: [443, 70000]\n", want: "egress.allowed_ports[1]"},
		{name: "prefix host bits", yaml: "egress:\n  unsafe_allow_addresses: [\"127.0.0.1/8\"]\n", want: "egress.unsafe_allow_addresses[0]"},
		{name: "prefix zero", yaml: "egress:\n  unsafe_allow_addresses: [\"0.0.0.0/0\"]\n", want: "turn the address check off"},
		{name: "prefix junk", yaml: "egress:\n  unsafe_allow_addresses: [\"localhost\"]\n", want: "egress.unsafe_allow_addresses[0]"},
		{name: "negative timeout", yaml: "egress:\n  idle_timeout: -1s\n", want: "egress.idle_timeout"},
		{name: "bad duration", yaml: "egress:\n  idle_timeout: forever\n", want: "gateway.yaml"},
		{name: "unknown key", yaml: "egress:\n  allowed_host: [\"a.com\"]\n", want: "egress.allowed_host"},
		{name: "negative max connections", yaml: "egress:\n  max_connections: -1\n", want: "egress.max_connections"},
		{name: "header size", yaml: "egress:\n  max_header_bytes: 99999999\n", want: "egress.max_header_bytes"},
		{name: "listen", yaml: "egress:\n  listen: \"3128\"\n", want: "egress.listen"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			_, err := Parse("gateway.yaml", withFetch(tt.yaml))
			if err == nil || !strings.Contains(err.Error(), tt.want) {
				t.Fatalf("Parse error = %v; want it to contain %q", err, tt.want)
			}
		})
	}
}
