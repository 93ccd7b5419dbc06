package audit

import (
	"testing"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/client_golang/prometheus/testutil"
)

// TestFailureReasonsExportedAtZero: every reason of
// ironcurtain_audit_failures_total is a series from the start, so an alert on
// its increase sees the first failure.
func TestFailureReasonsExportedAtZero(t *testing.T) {
	zero := func() float64 { return 0 }
	reg := prometheus.NewRegistry()
	m, err := newSinkMetrics(reg, sinkGauges{queueDepth: zero, databaseUp: zero, spoolRecords: zero, spoolFree: zero})
	if err != nil {
		t.Fatal(err)
	}
	if n := testutil.CollectAndCount(m.failures); n != len(failureReasons) {
		t.Fatalf("%d failure series before any failure, want %d", n, len(failureReasons))
	}
	for _, reason := range failureReasons {
		if v := testutil.ToFloat64(m.failures.WithLabelValues(reason)); v != 0 {
			t.Errorf("failures{reason=%q} = %v, want 0", reason, v)
		}
	}
}
