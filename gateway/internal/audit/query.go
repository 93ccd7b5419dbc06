package audit

import (
	"context"
	"encoding/json"
	"fmt"
	"strconv"
	"strings"
	"time"

	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgxpool"
)

// Query limits.
const (
	DefaultQueryLimit = 100
	MaxQueryLimit     = 10000
)

// Filter selects tool calls for `ironcurtain audit query|tail` and the ops
// API. Empty fields do not filter.
type Filter struct {
	Session  string
	Server   string
	Tool     string
	Decision string    // allow | deny | escalate
	Since    time.Time // calls decided at or after Since
	// After returns only calls decided strictly after this point (tail
	// uses the last row it printed). Zero: no bound.
	After time.Time
	Limit int // default DefaultQueryLimit, capped at MaxQueryLimit
}

// Validate checks the filter's values.
func (f Filter) Validate() error {
	switch f.Decision {
	case "", "allow", "deny", "escalate":
	default:
		return fmt.Errorf("filter decision: %q is not allow, deny or escalate", f.Decision)
	}
	if f.Limit < 0 {
		return fmt.Errorf("filter limit: %d is negative", f.Limit)
	}
	return nil
}

// ToolCall is one tool call with its decision and, once known, outcome.
type ToolCall struct {
	CallID         string          `json:"call_id"`
	SessionID      string          `json:"session_id"`
	Seq            int64           `json:"seq"`
	Time           time.Time       `json:"time"`
	Server         string          `json:"server"`
	Tool           string          `json:"tool"`
	Args           json.RawMessage `json:"args"`
	Decision       string          `json:"decision"`
	Rule           string          `json:"rule"`
	Reason         string          `json:"reason"`
	ShadowDecision string          `json:"shadow_decision,omitempty"`
	EscalationID   string          `json:"escalation_id,omitempty"`
	Detail         string          `json:"detail,omitempty"`
	Outcome        *Outcome        `json:"outcome,omitempty"`
}

// Outcome is the end of a tool call.
type Outcome struct {
	Status      string        `json:"status"`
	Time        time.Time     `json:"time"`
	Duration    time.Duration `json:"duration_ns"`
	ResultBytes int64         `json:"result_bytes"`
	Truncated   bool          `json:"truncated,omitempty"`
	Error       string        `json:"error,omitempty"`
}

// Query returns tool calls matching f. Without After they are the newest
// first; with After (tail) the oldest first.
func Query(ctx context.Context, pool *pgxpool.Pool, f Filter) ([]ToolCall, error) {
	if err := f.Validate(); err != nil {
		return nil, fmt.Errorf("querying audit: %w", err)
	}
	limit := f.Limit
	if limit == 0 {
		limit = DefaultQueryLimit
	}
	limit = min(limit, MaxQueryLimit)
	var (
		where []string
		args  []any
	)
	add := func(cond string, v any) {
		args = append(args, v)
		where = append(where, strings.ReplaceAll(cond, "?", "$"+strconv.Itoa(len(args))))
	}
	if f.Session != "" {
		add("c.session_id = ?", f.Session)
	}
	if f.Server != "" {
		add("c.server = ?", f.Server)
	}
	if f.Tool != "" {
		add("c.tool = ?", f.Tool)
	}
	if f.Decision != "" {
		add("c.decision = ?", f.Decision)
	}
	if !f.Since.IsZero() {
		add("c.at >= ?", f.Since)
	}
	order := "c.at DESC, c.call_id DESC"
	if !f.After.IsZero() {
		add("c.at > ?", f.After)
		order = "c.at ASC, c.call_id ASC"
	}
	sql := `
SELECT c.call_id, c.session_id, c.seq, c.at, c.server, c.tool, c.args, c.decision, c.rule, c.reason,
       c.shadow_decision, c.escalation_id, c.detail,
       o.status, o.at, o.duration_ns, o.result_bytes, o.truncated, o.error
FROM tool_calls c LEFT JOIN tool_call_outcomes o ON o.call_id = c.call_id`
	if len(where) > 0 {
		sql += "\nWHERE " + strings.Join(where, " AND ")
	}
	args = append(args, limit)
	sql += fmt.Sprintf("\nORDER BY %s LIMIT $%d", order, len(args))

	rows, err := pool.Query(ctx, sql, args...)
	if err != nil {
		return nil, fmt.Errorf("querying audit: %w", err)
	}
	out, err := pgx.CollectRows(rows, func(r pgx.CollectableRow) (ToolCall, error) {
		var (
			c               ToolCall
			args            string
			status, errText *string
			at              *time.Time
			dur, size       *int64
			truncated       *bool
		)
		err := r.Scan(&c.CallID, &c.SessionID, &c.Seq, &c.Time, &c.Server, &c.Tool, &args, &c.Decision, &c.Rule, &c.Reason,
			&c.ShadowDecision, &c.EscalationID, &c.Detail, &status, &at, &dur, &size, &truncated, &errText)
		c.Args = json.RawMessage(args)
		if !json.Valid(c.Args) {
			c.Args, _ = json.Marshal(args)
		}
		if status != nil {
			c.Outcome = &Outcome{Status: *status, Time: *at, Duration: time.Duration(*dur), ResultBytes: *size, Truncated: *truncated, Error: *errText}
		}
		return c, err
	})
	if err != nil {
		return nil, fmt.Errorf("querying audit: %w", err)
	}
	return out, nil
}
