package egress

import (
	"fmt"

	"ironcurtain.dev/gateway/config"
	"ironcurtain.dev/gateway/netpolicy"
)

// ProxyConfigFrom converts the validated gateway.yaml egress section into a
// ProxyConfig (zero fields keep the package defaults).
func ProxyConfigFrom(c *config.EgressConfig) (ProxyConfig, error) {
	allow, err := c.Patterns()
	if err != nil {
		return ProxyConfig{}, fmt.Errorf("converting egress settings: %w", err)
	}
	prefixes, err := c.UnsafePrefixes()
	if err != nil {
		return ProxyConfig{}, fmt.Errorf("converting egress settings: %w", err)
	}
	return ProxyConfig{
		Allow:                   allow,
		AllowedPorts:            append([]int(nil), c.AllowedPorts...),
		Addresses:               netpolicy.AddressPolicy{UnsafeAllow: prefixes},
		EscalateUnknownHosts:    c.EscalateUnknownHosts,
		MaxTunnelsPerSession:    c.MaxTunnelsPerSession,
		ConnectTimeout:          c.ConnectTimeout,
		IdleTimeout:             c.IdleTimeout,
		ReadHeaderTimeout:       c.ReadHeaderTimeout,
		MaxHeaderBytes:          c.MaxHeaderBytes,
		DrainTimeout:            c.DrainTimeout,
		MaxConnections:          c.MaxConnections,
		MaxConnectionsPerClient: c.MaxConnectionsPerClient,
		UnsafeSkipSNICheck:      c.UnsafeSkipSNICheck,
	}, nil
}
