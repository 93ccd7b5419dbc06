package metrics

import (
	"time"

	"github.com/prometheus/client_golang/prometheus"

	"ironcurtain.dev/gateway/internal/promkit"
)

// Label values used when the server or tool of a call is not one the hub
// knows: agent-chosen names never become label values (unbounded cardinality).
const (
	UnknownServer = "unknown"
	UnknownTool   = "unknown"
)

// DurationBuckets are the histogram buckets of tool-call latency, in seconds:
// from 100 µs (a policy-denied call) to two minutes (a slow clone or fetch).
var DurationBuckets = []float64{0.0001, 0.00025, 0.0005, 0.001, 0.0025, 0.005, 0.01, 0.025, 0.05, 0.1, 0.25, 0.5, 1, 2.5, 5, 10, 30, 60, 120}

// ToolCalls records what the MCP hub does. A nil *ToolCalls records nothing,
// so components can run without metrics in tests.
type ToolCalls struct {
	calls        *prometheus.CounterVec
	outcomes     *prometheus.CounterVec
	duration     *prometheus.HistogramVec
	authFailures *prometheus.CounterVec
	restarts     *prometheus.CounterVec
	pins         *prometheus.CounterVec
	refused      *prometheus.CounterVec
	sessions     prometheus.Gauge
}

// NewToolCalls creates the hub metrics and registers them on reg. A nil reg
// creates unregistered metrics (useful in tests and benchmarks).
func NewToolCalls(reg prometheus.Registerer) (*ToolCalls, error) {
	m := &ToolCalls{
		calls:        promkit.CounterVec("ironcurtain_tool_calls_total", "Tool calls by server, tool and policy decision (allow, deny, escalate).", "server", "tool", "decision"),
		outcomes:     promkit.CounterVec("ironcurtain_tool_call_outcomes_total", "Finished tool calls by server, tool and outcome (ok, error, denied, refused, timed_out).", "server", "tool", "outcome"),
		duration:     promkit.HistogramVec("ironcurtain_tool_call_duration_seconds", "Time the gateway spent on a tool call (policy, audit, forwarding), excluding time waiting for a human.", DurationBuckets, "server", "tool"),
		authFailures: promkit.CounterVec("ironcurtain_mcp_auth_failures_total", "Requests to the MCP endpoint refused for a missing or unknown agent token, or a foreign MCP session.", "reason"),
		restarts:     promkit.CounterVec("ironcurtain_external_server_restarts_total", "Restarts of external stdio MCP servers after they exited.", "server"),
		pins:         promkit.CounterVec("ironcurtain_tool_pin_mismatches_total", "External tools hidden because their definition differs from its pin, by what changed (name, description, schema, unpinned, removed, …).", "server", "tool", "change"),
		refused:      promkit.CounterVec("ironcurtain_mcp_refused_requests_total", "Requests to the MCP endpoint refused before mcp-go read them, by reason (bad_json, shape, unknown_name, bad_params, batch, busy, sessions_full).", "reason"),
		sessions:     promkit.Gauge("ironcurtain_mcp_sessions", "Open MCP sessions (initialized, not yet closed or expired)."),
	}
	if err := promkit.Register(reg, "tool-call", "create them once per registry", m.calls, m.outcomes, m.duration, m.authFailures, m.restarts, m.pins, m.refused, m.sessions); err != nil {
		return nil, err
	}
	return m, nil
}

// Decision counts one policy decision.
func (m *ToolCalls) Decision(server, tool, decision string) {
	if m == nil {
		return
	}
	m.calls.WithLabelValues(server, tool, decision).Inc()
}

// Outcome counts one finished call and observes the gateway time it took.
func (m *ToolCalls) Outcome(server, tool, outcome string, d time.Duration) {
	if m == nil {
		return
	}
	m.outcomes.WithLabelValues(server, tool, outcome).Inc()
	m.duration.WithLabelValues(server, tool).Observe(d.Seconds())
}

// AuthFailure counts one refused request; reason is a fixed word such as
// "missing_token", "unknown_token" or "foreign_session".
func (m *ToolCalls) AuthFailure(reason string) {
	if m == nil {
		return
	}
	m.authFailures.WithLabelValues(reason).Inc()
}

// Restart counts one restart of an external server.
func (m *ToolCalls) Restart(server string) {
	if m == nil {
		return
	}
	m.restarts.WithLabelValues(server).Inc()
}

// PinMismatch counts one tool hidden because change (a word: description,
// schema, name, unpinned, removed, …) differs from its pin.
func (m *ToolCalls) PinMismatch(server, tool, change string) {
	if m == nil {
		return
	}
	m.pins.WithLabelValues(server, tool, change).Inc()
}

// RefusedRequest counts one request to /mcp refused before it was parsed;
// reason is a fixed word (bad_json, shape, unknown_name, busy, …).
func (m *ToolCalls) RefusedRequest(reason string) {
	if m == nil {
		return
	}
	m.refused.WithLabelValues(reason).Inc()
}

// MCPSessions sets the number of open MCP sessions.
func (m *ToolCalls) MCPSessions(n int) {
	if m == nil {
		return
	}
	m.sessions.Set(float64(n))
}
