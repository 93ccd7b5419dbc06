package escalation

import (
	"github.com/prometheus/client_golang/prometheus"

	"ironcurtain.dev/gateway/internal/promkit"
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
		opened:             promkit.CounterVec("ironcurtain_escalations_opened_total", "Escalations opened (waiting for a human), by kind.", "kind"),
		decided:            promkit.CounterVec("ironcurtain_escalations_decided_total", "Escalation decisions by status and by whom: operator, timeout, similar (approve-similar entry) or auto (the auto-approver).", "status", "by"),
		pending:            promkit.Gauge("ironcurtain_escalations_pending", "Escalations waiting for a human (escalation queue depth), refreshed by the expiry sweep."),
		waitSeconds:        promkit.Histogram("ironcurtain_escalation_decision_seconds", "Time from opening an escalation to its decision, as seen by the waiting call.", prometheus.ExponentialBuckets(0.05, 2, 14)),
		webhookSent:        promkit.Counter("ironcurtain_escalation_webhook_sent_total", "Escalation announcements delivered to the webhook."),
		webhookFailures:    promkit.CounterVec("ironcurtain_escalation_webhook_failures_total", "Escalation announcements that failed, by reason: network, status, queue_full, encode, request.", "reason"),
		listenerReconnects: promkit.Counter("ironcurtain_escalation_listener_reconnects_total", "Times the LISTEN connection for escalation decisions was re-established."),
		reused:             promkit.CounterVec("ironcurtain_escalations_reused_total", "Identical retries that attached to an earlier call's escalation instead of opening one, by its status then: pending (waits on it) or approved (runs on it).", "status"),
		approvalRefused:    promkit.CounterVec("ironcurtain_escalation_approvals_refused_total", "Calls refused an approval, by reason: used (it already ran another call) or stale (decided otherwise, or too old, before the call could use it).", "reason"),
		readRetries:        promkit.Counter("ironcurtain_escalation_db_retries_total", "Reads and updates of waiting escalations retried because the database was unreachable (jittered back-off until the escalation's deadline)."),
		gaveUp:             promkit.Counter("ironcurtain_escalation_db_unavailable_total", "Waiting calls refused because the database was still unreachable at the escalation's deadline."),
	}
	if err := promkit.Register(reg, "escalation", "", m.opened, m.decided, m.pending, m.waitSeconds, m.webhookSent, m.webhookFailures, m.listenerReconnects, m.reused, m.approvalRefused, m.readRetries, m.gaveUp); err != nil {
		return nil, err
	}
	return m, nil
}
