package main

import (
	"context"
	"errors"
	"sync/atomic"

	"ironcurtain.dev/gateway/config"
	"ironcurtain.dev/gateway/internal/servers"
	"ironcurtain.dev/gateway/internal/servers/git"
	"ironcurtain.dev/gateway/policy"
	"ironcurtain.dev/gateway/secretscan"
)

// secretDoors is secret scanning for the doors beside the policy's own
// arguments (docs/egress.md, "Secret scanning"): the egress proxy, the git
// door, the GitHub relay and the model relay's count use this scanner (the
// settings the engine compiles too: the same detectors, actions and exact
// gateway secrets), and git tool pushes are inspected by the git server
// through a late binding (the server is built after the policy).
type secretDoors struct {
	sc   *policy.SecretScanner
	push *latePushInspector
}

// doorSecrets compiles the secrets section (after setGatewaySecrets, before
// loadPolicy) and gives the policy the late-bound push inspector.
func doorSecrets(cfg *config.Config) (*secretDoors, error) {
	late := &latePushInspector{}
	cfg.Secrets.SetPushInspector(late)
	sc, err := cfg.SecretScanner()
	if err != nil {
		return nil, err
	}
	return &secretDoors{sc: sc, push: late}, nil
}

// SecretScanner implements egress.SecretSource, githttp.SecretSource,
// githubrelay.SecretSource and llmrelay.SecretSource.
func (s *secretDoors) SecretScanner() *policy.SecretScanner { return s.sc }

// bind points the push inspector at the git server once it is built.
func (s *secretDoors) bind(srvs []servers.Server) {
	for _, srv := range srvs {
		if g, ok := srv.(*git.Server); ok {
			s.push.g.Store(g)
		}
	}
}

// latePushInspector forwards to the git server; before it is bound every
// inspection fails, which denies the push.
type latePushInspector struct{ g atomic.Pointer[git.Server] }

var errNoGitServer = errors.New("the git server is not running")

func (l *latePushInspector) InspectPush(ctx context.Context, det *secretscan.Detector, repoDir string, in policy.PushInput, plan policy.PushPlan) (policy.PushInspection, error) {
	g := l.g.Load()
	if g == nil {
		return policy.PushInspection{}, errNoGitServer
	}
	return g.InspectPush(ctx, det, repoDir, in, plan)
}
