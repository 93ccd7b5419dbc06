package main

import (
	"context"
	"fmt"
	"log/slog"

	"github.com/prometheus/client_golang/prometheus"

	"ironcurtain.dev/gateway/config"
	"ironcurtain.dev/gateway/internal/autoapprove"
	"ironcurtain.dev/gateway/internal/doors/llmrelay"
	"ironcurtain.dev/gateway/internal/llmprovider"
	"ironcurtain.dev/gateway/internal/store"
)

// startAutoApprover installs the auto-approver on the escalator when
// escalation.auto_approver.enabled (off by default): it reaches the model
// with the relay's provider settings and key, and its daily budget starts
// from what the stored reviews of today already spent.
func startAutoApprover(ctx context.Context, cfg *config.Config, getenv func(string) string, st *storage, reg prometheus.Registerer, log *slog.Logger, closers *closeStack) error {
	ac := cfg.Escalation.AutoApprover
	if !ac.Enabled {
		return nil
	}
	ac = ac.WithDefaults()
	relayCfg := llmrelay.ConfigFrom(cfg.Relay)
	relayCfg.Getenv = getenv
	up, err := llmrelay.ResolveUpstream(relayCfg, ac.Provider)
	if err != nil {
		return fmt.Errorf("%s: escalation.auto_approver.provider: %w", cfg.File(), err)
	}
	if st.pg == nil {
		return fmt.Errorf("%s: escalation.auto_approver needs the database (without one every escalation is denied)", cfg.File())
	}
	prices := relayCfg.Prices
	a, err := autoapprove.New(autoapprove.Config{
		Upstream:        up,
		Model:           ac.Model,
		Timeout:         ac.Timeout,
		MaxOutputTokens: ac.MaxOutputTokens,
		MaxPromptBytes:  ac.MaxPromptBytes,
		RecentDecisions: ac.RecentDecisions,
		RatePerMinute:   ac.RatePerMinute,
		MaxConcurrent:   ac.MaxConcurrent,
		Budget: autoapprove.Budget{
			CallsPerDay:   ac.Budget.MaxCallsPerDay,
			TokensPerDay:  ac.Budget.MaxTokensPerDay,
			CostUSDPerDay: ac.Budget.MaxCostUSDPerDay,
		},
		Price: func(model string, in, out int64) (float64, bool) {
			return llmprovider.EstimateCost(prices, model, in, out)
		},
	}, autoapprove.Deps{History: autoapprove.PGHistory{Pool: st.pool}, Budget: store.AutoApproverBudget{Pool: st.pool}, Registerer: reg, Logger: log.With("component", "autoapprove")})
	if err != nil {
		return fmt.Errorf("%s: escalation.auto_approver: %w", cfg.File(), err)
	}
	closers.push("auto-approver", a.Close)
	spend, err := st.pg.AutoSpentSince(ctx, a.DayStart())
	if err != nil {
		return fmt.Errorf("starting the auto-approver: %w", err)
	}
	if err := a.Seed(ctx, spend); err != nil { // one budget for every replica
		return fmt.Errorf("starting the auto-approver: %w", err)
	}
	st.pg.SetReviewer(a)
	log.Info("auto-approver enabled: rule escalations are shown to a model first, which may approve or leave them to a human",
		"provider", up.Provider, "model", ac.Model, "calls_today", spend.Calls, "max_calls_per_day", ac.Budget.MaxCallsPerDay)
	return nil
}
