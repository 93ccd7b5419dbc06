package main

import (
	"context"
	"log/slog"
	"net/http/httptest"
	"testing"
	"time"

	"ironcurtain.dev/gateway/config"
	"ironcurtain.dev/gateway/internal/doors/githubrelay"
	"ironcurtain.dev/gateway/internal/escalation"
	"ironcurtain.dev/gateway/internal/gate"
	"ironcurtain.dev/gateway/internal/servers"
	"ironcurtain.dev/gateway/internal/servers/github"
	"ironcurtain.dev/gateway/internal/session"
)

// TestGitHubRelayBudget: a relay request may wait for a human and a call,
// then for GitHub (the relay's timeout); before this route existed it got
// the short budget and an escalated gh pr create was cut off.
func TestGitHubRelayBudget(t *testing.T) {
	for _, tc := range []struct {
		name      string
		relayTO   time.Duration
		wantTotal time.Duration
	}{
		{name: "defaults", wantTotal: githubrelay.DefaultTimeout + gate.DefaultCallTimeout + escalation.DefaultTimeout + budgetMargin},
		{name: "configured", relayTO: time.Minute, wantTotal: time.Minute + gate.DefaultCallTimeout + escalation.DefaultTimeout + budgetMargin},
	} {
		t.Run(tc.name, func(t *testing.T) {
			cfg := &config.Config{}
			cfg.GitHub.Relay.Timeout = tc.relayTO
			for _, target := range []string{"/github/graphql", "/api/v3/repos/a/b/pulls", "/api/graphql", "http://api.github.localhost/graphql", "http://api.github.com:8080/repos/a/b"} {
				b := agentBudget(cfg)(httptest.NewRequest("POST", target, nil))
				if b.Body != bodyBudget || b.Total != tc.wantTotal {
					t.Fatalf("%s: budget %+v, want body %s total %s", target, b, bodyBudget, tc.wantTotal)
				}
			}
			if b := agentBudget(cfg)(httptest.NewRequest("POST", "/api/other", nil)); b.Total != shortBudget {
				t.Fatalf("/api/other budget %+v", b)
			}
		})
	}
}

// TestGitHubRelayBuilt: the relay is built over the github server, and
// github.relay.disabled mounts nothing.
func TestGitHubRelayBuilt(t *testing.T) {
	gh, err := github.New(github.Config{Token: "t"})
	if err != nil {
		t.Fatal(err)
	}
	srvs := []servers.Server{gh}
	getenv := func(string) string { return "gateway-token" }
	cfg := &config.Config{}
	h, err := githubRelay(cfg, &gate.Gate{}, srvs, noAuth{}, nil, getenv, slog.New(slog.DiscardHandler))
	if err != nil || h == nil {
		t.Fatalf("githubRelay = %v, %v", h, err)
	}
	cfg.GitHub.Relay.Disabled = true
	if h, err := githubRelay(cfg, &gate.Gate{}, srvs, noAuth{}, nil, getenv, slog.New(slog.DiscardHandler)); err != nil || h != nil {
		t.Fatalf("disabled: githubRelay = %v, %v", h, err)
	}
}

type noAuth struct{}

func (noAuth) Authenticate(context.Context, string) (session.Session, error) {
	return session.Session{}, session.ErrUnknownToken
}
