package audit

import "time"

// EgressFields name one network exchange: who made it, when, and where to.
// They are known when the exchange starts; what became of it (decision,
// rule, reason, resolved address, bytes, duration, error) is set on the
// record as the exchange goes on.
type EgressFields struct {
	ID         string    // the row id; the caller chooses it (a new UUID, or the stored one)
	SessionID  string    // empty when the client did not authenticate
	ToolCallID string    // the call being served, when a gateway tool or door made it
	TraceID    string    // the trace of the request or call, when there is one
	Time       time.Time // when the exchange began
	Kind       string    // connect | http | fetch | git | github | github-api | mcp-url | auth-failures
	Method     string
	Host       string // canonical host name or IP literal
	Port       int
}

// NewEgressEvent is the one constructor of the egress record: every door and
// tool server that records an exchange, and the chain verifier that reads
// one back, builds it here. It copies f as given (no defaults, no
// truncation: the caller's record is the stored one).
func NewEgressEvent(f EgressFields) *EgressEvent {
	return &EgressEvent{
		ID: f.ID, SessionID: f.SessionID, ToolCallID: f.ToolCallID, TraceID: f.TraceID, Time: f.Time,
		Kind: f.Kind, Method: f.Method, Host: f.Host, Port: f.Port,
	}
}
