package main

import (
	"fmt"

	"github.com/jackc/pgx/v5/pgxpool"
	"github.com/prometheus/client_golang/prometheus"

	"ironcurtain.dev/gateway/config"
	"ironcurtain.dev/gateway/internal/loopguard"
	"ironcurtain.dev/gateway/internal/metrics"
	"ironcurtain.dev/gateway/internal/store"
)

// loopGuard builds the per-session loop breaker from the loop_breaker
// section (zero values: the defaults). It is always on. With the database
// its state is in Postgres, shared by every replica (store.LoopBreaker);
// without one, in memory.
func loopGuard(cfg *config.Config, reg prometheus.Registerer, pool *pgxpool.Pool) (*loopguard.Guard, error) {
	m, err := metrics.NewLoopBreaker(reg)
	if err != nil {
		return nil, err
	}
	lb := cfg.LoopBreaker
	lc := loopguard.Config{
		CallsPerMinute: lb.CallsPerMinute, IdenticalCalls: lb.IdenticalCalls, IdenticalWindow: lb.IdenticalWindow,
		ConsecutiveDenials: lb.ConsecutiveDenials, Cooldown: lb.Cooldown, MaxSessions: lb.MaxSessions,
	}
	var g *loopguard.Guard
	if pool != nil {
		g, err = loopguard.NewShared(lc, m, store.LoopBreaker{Pool: pool})
	} else {
		g, err = loopguard.New(lc, m)
	}
	if err != nil {
		return nil, fmt.Errorf("configuring the loop breaker: %w", err)
	}
	return g, nil
}
