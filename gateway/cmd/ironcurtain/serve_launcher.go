package main

import (
	"fmt"

	"ironcurtain.dev/gateway/internal/config"
	"ironcurtain.dev/gateway/internal/launcher"
	"ironcurtain.dev/gateway/internal/mcphub/external"
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
