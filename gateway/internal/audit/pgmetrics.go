package audit

import (
	"github.com/prometheus/client_golang/prometheus"

	"ironcurtain.dev/gateway/internal/promkit"
)

// failureReasons are the reason label values of ironcurtain_audit_failures_total.
var failureReasons = []string{"db", "rejected", "timeout", "queue_full", "closed", "invalid", "db_down", "spool_full", "spool"}

// sinkMetrics are the Postgres sink's metrics.
type sinkMetrics struct {
	records        *prometheus.CounterVec // type, result
	failures       *prometheus.CounterVec // reason
	retries        prometheus.Counter
	queueFullWaits prometheus.Counter
	commitSeconds  prometheus.Histogram
	recordSeconds  prometheus.Histogram
	batchSize      prometheus.Histogram
	spooled        *prometheus.CounterVec // kind
	replayed       *prometheus.CounterVec // result
	spoolFull      prometheus.Counter
}

// sinkGauges are read when the metrics are scraped.
type sinkGauges struct {
	queueDepth, databaseUp, spoolRecords, spoolFree func() float64
}

func (s *PGSink) gauges() sinkGauges {
	return sinkGauges{
		queueDepth: func() float64 {
			n := 0
			for _, q := range s.queues {
				n += len(q)
			}
			return float64(n)
		},
		databaseUp: func() float64 {
			if down, _ := s.gate.isDown(); down {
				return 0
			}
			return 1
		},
		spoolRecords: func() float64 {
			if s.opts.Spool == nil {
				return 0
			}
			return float64(s.opts.Spool.Len())
		},
		spoolFree: func() float64 {
			if s.opts.Spool == nil {
				return 0
			}
			return float64(s.opts.Spool.Free())
		},
	}
}

func newSinkMetrics(reg prometheus.Registerer, g sinkGauges) (*sinkMetrics, error) {
	m := &sinkMetrics{
		records:        promkit.CounterVec("ironcurtain_audit_records_total", "Audit records by event type and result (ok: committed; error: not written, the caller refused the action).", "type", "result"),
		failures:       promkit.CounterVec("ironcurtain_audit_failures_total", "Audit records that were not written, by reason: db, rejected (bad row), timeout, queue_full, closed, invalid, db_down (not sent: backing off), spool_full.", "reason"),
		retries:        promkit.Counter("ironcurtain_audit_batch_retries_total", "Audit transactions retried after a deadlock or serialization failure, or because another replica had moved a cached chain head."),
		queueFullWaits: promkit.Counter("ironcurtain_audit_queue_full_waits_total", "Records that found the audit queue full and had to wait for room."),
		commitSeconds:  promkit.Histogram("ironcurtain_audit_commit_seconds", "Duration of one audit transaction (group commit of a batch).", prometheus.ExponentialBuckets(0.0005, 2, 14)),
		recordSeconds:  promkit.Histogram("ironcurtain_audit_record_seconds", "Latency a Record call adds: from the call until its row is committed.", prometheus.ExponentialBuckets(0.0005, 2, 14)),
		batchSize:      promkit.Histogram("ironcurtain_audit_batch_size", "Records per audit transaction.", prometheus.ExponentialBuckets(1, 2, 11)),
		spooled:        promkit.CounterVec("ironcurtain_audit_spooled_total", "Outcome records kept in the local spool because the database did not take them in time, by kind (outcome; unconfirmed: the call was refused because its decision commit was ambiguous).", "kind"),
		replayed:       promkit.CounterVec("ironcurtain_audit_spool_replayed_total", "Spooled records that left the spool, by result: written, already_written (the first attempt had committed), not_decided (an unconfirmed decision that had not committed: nothing to record).", "result"),
		spoolFull:      promkit.Counter("ironcurtain_audit_spool_full_total", "Tool calls refused because the audit spool had no room left for their outcome."),
	}
	// Every failure reason is exported from the start, at 0: an alert on
	// increase(ironcurtain_audit_failures_total[5m]) sees the first failure
	// (a series that appears at 1 has no increase), and the dashboards'
	// panels exist before anything fails (compose/observability).
	for _, reason := range failureReasons {
		m.failures.WithLabelValues(reason)
	}
	if err := promkit.Register(reg, "audit", "",
		m.records, m.failures, m.retries, m.queueFullWaits, m.commitSeconds, m.recordSeconds, m.batchSize,
		m.spooled, m.replayed, m.spoolFull,
		promkit.GaugeFunc("ironcurtain_audit_queue_depth", "Audit records waiting for a flusher.", g.queueDepth),
		promkit.GaugeFunc("ironcurtain_audit_database_up", "1 while audit writes reach the database, 0 while they back off after a failure.", g.databaseUp),
		promkit.GaugeFunc("ironcurtain_audit_spool_records", "Outcome records in the local spool, waiting for the database.", g.spoolRecords),
		promkit.GaugeFunc("ironcurtain_audit_spool_free", "Room left in the audit spool (records not spooled nor reserved by calls in flight); at 0 new calls are refused.", g.spoolFree),
	); err != nil {
		return nil, err
	}
	return m, nil
}
