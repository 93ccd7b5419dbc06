// Package escalation hands calls that policy escalates to a human and waits
// for the answer. The Postgres-backed Escalator (PG, pg.go) survives restarts
// and wakes waiters with LISTEN/NOTIFY; Deny refuses every escalation.
package escalation

import (
	"context"
	"encoding/json"
	"errors"
	"time"
)

// Request describes the call that waits for a human.
type Request struct {
	CallID    string // the tool call (or egress request) id
	SessionID string
	Kind      string // "tool_call" or "egress"
	Server    string // for tool calls
	Tool      string
	Args      json.RawMessage // redacted arguments, shown to the operator
	Rule      string          // the policy rule that escalated
	Reason    string
	// Resource is what "approve similar" may be scoped by: a directory,
	// a domain, or empty for exact-argument matching only.
	Resource string

	// ID, when set, is the escalation id to use for the row the Escalator
	// creates (and to return in Result.ID). The MCP hub chooses it so that
	// the tool call's write-ahead decision row (status escalate + this id)
	// is durable before any operator can see the escalation. Empty: the
	// Escalator chooses.
	ID string
}

// Result is the human's answer.
type Result struct {
	ID        string // escalation id
	Approved  bool
	Status    string // approved | denied | expired | cancelled
	DecidedBy string
	Reason    string
	DecidedAt time.Time
}

// Escalator asks a human. Escalate blocks until a decision, the escalation's
// own timeout (which yields a denied Result, not an error) or ctx ends.
// An error means no decision was obtained: the caller must refuse the call.
type Escalator interface {
	Escalate(ctx context.Context, req Request) (Result, error)
}

// ErrNoApprover is returned by Deny.
var ErrNoApprover = errors.New("no human approver is configured")

// Deny is the Escalator used when no approval channel exists: every
// escalation is refused with a clear reason.
type Deny struct{}

var _ Escalator = Deny{}

// Escalate refuses.
func (Deny) Escalate(_ context.Context, _ Request) (Result, error) {
	return Result{Status: "denied", Reason: "this call needs human approval and no approver is configured"}, nil
}
