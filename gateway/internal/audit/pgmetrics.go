package audit

import (
	"fmt"

	"github.com/prometheus/client_golang/prometheus"
)

// sinkMetrics are the Postgres sink's metrics.
type sinkMetrics struct {
	records        *prometheus.CounterVec // type, result
	failures       *prometheus.CounterVec // reason
	retries        prometheus.Counter
	queueFullWaits prometheus.Counter
	commitSeconds  prometheus.Histogram
	recordSeconds  prometheus.Histogram
	batchSize      prometheus.Histogram
}

func newSinkMetrics(reg prometheus.Registerer, queueDepth func() float64) (*sinkMetrics, error) {
	m := &sinkMetrics{
		records: prometheus.NewCounterVec(prometheus.CounterOpts{
			Name: "ironcurtain_audit_records_total",
			Help: "Audit records by event type and result (ok: committed; error: not written, the caller refused the action).",
		}, []string{"type", "result"}),
		failures: prometheus.NewCounterVec(prometheus.CounterOpts{
			Name: "ironcurtain_audit_failures_total",
			Help: "Audit records that were not written, by reason: db, rejected (bad row), timeout, queue_full, closed, invalid.",
		}, []string{"reason"}),
		retries: prometheus.NewCounter(prometheus.CounterOpts{
			Name: "ironcurtain_audit_batch_retries_total",
			Help: "Audit transactions retried after a deadlock or serialization failure, or because another replica had moved a cached chain head.",
		}),
		queueFullWaits: prometheus.NewCounter(prometheus.CounterOpts{
			Name: "ironcurtain_audit_queue_full_waits_total",
			Help: "Records that found the audit queue full and had to wait for room.",
		}),
		commitSeconds: prometheus.NewHistogram(prometheus.HistogramOpts{
			Name:    "ironcurtain_audit_commit_seconds",
			Help:    "Duration of one audit transaction (group commit of a batch).",
			Buckets: prometheus.ExponentialBuckets(0.0005, 2, 14),
		}),
		recordSeconds: prometheus.NewHistogram(prometheus.HistogramOpts{
			Name:    "ironcurtain_audit_record_seconds",
			Help:    "Latency a Record call adds: from the call until its row is committed.",
			Buckets: prometheus.ExponentialBuckets(0.0005, 2, 14),
		}),
		batchSize: prometheus.NewHistogram(prometheus.HistogramOpts{
			Name:    "ironcurtain_audit_batch_size",
			Help:    "Records per audit transaction.",
			Buckets: prometheus.ExponentialBuckets(1, 2, 11),
		}),
	}
	if reg == nil {
		return m, nil
	}
	for _, c := range []prometheus.Collector{
		m.records, m.failures, m.retries, m.queueFullWaits, m.commitSeconds, m.recordSeconds, m.batchSize,
		prometheus.NewGaugeFunc(prometheus.GaugeOpts{
			Name: "ironcurtain_audit_queue_depth",
			Help: "Audit records waiting for a flusher.",
		}, queueDepth),
	} {
		if err := reg.Register(c); err != nil {
			return nil, fmt.Errorf("registering audit metrics: %w", err)
		}
	}
	return m, nil
}
