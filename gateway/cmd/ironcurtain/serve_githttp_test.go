package main

import (
	"net/http/httptest"
	"testing"
	"time"

	"ironcurtain.dev/gateway/config"
	"ironcurtain.dev/gateway/internal/doors/githttp"
	"ironcurtain.dev/gateway/internal/escalation"
	"ironcurtain.dev/gateway/internal/gate"
)

// TestGitDoorBudget: a request to the git door may stream a pack for the
// door's timeout and then wait for a human (escalation timeout) and a call;
// an ordinary request keeps the short budget.
func TestGitDoorBudget(t *testing.T) {
	for _, tc := range []struct {
		name      string
		gitTO     time.Duration
		wantBody  time.Duration
		wantTotal time.Duration
	}{
		{name: "defaults", wantBody: githttp.DefaultTimeout,
			wantTotal: githttp.DefaultTimeout + gate.DefaultCallTimeout + escalation.DefaultTimeout + budgetMargin},
		{name: "configured", gitTO: time.Minute, wantBody: time.Minute,
			wantTotal: time.Minute + gate.DefaultCallTimeout + escalation.DefaultTimeout + budgetMargin},
	} {
		t.Run(tc.name, func(t *testing.T) {
			cfg := &config.Config{}
			cfg.Git.HTTP.Timeout = tc.gitTO
			b := agentBudget(cfg)(httptest.NewRequest("POST", "/git/github.com/acme/app.git/git-receive-pack", nil))
			if b.Body != tc.wantBody || b.Total != tc.wantTotal {
				t.Fatalf("budget %+v, want body %s total %s", b, tc.wantBody, tc.wantTotal)
			}
			if o := agentBudget(cfg)(httptest.NewRequest("GET", "/healthz", nil)); o.Total != shortBudget {
				t.Fatalf("healthz budget %+v", o)
			}
		})
	}
}

// TestGitDoorDisabled: git.http.disabled mounts nothing.
func TestGitDoorDisabled(t *testing.T) {
	cfg := &config.Config{}
	cfg.Git.HTTP.Disabled = true
	h, err := gitDoor(cfg, nil, nil, nil, nil, nil, nil)
	if err != nil || h != nil {
		t.Fatalf("gitDoor = %v, %v", h, err)
	}
}
