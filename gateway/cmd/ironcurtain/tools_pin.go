package main

import (
	"context"
	"log/slog"

	"ironcurtain.dev/gateway/config"
	"ironcurtain.dev/gateway/internal/servers"
	"ironcurtain.dev/gateway/internal/servers/external"
)

// listExternal starts the server as the gateway would, lists its tools and
// stops it.
func listExternal(ctx context.Context, name string, sc config.ServerConfig, cfg *config.Config, getenv func(string) string) ([]servers.Tool, error) {
	envv, err := sc.LaunchEnv(name, getenv)
	if err != nil {
		return nil, err
	}
	quiet := slog.New(slog.DiscardHandler)
	ec := external.Config{Name: name, Command: sc.Command, Args: sc.Args, Env: envv, StartTimeout: cfg.MCP.ExternalStartTimeout}
	if err := withLauncher(cfg, name, sc, &ec); err != nil {
		return nil, err
	}
	tr, err := externalTransport(cfg, name, logSink{quiet}, getenv, quiet)
	if err != nil {
		return nil, err
	}
	ec.Transport = tr
	s, err := external.Start(ctx, ec, external.Deps{Logger: quiet, Getenv: getenv})
	if err != nil {
		return nil, err
	}
	tools := s.Tools()
	if err := s.Close(); err != nil {
		return nil, err
	}
	return tools, nil
}
