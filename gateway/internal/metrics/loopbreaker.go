package metrics

import (
	"github.com/prometheus/client_golang/prometheus"

	"ironcurtain.dev/gateway/internal/loopguard"

	"ironcurtain.dev/gateway/internal/promkit"
)

// LoopBreaker records what the per-session loop breaker does
// (loopguard.Metrics). A nil *LoopBreaker records nothing.
type LoopBreaker struct {
	trips    *prometheus.CounterVec
	refused  *prometheus.CounterVec
	resolved *prometheus.CounterVec
}

// NewLoopBreaker creates the loop-breaker metrics and registers them on reg
// (nil: unregistered).
func NewLoopBreaker(reg prometheus.Registerer) (*LoopBreaker, error) {
	m := &LoopBreaker{
		trips:    promkit.CounterVec("ironcurtain_loop_breaker_trips_total", "Sessions paused behind an escalation because they crossed a limit (rate, identical, denials).", "limit"),
		refused:  promkit.CounterVec("ironcurtain_loop_breaker_refused_calls_total", "Calls refused because their session was paused (waiting for an operator), cooling down (an operator denied the pause), or its shared state could not be read (unavailable).", "state"),
		resolved: promkit.CounterVec("ironcurtain_loop_breaker_resolved_total", "Pauses ended, by result (approved: the session goes on; denied: its calls are refused for the cooldown).", "result"),
	}
	// Every label value is exported at 0 from the start, so the first trip
	// is an increase an alert can see.
	for _, l := range []string{loopguard.LimitRate, loopguard.LimitIdentical, loopguard.LimitDenials} {
		m.trips.WithLabelValues(l)
	}
	for _, st := range []string{"paused", "cooldown", "unavailable"} {
		m.refused.WithLabelValues(st)
	}
	for _, r := range []string{"approved", "denied"} {
		m.resolved.WithLabelValues(r)
	}
	if err := promkit.Register(reg, "loop-breaker", "", m.trips, m.refused, m.resolved); err != nil {
		return nil, err
	}
	return m, nil
}

// Trip counts a session paused for limit.
func (m *LoopBreaker) Trip(limit string) {
	if m != nil {
		m.trips.WithLabelValues(limit).Inc()
	}
}

// Refused counts a call refused in state ("paused", "cooldown" or
// "unavailable").
func (m *LoopBreaker) Refused(state string) {
	if m != nil {
		m.refused.WithLabelValues(state).Inc()
	}
}

// Resolved counts a pause ended with result ("approved" or "denied").
func (m *LoopBreaker) Resolved(result string) {
	if m != nil {
		m.resolved.WithLabelValues(result).Inc()
	}
}
