package main

import (
	"fmt"

	"github.com/prometheus/client_golang/prometheus"

	"ironcurtain.dev/gateway/internal/config"
	"ironcurtain.dev/gateway/internal/loopguard"
	"ironcurtain.dev/gateway/internal/metrics"
)

// loopGuard builds the per-session loop breaker from the loop_breaker
// section (zero values: the defaults). It is always on.
func loopGuard(cfg *config.Config, reg prometheus.Registerer) (*loopguard.Guard, error) {
	m, err := metrics.NewLoopBreaker(reg)
	if err != nil {
		return nil, err
	}
	lb := cfg.LoopBreaker
	g, err := loopguard.New(loopguard.Config{
		CallsPerMinute: lb.CallsPerMinute, IdenticalCalls: lb.IdenticalCalls, IdenticalWindow: lb.IdenticalWindow,
		ConsecutiveDenials: lb.ConsecutiveDenials, Cooldown: lb.Cooldown, MaxSessions: lb.MaxSessions,
	}, m)
	if err != nil {
		return nil, fmt.Errorf("configuring the loop breaker: %w", err)
	}
	return g, nil
}
