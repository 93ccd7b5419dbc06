package autoapprove

import (
	"github.com/prometheus/client_golang/prometheus"

	"ironcurtain.dev/gateway/internal/escalation"

	"ironcurtain.dev/gateway/internal/promkit"
)

type metrics struct {
	reviews   *prometheus.CounterVec // outcome
	seconds   prometheus.Histogram
	tokens    prometheus.Counter
	cost      prometheus.Counter
	dayCalls  prometheus.Gauge
	dayTokens prometheus.Gauge
	dayCost   prometheus.Gauge
}

func newMetrics(reg prometheus.Registerer) (*metrics, error) {
	m := &metrics{
		reviews:   promkit.CounterVec("ironcurtain_auto_approver_reviews_total", "Escalations the auto-approver reviewed, by outcome: approved, human, model_denied, malformed, error, timeout, budget, rate_limited, too_large.", "outcome"),
		seconds:   promkit.Histogram("ironcurtain_auto_approver_review_seconds", "Time one review took (the escalation waits for it before a human is asked).", prometheus.ExponentialBuckets(0.05, 2, 12)),
		tokens:    promkit.Counter("ironcurtain_auto_approver_tokens_total", "Tokens (input and output) the auto-approver's model calls used."),
		cost:      promkit.Counter("ironcurtain_auto_approver_cost_usd_total", "Estimated cost in US dollars of the auto-approver's model calls."),
		dayCalls:  promkit.Gauge("ironcurtain_auto_approver_day_calls", "Model calls counted against today's (UTC) auto-approver budget."),
		dayTokens: promkit.Gauge("ironcurtain_auto_approver_day_tokens", "Tokens counted against today's (UTC) auto-approver budget."),
		dayCost:   promkit.Gauge("ironcurtain_auto_approver_day_cost_usd", "Estimated US dollars counted against today's (UTC) auto-approver budget."),
	}
	// Every outcome is exported at 0 from the start, so the first error or
	// exhausted budget is an increase an alert can see.
	for _, o := range []string{escalation.OutcomeApproved, escalation.OutcomeHuman, escalation.OutcomeModelDenied,
		escalation.OutcomeMalformed, escalation.OutcomeError, escalation.OutcomeTimeout, escalation.OutcomeBudget,
		escalation.OutcomeRateLimited, escalation.OutcomeTooLarge} {
		m.reviews.WithLabelValues(o)
	}
	if err := promkit.Register(reg, "auto-approver", "", m.reviews, m.seconds, m.tokens, m.cost, m.dayCalls, m.dayTokens, m.dayCost); err != nil {
		return nil, err
	}
	return m, nil
}
