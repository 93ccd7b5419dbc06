package autoapprove

import (
	"fmt"

	"github.com/prometheus/client_golang/prometheus"

	"ironcurtain.dev/gateway/internal/escalation"
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
		reviews: prometheus.NewCounterVec(prometheus.CounterOpts{
			Name: "ironcurtain_auto_approver_reviews_total",
			Help: "Escalations the auto-approver reviewed, by outcome: approved, human, model_denied, malformed, error, timeout, budget, rate_limited, too_large.",
		}, []string{"outcome"}),
		seconds: prometheus.NewHistogram(prometheus.HistogramOpts{
			Name:    "ironcurtain_auto_approver_review_seconds",
			Help:    "Time one review took (the escalation waits for it before a human is asked).",
			Buckets: prometheus.ExponentialBuckets(0.05, 2, 12),
		}),
		tokens: prometheus.NewCounter(prometheus.CounterOpts{
			Name: "ironcurtain_auto_approver_tokens_total",
			Help: "Tokens (input and output) the auto-approver's model calls used.",
		}),
		cost: prometheus.NewCounter(prometheus.CounterOpts{
			Name: "ironcurtain_auto_approver_cost_usd_total",
			Help: "Estimated cost in US dollars of the auto-approver's model calls.",
		}),
		dayCalls: prometheus.NewGauge(prometheus.GaugeOpts{
			Name: "ironcurtain_auto_approver_day_calls",
			Help: "Model calls counted against today's (UTC) auto-approver budget.",
		}),
		dayTokens: prometheus.NewGauge(prometheus.GaugeOpts{
			Name: "ironcurtain_auto_approver_day_tokens",
			Help: "Tokens counted against today's (UTC) auto-approver budget.",
		}),
		dayCost: prometheus.NewGauge(prometheus.GaugeOpts{
			Name: "ironcurtain_auto_approver_day_cost_usd",
			Help: "Estimated US dollars counted against today's (UTC) auto-approver budget.",
		}),
	}
	// Every outcome is exported at 0 from the start, so the first error or
	// exhausted budget is an increase an alert can see.
	for _, o := range []string{escalation.OutcomeApproved, escalation.OutcomeHuman, escalation.OutcomeModelDenied,
		escalation.OutcomeMalformed, escalation.OutcomeError, escalation.OutcomeTimeout, escalation.OutcomeBudget,
		escalation.OutcomeRateLimited, escalation.OutcomeTooLarge} {
		m.reviews.WithLabelValues(o)
	}
	if reg == nil {
		return m, nil
	}
	for _, c := range []prometheus.Collector{m.reviews, m.seconds, m.tokens, m.cost, m.dayCalls, m.dayTokens, m.dayCost} {
		if err := reg.Register(c); err != nil {
			return nil, fmt.Errorf("registering auto-approver metrics: %w", err)
		}
	}
	return m, nil
}
