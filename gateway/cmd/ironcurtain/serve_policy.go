package main

import (
	"context"
	"log/slog"
	"os"
	"os/signal"
	"syscall"

	"github.com/prometheus/client_golang/prometheus"

	"ironcurtain.dev/gateway/config"
	"ironcurtain.dev/gateway/internal/livepolicy"
	"ironcurtain.dev/gateway/policy"
)

// livePolicy puts eng in force behind the reloadable holder: SIGHUP and
// POST /v1/policy/reload reload the policy directory (and the shadow
// policy) with the settings the gateway started with.
func livePolicy(cfg *config.Config, eng *policy.Engine, reg prometheus.Registerer, log *slog.Logger) (*livepolicy.Policy, error) {
	live, err := livepolicy.New(eng, func() (*policy.Engine, error) { return loadPolicy(cfg) }, reg, log.With("component", "policy"))
	if err != nil {
		return nil, err
	}
	log.Info("policy version", "version", live.Version())
	return live, nil
}

// reloadOnSIGHUP reloads the policy on every SIGHUP until ctx ends.
func reloadOnSIGHUP(ctx context.Context, live *livepolicy.Policy) {
	sig := make(chan os.Signal, 1)
	signal.Notify(sig, syscall.SIGHUP)
	defer signal.Stop(sig)
	live.OnSignal(ctx, sig)
}
