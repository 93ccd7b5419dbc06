package audit

import (
	"context"
	"encoding/base64"
	"encoding/json"
	"errors"
	"fmt"
	"strconv"
	"strings"
	"time"
	"unicode/utf8"

	"github.com/jackc/pgx/v5"
)

// Query limits.
const (
	DefaultQueryLimit = 100
	MaxQueryLimit     = 10000
	// MaxReadArgsBytes bounds the arguments one row of a query returns.
	// Rows stored since migration 0005 are already bounded when they are
	// written; older rows were stored whole, and longer ones come back as a
	// {"$truncated": ...} marker computed by Postgres, so the gateway never
	// receives their full text. (Twice the default stored bound: rows
	// written with larger audit.max_args_bytes are cut here too.)
	MaxReadArgsBytes = 2 * DefaultMaxArgsBytes
)

// Querier runs a query: a *pgxpool.Pool, *pgx.Conn or pgx.Tx.
type Querier interface {
	Query(ctx context.Context, sql string, args ...any) (pgx.Rows, error)
}

// Cursor is a position in a tool-call listing: the (time, call id) of the
// last row returned. A query with a cursor continues strictly after it in
// its own order.
type Cursor struct {
	Time   time.Time
	CallID string
}

// IsZero reports whether c is no position.
func (c Cursor) IsZero() bool { return c.Time.IsZero() && c.CallID == "" }

// String encodes c as an opaque next-page token ("" for the zero cursor).
func (c Cursor) String() string {
	if c.IsZero() {
		return ""
	}
	raw := "1|" + c.Time.UTC().Format(time.RFC3339Nano) + "|" + c.CallID
	return base64.RawURLEncoding.EncodeToString([]byte(raw))
}

// ErrBadCursor is returned for a next-page token this package did not make.
var ErrBadCursor = errors.New("not a next-page token")

// ParseCursor decodes a token made by Cursor.String ("" is the zero cursor).
func ParseCursor(s string) (Cursor, error) {
	if s == "" {
		return Cursor{}, nil
	}
	if len(s) > 1024 {
		return Cursor{}, ErrBadCursor
	}
	raw, err := base64.RawURLEncoding.DecodeString(s)
	if err != nil {
		return Cursor{}, ErrBadCursor
	}
	version, rest, ok := strings.Cut(string(raw), "|")
	if !ok || version != "1" {
		return Cursor{}, ErrBadCursor
	}
	ts, id, ok := strings.Cut(rest, "|")
	if !ok || !utf8.ValidString(id) || strings.IndexByte(id, 0) >= 0 {
		return Cursor{}, ErrBadCursor
	}
	t, err := time.Parse(time.RFC3339Nano, ts)
	if err != nil {
		return Cursor{}, ErrBadCursor
	}
	return Cursor{Time: t, CallID: id}, nil
}

// Filter selects tool calls for `ironcurtain audit query|tail` and the ops
// API. Empty fields do not filter.
type Filter struct {
	Session  string
	Server   string
	Tool     string
	Decision string    // allow | deny | escalate
	Since    time.Time // calls decided at or after Since
	// After returns only calls decided strictly after this point, oldest
	// first (tail uses the last row it printed). Zero: newest first.
	After time.Time
	// Cursor continues a listing after the row it names (next page).
	Cursor Cursor
	Limit  int // default DefaultQueryLimit, capped at MaxQueryLimit
}

// Validate checks the filter's values. Text that Postgres could not take
// (invalid UTF-8, NUL) is refused here, naming the field.
func (f Filter) Validate() error {
	switch f.Decision {
	case "", "allow", "deny", "escalate":
	default:
		return fmt.Errorf("filter decision: %q is not allow, deny or escalate", f.Decision)
	}
	if f.Limit < 0 {
		return fmt.Errorf("filter limit: %d is negative", f.Limit)
	}
	for _, p := range []struct{ name, v string }{{"session", f.Session}, {"server", f.Server}, {"tool", f.Tool}} {
		if err := CheckText(p.v); err != nil {
			return fmt.Errorf("filter %s: %w", p.name, err)
		}
	}
	return nil
}

// CheckText refuses what a Postgres text parameter cannot hold: invalid
// UTF-8 and NUL bytes.
func CheckText(s string) error {
	if !utf8.ValidString(s) {
		return errors.New("not valid UTF-8")
	}
	if strings.IndexByte(s, 0) >= 0 {
		return errors.New("contains a NUL byte")
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
	PolicyVersion  string          `json:"policy_version,omitempty"`
	TraceID        string          `json:"trace_id,omitempty"` // migration 0009; not in the hash chain
	Outcome        *Outcome        `json:"outcome,omitempty"`
}

// Cursor returns the position of c in a listing.
func (c *ToolCall) Cursor() Cursor { return Cursor{Time: c.Time, CallID: c.CallID} }

// Outcome is the end of a tool call.
type Outcome struct {
	Status      string        `json:"status"`
	Time        time.Time     `json:"time"`
	Duration    time.Duration `json:"duration_ns"`
	ResultBytes int64         `json:"result_bytes"`
	Truncated   bool          `json:"truncated,omitempty"`
	Error       string        `json:"error,omitempty"`
}

// ErrStop ends QueryEach early without an error.
var ErrStop = errors.New("stop")

// readFieldChars bounds the free-text fields (rule, reason, detail, error)
// one row returns, in characters: they are redacted but not bounded when
// they are stored.
const readFieldChars = 8 << 10

// QueryEach calls fn with each tool call matching f, one row at a time as
// Postgres returns them (nothing is collected): without After the newest
// first, with After (tail) the oldest first. Each row's arguments are at
// most about MaxReadArgsBytes. fn may return ErrStop to end early; any other
// error ends the query and is returned. The *ToolCall is reused: copy what
// you keep.
func QueryEach(ctx context.Context, q Querier, f Filter, fn func(*ToolCall) error) error {
	if err := f.Validate(); err != nil {
		return fmt.Errorf("querying audit: %w", err)
	}
	limit := f.Limit
	if limit == 0 {
		limit = DefaultQueryLimit
	}
	limit = min(limit, MaxQueryLimit)
	var (
		where []string
		args  = []any{MaxReadArgsBytes, DefaultMaxValueBytes, readFieldChars}
	)
	add := func(cond string, v ...any) {
		for _, x := range v {
			args = append(args, x)
			cond = strings.Replace(cond, "?", "$"+strconv.Itoa(len(args)), 1)
		}
		where = append(where, cond)
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
	order, after := "c.at DESC, c.call_id DESC", "<"
	if !f.After.IsZero() {
		add("c.at > ?", f.After)
		order, after = "c.at ASC, c.call_id ASC", ">"
	}
	if !f.Cursor.IsZero() {
		add("(c.at, c.call_id) "+after+" (?, ?)", f.Cursor.Time, f.Cursor.CallID)
	}
	// $1: the longest args returned as they are; longer ones come back as
	// their length, SHA-256 and first $2 characters. $3 bounds free text.
	sql := `
SELECT c.call_id, c.session_id, c.seq, c.at, c.server, c.tool,
       CASE WHEN octet_length(c.args) <= $1 THEN c.args END, octet_length(c.args),
       CASE WHEN octet_length(c.args) > $1 THEN left(c.args, $2) END,
       CASE WHEN octet_length(c.args) > $1 THEN encode(sha256(convert_to(c.args, 'UTF8')), 'hex') END,
       c.args_escaped, c.decision, left(c.rule, $3), left(c.reason, $3),
       c.shadow_decision, c.escalation_id, left(c.detail, $3), c.policy_version, c.trace_id,
       o.status, o.at, o.duration_ns, o.result_bytes, o.truncated, left(o.error, $3)
FROM tool_calls c LEFT JOIN tool_call_outcomes o ON o.call_id = c.call_id`
	if len(where) > 0 {
		sql += "\nWHERE " + strings.Join(where, " AND ")
	}
	args = append(args, limit)
	sql += fmt.Sprintf("\nORDER BY %s LIMIT $%d", order, len(args))

	rows, err := q.Query(ctx, sql, args...)
	if err != nil {
		return fmt.Errorf("querying audit: %w", err)
	}
	defer rows.Close()
	var (
		c               ToolCall
		o               Outcome
		stored, head    *string
		sum             *string
		size            int
		escaped         bool
		status, errText *string
		at              *time.Time
		dur, rbytes     *int64
		truncated       *bool
	)
	for rows.Next() {
		c = ToolCall{}
		if err := rows.Scan(&c.CallID, &c.SessionID, &c.Seq, &c.Time, &c.Server, &c.Tool, &stored, &size, &head, &sum,
			&escaped, &c.Decision, &c.Rule, &c.Reason, &c.ShadowDecision, &c.EscalationID, &c.Detail, &c.PolicyVersion,
			&c.TraceID, &status, &at, &dur, &rbytes, &truncated, &errText); err != nil {
			return fmt.Errorf("querying audit: reading a row: %w", err)
		}
		c.Args = readArgs(stored, size, head, sum, escaped)
		if status != nil {
			o = Outcome{Status: *status, Time: *at, Duration: time.Duration(*dur), ResultBytes: *rbytes, Truncated: *truncated, Error: *errText}
			c.Outcome = &o
		}
		if err := fn(&c); err != nil {
			if errors.Is(err, ErrStop) {
				return nil
			}
			return err
		}
	}
	if err := rows.Err(); err != nil {
		return fmt.Errorf("querying audit: %w", err)
	}
	return nil
}

// readArgs turns a row's stored arguments into what a query returns: the
// stored text when it is within MaxReadArgsBytes (escaped if it predates
// escaping), else a {"$truncated": ...} marker over the stored text.
func readArgs(stored *string, size int, head, sum *string, escaped bool) json.RawMessage {
	if stored == nil {
		t := Truncation{Bytes: size}
		if sum != nil {
			t.SHA256 = *sum
		}
		if head != nil {
			t.Head = headOf(*head, DefaultMaxValueBytes)
		}
		m, _ := marshal(map[string]any{KeyTruncated: t})
		return m
	}
	if escaped && json.Valid([]byte(*stored)) {
		return json.RawMessage(*stored)
	}
	// A row from before migration 0005: bound and escape it like a new one
	// (its values are not redacted again: they were when it was written).
	var v any
	dec := json.NewDecoder(strings.NewReader(*stored))
	dec.UseNumber()
	if err := dec.Decode(&v); err != nil {
		b, _ := marshal(*stored)
		return b
	}
	v, _ = truncateValues(escapeKeys(v), DefaultMaxValueBytes)
	b, err := marshal(v)
	if err != nil {
		b, _ = marshal(*stored)
	}
	return b
}

// Query returns at most f.Limit tool calls matching f (see QueryEach). It
// collects them: use QueryEach where the result is streamed.
func Query(ctx context.Context, q Querier, f Filter) ([]ToolCall, error) {
	var out []ToolCall
	err := QueryEach(ctx, q, f, func(c *ToolCall) error {
		out = append(out, *c)
		return nil
	})
	return out, err
}
