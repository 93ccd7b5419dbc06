// Package escalation hands calls that policy escalates to a human and waits
// for the answer. The Postgres-backed Escalator (PG, pg.go) survives restarts
// and wakes waiters with LISTEN/NOTIFY; Deny refuses every escalation.
//
// An approval runs at most one call. When the call that waited for it is
// gone (the gateway stopped while it waited), the identical retry of the
// same session finds the escalation (Reuser, reuse.go): it waits on it while
// it is pending, or runs once on its approval.
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

	// Exact is the exact, unredacted call the decision was made on
	// (canonical JSON, e.g. the agent's and the policy's arguments). It is
	// never stored: the Escalator keeps a salted digest of it, so that an
	// identical retry can find this escalation (Reuser). Empty: no retry
	// may ever use this escalation.
	Exact []byte

	// RuleEscalation says that a compiled policy rule escalated the call
	// (policy.Decision.Compiled): only such a call may be shown to the
	// auto-approver (Reviewer). The MCP hub sets it; every other
	// escalation (structural checks, egress, the loop breaker) leaves it
	// false and is decided by a human only.
	RuleEscalation bool
	// PolicyArgs are the redacted canonical arguments the policy decided
	// on (paths resolved, URLs normalised), shown to the auto-approver
	// next to Args. Never stored.
	PolicyArgs json.RawMessage

	// Attach says that ID names an existing escalation of an identical
	// earlier call, found with Reuser.Reusable, which this call waits on or
	// runs on instead of opening a new one. The Escalator checks that the
	// escalation is for the same session, server, tool and exact call.
	Attach bool
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

// Reuser is implemented by Escalators that let a call use the escalation of
// an identical earlier call whose waiter is gone (a retry after a gateway
// restart). The MCP hub asks before it records its write-ahead decision, so
// that the decision row names the escalation the call will wait on.
type Reuser interface {
	// Reusable returns the id of an escalation req may attach to (with
	// Request.Attach), or "" when there is none: an escalation of the same
	// session, server, tool and exact call (Request.Exact) that is pending,
	// or approved, recent and not yet used by any call. A denied, expired or
	// used escalation is never returned: the retry asks a human again.
	Reusable(ctx context.Context, req Request) (string, error)
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
