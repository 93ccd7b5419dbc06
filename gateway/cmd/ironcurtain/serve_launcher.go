package main

import (
	"fmt"

	"ironcurtain.dev/gateway/config"
	"ironcurtain.dev/gateway/internal/doors/egress"
	"ironcurtain.dev/gateway/internal/launcher"
	"ironcurtain.dev/gateway/internal/servers/external"
)

// withLauncher sets ec.Launch for an image: server: its container is
// started by the launcher (the gateway never holds the Docker socket).
func withLauncher(cfg *config.Config, name string, sc config.ServerConfig, ec *external.Config) error {
	if sc.Image == "" {
		return nil
	}
	tok, err := launcher.ReadToken(cfg.Launcher.TokenFile)
	if err != nil {
		return fmt.Errorf("launcher.token_file: %w", err)
	}
	c := &launcher.Client{Socket: cfg.Launcher.Socket, Token: tok}
	ec.Launch = c.Launcher(name, sc.Image)
	return nil
}

// serverIdentities are the egress proxy identities of the image: servers:
// each one's proxy password is derived from the launcher token (the
// launcher puts the same value in the container's proxy variables), and
// its allowlist is servers.<name>.egress.allowed_hosts.
func serverIdentities(cfg *config.Config) ([]egress.ServerIdentity, error) {
	names := cfg.ImageServers()
	if len(names) == 0 {
		return nil, nil
	}
	tok, err := launcher.ReadToken(cfg.Launcher.TokenFile)
	if err != nil {
		return nil, fmt.Errorf("launcher.token_file: %w", err)
	}
	out := make([]egress.ServerIdentity, 0, len(names))
	for _, name := range names {
		allow, err := cfg.Servers[name].Egress.Patterns()
		if err != nil {
			return nil, fmt.Errorf("servers.%s.%w", name, err)
		}
		out = append(out, egress.ServerIdentity{Name: name, Token: launcher.ProxyIdentity(tok, name), Allow: allow})
	}
	return out, nil
}
