package metrics

import (
	"testing"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/client_golang/prometheus/testutil"
)

// Every loop-breaker series is exported at 0 before the first event, so an
// alert on increase() sees the first trip.
func TestLoopBreakerSeriesExistAtStart(t *testing.T) {
	reg := prometheus.NewRegistry()
	m, err := NewLoopBreaker(reg)
	if err != nil {
		t.Fatal(err)
	}
	for name, want := range map[string]int{
		"ironcurtain_loop_breaker_trips_total":         3,
		"ironcurtain_loop_breaker_refused_calls_total": 3, // paused, cooldown, unavailable
		"ironcurtain_loop_breaker_resolved_total":      2,
	} {
		if n, err := testutil.GatherAndCount(reg, name); err != nil || n != want {
			t.Errorf("%s: %d series (%v), want %d at 0", name, n, err, want)
		}
	}
	m.Trip("denials")
	if got := testutil.ToFloat64(m.trips.WithLabelValues("denials")); got != 1 {
		t.Errorf("trips{limit=denials} = %v after one trip, want 1", got)
	}
}
