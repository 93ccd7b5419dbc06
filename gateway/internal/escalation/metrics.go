package escalation

import (
	"fmt"

	"github.com/prometheus/client_golang/prometheus"
)

type metrics struct {
	opened             *prometheus.CounterVec // kind
	decided            *prometheus.CounterVec // status, by (operator|timeout|similar|auto)
	pending            prometheus.Gauge
	waitSeconds        prometheus.Histogram
	webhookSent        prometheus.Counter
	webhookFailures    *prometheus.CounterVec // reason
	listenerReconnects prometheus.Counter
	reused             *prometheus.CounterVec // status (pending|approved) when attached
	approvalRefused    *prometheus.CounterVec // reason (used|stale)
	readRetries        prometheus.Counter     // reads retried while the database was unreachable
	gaveUp             prometheus.Counter     // waits ended because the database stayed unreachable
}

func newMetrics(reg prometheus.Registerer) (*metrics, error) {
	m := &metrics{
		opened: prometheus.NewCounterVec(prometheus.CounterOpts{
			Name: "ironcurtain_escalations_opened_total",
			Help: "Escalations opened (waiting for a human), by kind.",
		}, []string{"kind"}),
		decided: prometheus.NewCounterVec(prometheus.CounterOpts{
			Name: "ironcurtain_escalations_decided_total",
			Help: "Escalation decisions by status and by whom: operator, timeout, similar (approve-similar entry) or auto (the auto-approver).",
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
		readRetries: prometheus.NewCounter(prometheus.CounterOpts{
			Name: "ironcurtain_escalation_db_retries_total",
			Help: "Reads and updates of waiting escalations retried because the database was unreachable (jittered back-off until the escalation's deadline).",
		}),
		gaveUp: prometheus.NewCounter(prometheus.CounterOpts{
			Name: "ironcurtain_escalation_db_unavailable_total",
			Help: "Waiting calls refused because the database was still unreachable at the escalation's deadline.",
		}),
	}
	if reg == nil {
		return m, nil
	}
	for _, c := range []prometheus.Collector{m.opened, m.decided, m.pending, m.waitSeconds, m.webhookSent, m.webhookFailures, m.listenerReconnects, m.reused, m.approvalRefused, m.readRetries, m.gaveUp} {
		if err := reg.Register(c); err != nil {
			return nil, fmt.Errorf("registering escalation metrics: %w", err)
		}
	}
	return m, nil
}
