package servers

import (
	"context"
	"time"

	"github.com/google/uuid"

	"ironcurtain.dev/gateway/internal/audit"
	"ironcurtain.dev/gateway/internal/tracing"
)

// Egress is one network exchange a tool server or a door makes while
// serving a call (a fetch hop, a git transfer, a GitHub API request, a
// request to a url: MCP server).
type Egress struct {
	// ID is the row id (a new UUID when empty).
	ID string
	// Start is when the exchange began (time.Now when zero).
	Start time.Time
	// Kind names the door or server: "fetch", "git", "github-api", "github",
	// "mcp-url".
	Kind   string
	Method string // GET, POST, ...; for git the operation (fetch, push, ls-remote)
	Host   string
	Port   int
}

// NewEgressEvent builds the egress record (audit.NewEgressEvent) a tool
// server or a door writes for a network exchange made while serving a call:
// it links the row to the call being served (CallInfo in ctx: tool_call_id
// and session) and to the call's trace. The caller fills in the decision, bytes, duration and error
// and records it before it answers the call. Outside a call (no CallInfo)
// the row has no tool_call_id, which `audit verify` and the console show.
func NewEgressEvent(ctx context.Context, e Egress) *audit.EgressEvent {
	ci, _ := CallInfoFrom(ctx)
	if e.ID == "" {
		e.ID = uuid.NewString()
	}
	if e.Start.IsZero() {
		e.Start = time.Now()
	}
	return audit.NewEgressEvent(audit.EgressFields{
		ID: e.ID, SessionID: ci.SessionID, ToolCallID: ci.CallID, Time: e.Start,
		Kind: e.Kind, Method: e.Method, Host: e.Host, Port: e.Port, TraceID: tracing.TraceID(ctx),
	})
}
