package metrics

import (
	"strings"
	"testing"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/client_golang/prometheus/testutil"
)

func TestToolCallsRecords(t *testing.T) {
	reg := prometheus.NewPedanticRegistry()
	m, err := NewToolCalls(reg)
	if err != nil {
		t.Fatal(err)
	}
	m.Decision("filesystem", "read_text_file", "allow")
	m.Decision("filesystem", "read_text_file", "allow")
	m.Decision("git", "push", "escalate")
	m.Outcome("filesystem", "read_text_file", "ok", 3*time.Millisecond)
	m.AuthFailure("unknown_token")
	m.Restart("notes")
	m.RefusedRequest("shape")
	m.MCPSessions(3)

	tests := []struct {
		name   string
		metric string
		want   string
	}{
		{name: "decisions", metric: "ironcurtain_tool_calls_total", want: `
# HELP ironcurtain_tool_calls_total Tool calls by server, tool and policy decision (allow, deny, escalate).
# TYPE ironcurtain_tool_calls_total counter
ironcurtain_tool_calls_total{decision="allow",server="filesystem",tool="read_text_file"} 2
ironcurtain_tool_calls_total{decision="escalate",server="git",tool="push"} 1
`},
		{name: "auth failures", metric: "ironcurtain_mcp_auth_failures_total", want: `
# HELP ironcurtain_mcp_auth_failures_total Requests to the MCP endpoint refused for a missing or unknown agent token, or a foreign MCP session.
# TYPE ironcurtain_mcp_auth_failures_total counter
ironcurtain_mcp_auth_failures_total{reason="unknown_token"} 1
`},
		{name: "refused requests", metric: "ironcurtain_mcp_refused_requests_total", want: `
# HELP ironcurtain_mcp_refused_requests_total Requests to the MCP endpoint refused before mcp-go read them, by reason (bad_json, shape, unknown_name, bad_params, batch, busy, sessions_full).
# TYPE ironcurtain_mcp_refused_requests_total counter
ironcurtain_mcp_refused_requests_total{reason="shape"} 1
`},
		{name: "sessions", metric: "ironcurtain_mcp_sessions", want: `
# HELP ironcurtain_mcp_sessions Open MCP sessions (initialized, not yet closed or expired).
# TYPE ironcurtain_mcp_sessions gauge
ironcurtain_mcp_sessions 3
`},
		{name: "restarts", metric: "ironcurtain_external_server_restarts_total", want: `
# HELP ironcurtain_external_server_restarts_total Restarts of external stdio MCP servers after they exited.
# TYPE ironcurtain_external_server_restarts_total counter
ironcurtain_external_server_restarts_total{server="notes"} 1
`},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			if err := testutil.GatherAndCompare(reg, strings.NewReader(tt.want), tt.metric); err != nil {
				t.Error(err)
			}
		})
	}
	if n := testutil.CollectAndCount(m.duration, "ironcurtain_tool_call_duration_seconds"); n != 1 {
		t.Errorf("duration series = %d, want 1", n)
	}
	problems, err := testutil.GatherAndLint(reg)
	if err != nil {
		t.Fatal(err)
	}
	for _, p := range problems {
		t.Errorf("lint %s: %s", p.Metric, p.Text)
	}
}

func TestToolCallsRegisterTwiceFails(t *testing.T) {
	reg := prometheus.NewRegistry()
	if _, err := NewToolCalls(reg); err != nil {
		t.Fatal(err)
	}
	if _, err := NewToolCalls(reg); err == nil {
		t.Fatal("second registration on the same registry succeeded")
	}
}

func TestNilToolCallsIsSafe(t *testing.T) {
	var m *ToolCalls
	m.Decision("a", "b", "allow")
	m.Outcome("a", "b", "ok", time.Second)
	m.AuthFailure("missing_token")
	m.Restart("x")
}

func BenchmarkDecisionAndOutcome(b *testing.B) {
	m, err := NewToolCalls(nil)
	if err != nil {
		b.Fatal(err)
	}
	b.ReportAllocs()
	for b.Loop() {
		m.Decision("filesystem", "read_text_file", "allow")
		m.Outcome("filesystem", "read_text_file", "ok", time.Millisecond)
	}
}
