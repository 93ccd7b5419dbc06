package escalation

import (
	"fmt"

	"github.com/prometheus/client_golang/prometheus"
)

type metrics struct {
	opened             *prometheus.CounterVec // kind
	decided            *prometheus.CounterVec // status, by (operator|timeout|similar)
	pending            prometheus.Gauge
	waitSeconds        prometheus.Histogram
	webhookSent        prometheus.Counter
	webhookFailures    *prometheus.CounterVec // reason
	listenerReconnects prometheus.Counter
	reused             *prometheus.CounterVec // status (pending|approved) when attached
	approvalRefused    *prometheus.CounterVec // reason (used|stale)
}

func newMetrics(reg prometheus.Registerer) (*metrics, error) {
	m := &metrics{
		opened: prometheus.NewCounterVec(prometheus.CounterOpts{
			Name: "ironcurtain_escalations_opened_total",
			Help: "Escalations opened (waiting for a human), by kind.",
		}, []string{"kind"}),
		decided: prometheus.NewCounterVec(prometheus.CounterOpts{
			Name: "ironcurtain_escalations_decided_total",
			Help: "Escalation decisions by status and by whom: operator, timeout or similar (approve-similar entry).",
		}, []string{"status", "by"}),
		pending: prometheus.NewGauge(prometheus.GaugeOpts{
			Name: "ironcurtain_escalations_pending",
			Help: "Escalations waiting for a human (escalation queue depth), refreshed by the expiry sweep.",
		}),
		waitSeconds: prometheus.NewHistogram(prometheus.HistogramOpts{
			Name:    "ironcurtain_escalation_decision_seconds",
			Help:    "Time from opening an escalation to its decision, as seen by the waiting call.",
			Buckets: prometheus.ExponentialBuckets(0.05, 2, 14),
		}),
		webhookSent: prometheus.NewCounter(prometheus.CounterOpts{
			Name: "ironcurtain_escalation_webhook_sent_total",
			Help: "Escalation announcements delivered to the webhook.",
		}),
		webhookFailures: prometheus.NewCounterVec(prometheus.CounterOpts{
			Name: "ironcurtain_escalation_webhook_failures_total",
			Help: "Escalation announcements that failed, by reason: network, status, queue_full, encode, request.",
		}, []string{"reason"}),
		listenerReconnects: prometheus.NewCounter(prometheus.CounterOpts{
			Name: "ironcurtain_escalation_listener_reconnects_total",
			Help: "Times the LISTEN connection for escalation decisions was re-established.",
		}),
		reused: prometheus.NewCounterVec(prometheus.CounterOpts{
			Name: "ironcurtain_escalations_reused_total",
			Help: "Identical retries that attached to an earlier call's escalation instead of opening one, by its status then: pending (waits on it) or approved (runs on it).",
		}, []string{"status"}),
		approvalRefused: prometheus.NewCounterVec(prometheus.CounterOpts{
			Name: "ironcurtain_escalation_approvals_refused_total",
			Help: "Calls refused an approval, by reason: used (it already ran another call) or stale (decided otherwise, or too old, before the call could use it).",
		}, []string{"reason"}),
	}
	if reg == nil {
		return m, nil
	}
	for _, c := range []prometheus.Collector{m.opened, m.decided, m.pending, m.waitSeconds, m.webhookSent, m.webhookFailures, m.listenerReconnects, m.reused, m.approvalRefused} {
		if err := reg.Register(c); err != nil {
			return nil, fmt.Errorf("registering escalation metrics: %w", err)
		}
	}
	return m, nil
}
