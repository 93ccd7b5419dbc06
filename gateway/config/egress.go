package config

import (
	"errors"
	"fmt"
	"net/netip"
	"strings"
	"time"

	"ironcurtain.dev/gateway/netpolicy"
)

// DefaultEgressListen is the egress proxy's listen address when
// egress.listen is absent.
const DefaultEgressListen = ":3128"

// EgressConfig is the egress section of gateway.yaml: the agent's HTTP(S)
// proxy. Zero values mean the egress package's defaults (see docs/egress.md).
//
//	egress:
//	  listen: ":3128"
//	  allowed_hosts: ["github.com", "*.githubusercontent.com"]
//	  allowed_ports: [443, 80]
//	  escalate_unknown_hosts: false
//	  max_tunnels_per_session: 64
//	  connect_timeout: 10s
//	  idle_timeout: 5m
//	  read_header_timeout: 10s
//	  max_header_bytes: 32768
//	  drain_timeout: 30s
//	  unsafe_allow_addresses: []      # e.g. ["10.1.2.0/24"]: lets hosts resolve there
//	  unsafe_skip_sni_check: false
type EgressConfig struct {
	// Listen is the proxy's listen address (default ":3128").
	Listen string `yaml:"listen"`
	// AllowedHosts are host patterns: "host", "*.suffix", "*" (names only),
	// or an exact IP literal.
	AllowedHosts []string `yaml:"allowed_hosts"`
	// AllowedPorts are the destination ports (default 80 and 443).
	AllowedPorts []int `yaml:"allowed_ports"`
	// EscalateUnknownHosts holds a request for an unlisted host for a human.
	EscalateUnknownHosts bool `yaml:"escalate_unknown_hosts"`
	// MaxTunnelsPerSession caps a session's concurrent tunnels and requests.
	MaxTunnelsPerSession int `yaml:"max_tunnels_per_session"`
	// MaxConnections caps the proxy's client connections, all sessions
	// together.
	MaxConnections int `yaml:"max_connections"`
	// MaxConnectionsPerClient caps one client address's connections (default
	// 256, below max_connections).
	MaxConnectionsPerClient int `yaml:"max_connections_per_client"`
	// ConnectTimeout bounds DNS plus TCP connect to the target.
	ConnectTimeout time.Duration `yaml:"connect_timeout"`
	// IdleTimeout closes a tunnel with no traffic either way.
	IdleTimeout time.Duration `yaml:"idle_timeout"`
	// ReadHeaderTimeout bounds reading a request head and the TLS ClientHello.
	ReadHeaderTimeout time.Duration `yaml:"read_header_timeout"`
	// MaxHeaderBytes bounds a request head.
	MaxHeaderBytes int `yaml:"max_header_bytes"`
	// DrainTimeout bounds the wait for open tunnels at shutdown.
	DrainTimeout time.Duration `yaml:"drain_timeout"`
	// UnsafeAllowAddresses are address prefixes (or single addresses) that
	// resolved hosts may have although they are not public (loopback,
	// private, ...). Never needed in production.
	UnsafeAllowAddresses []string `yaml:"unsafe_allow_addresses"`
	// UnsafeSkipSNICheck turns off the check that a tunnel's TLS
	// ClientHello names the CONNECT host (and allows non-TLS tunnels).
	UnsafeSkipSNICheck bool `yaml:"unsafe_skip_sni_check"`
}

// Validate implements Validator; field names are relative to "egress".
func (e *EgressConfig) Validate() error {
	var errs []error
	for i, h := range e.AllowedHosts {
		if _, err := netpolicy.ParsePattern(h); err != nil {
			errs = append(errs, Errorf(fmt.Sprintf("allowed_hosts[%d]", i), "%q: %w", h, patternReason(err)))
		}
	}
	for i, p := range e.AllowedPorts {
		if p < 1 || p > 65535 {
			errs = append(errs, Errorf(fmt.Sprintf("allowed_ports[%d]", i), "%d: must be 1-65535", p))
		}
	}
	for i, s := range e.UnsafeAllowAddresses {
		if _, err := parseUnsafePrefix(s); err != nil {
			errs = append(errs, Errorf(fmt.Sprintf("unsafe_allow_addresses[%d]", i), "%q: %w", s, err))
		}
	}
	for _, f := range []struct {
		name string
		v    time.Duration
	}{{"connect_timeout", e.ConnectTimeout}, {"idle_timeout", e.IdleTimeout}, {"read_header_timeout", e.ReadHeaderTimeout}, {"drain_timeout", e.DrainTimeout}} {
		if f.v < 0 {
			errs = append(errs, Errorf(f.name, "must not be negative"))
		}
	}
	if e.MaxTunnelsPerSession < 0 {
		errs = append(errs, Errorf("max_tunnels_per_session", "must not be negative"))
	}
	if e.MaxConnections < 0 {
		errs = append(errs, Errorf("max_connections", "must not be negative"))
	}
	if e.MaxConnectionsPerClient < 0 {
		errs = append(errs, Errorf("max_connections_per_client", "must not be negative"))
	} else if e.MaxConnections > 0 && e.MaxConnectionsPerClient > e.MaxConnections {
		errs = append(errs, Errorf("max_connections_per_client", "(%d) must not exceed max_connections (%d)", e.MaxConnectionsPerClient, e.MaxConnections))
	}
	if e.MaxHeaderBytes < 0 || e.MaxHeaderBytes > 1<<20 {
		errs = append(errs, Errorf("max_header_bytes", "must be between 0 (default) and 1048576"))
	}
	if e.Listen != "" && !strings.Contains(e.Listen, ":") {
		errs = append(errs, Errorf("listen", "%q: must be host:port or :port", e.Listen))
	}
	return errors.Join(errs...)
}

func patternReason(err error) error {
	var pe *netpolicy.ParseError
	if errors.As(err, &pe) {
		return errors.New(pe.Reason)
	}
	return err
}

// ListenAddr returns Listen or DefaultEgressListen.
func (e *EgressConfig) ListenAddr() string {
	if e.Listen == "" {
		return DefaultEgressListen
	}
	return e.Listen
}

// Patterns returns the parsed allowed_hosts.
func (e *EgressConfig) Patterns() ([]netpolicy.Pattern, error) {
	ps, err := netpolicy.ParsePatterns(e.AllowedHosts)
	if err != nil {
		return nil, fmt.Errorf("egress.allowed_hosts%w", err)
	}
	return ps, nil
}

// UnsafePrefixes returns the parsed unsafe_allow_addresses.
func (e *EgressConfig) UnsafePrefixes() ([]netip.Prefix, error) {
	out := make([]netip.Prefix, 0, len(e.UnsafeAllowAddresses))
	for i, s := range e.UnsafeAllowAddresses {
		p, err := parseUnsafePrefix(s)
		if err != nil {
			return nil, fmt.Errorf("egress.unsafe_allow_addresses[%d]: %w", i, err)
		}
		out = append(out, p)
	}
	return out, nil
}

// parseUnsafePrefix accepts "10.1.2.0/24", "fd00::/8" or a single address;
// the prefix must have no host bits set and must not be /0 (which would
// turn the address check off altogether).
func parseUnsafePrefix(s string) (netip.Prefix, error) {
	if !strings.Contains(s, "/") {
		a, err := netip.ParseAddr(s)
		if err != nil || a.Zone() != "" {
			return netip.Prefix{}, errors.New("not an IP address or prefix")
		}
		return netip.PrefixFrom(a, a.BitLen()), nil
	}
	p, err := netip.ParsePrefix(s)
	if err != nil {
		return netip.Prefix{}, errors.New("not an IP prefix")
	}
	if p != p.Masked() {
		return netip.Prefix{}, fmt.Errorf("has host bits set (did you mean %s?)", p.Masked())
	}
	if p.Bits() == 0 {
		return netip.Prefix{}, errors.New("a /0 prefix would turn the address check off; list the ranges you need")
	}
	return p, nil
}
