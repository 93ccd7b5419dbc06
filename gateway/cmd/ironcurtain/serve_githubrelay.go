package main

import (
	"fmt"
	"log/slog"

	"ironcurtain.dev/gateway/config"
	"ironcurtain.dev/gateway/internal/audit"
	"ironcurtain.dev/gateway/internal/doors/githubrelay"
	"ironcurtain.dev/gateway/internal/gate"
	"ironcurtain.dev/gateway/internal/servers"
	"ironcurtain.dev/gateway/internal/servers/github"
	"ironcurtain.dev/gateway/internal/session"
)

// githubRelay builds the GitHub API relay (/github/ on the agent port) over
// the gate every door shares and the github server's record of its own pull
// requests; nil when github.relay.disabled is set or no github server is
// built. The relay sends the gateway's token (github.token_env/token_file).
func githubRelay(cfg *config.Config, g *gate.Gate, srvs []servers.Server, auth session.Authenticator, sink audit.Sink, getenv func(string) string, log *slog.Logger) (*githubrelay.Handler, error) {
	if cfg.GitHub.Relay.Disabled {
		return nil, nil
	}
	var gh *github.Server
	for _, s := range srvs {
		if g, ok := s.(*github.Server); ok {
			gh = g
		}
	}
	if gh == nil {
		return nil, nil
	}
	tok, err := cfg.GitHub.Token(getenv)
	if err != nil {
		return nil, err
	}
	sc, err := cfg.SecretScanner()
	if err != nil {
		return nil, err
	}
	relay, err := githubrelay.New(githubrelay.Config{
		APIURL:      cfg.GitHub.APIURL,
		Token:       tok,
		MaxRESTBody: cfg.GitHub.Relay.MaxBodyBytes,
		Timeout:     cfg.GitHub.Relay.Timeout,
		Hosts:       cfg.GitHub.Relay.Hosts,
	}, githubrelay.Deps{Gate: g, Auth: auth, Owner: gh, Audit: sink, Secrets: &secretDoors{sc: sc}, Logger: log.With("component", "githubrelay")})
	if err != nil {
		return nil, fmt.Errorf("building the GitHub relay: %w", err)
	}
	return relay, nil
}
