package escalation

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"unicode/utf8"

	"ironcurtain.dev/gateway/internal/audit"
)

// Bounds of a listing (List, ListEach).
const (
	DefaultListLimit = 100
	MaxListLimit     = 1000
	// ListArgsBytes bounds the arguments one row of a listing returns. The
	// escalations table keeps each call's canonical arguments whole (up to
	// the request cap, 4 MiB): they are what an approval runs, and Get shows
	// them exactly. A listing shows them in audit's stored form instead
	// (audit.StoredArgs: "$" keys escaped, string values over
	// audit.DefaultMaxValueBytes cut to a {"$truncated": ...} marker), and
	// arguments longer than ListArgsBytes come back as one marker whose
	// length, SHA-256 and head Postgres computes, so the gateway never
	// receives their full text for a listing.
	ListArgsBytes = audit.DefaultMaxArgsBytes
	// listFieldChars bounds the free-text fields (rule, reason, resource,
	// decision) one row of a listing returns, in characters.
	listFieldChars = 8 << 10
)

// ListFilter selects escalations; empty fields do not filter.
type ListFilter struct {
	Status  string // pending, approved, denied, expired, cancelled
	Session string
	Limit   int // default DefaultListLimit, at most MaxListLimit
	// Cursor continues a listing after the escalation it names (see
	// Escalation.Cursor), in the listing's own order. Its CallID holds the
	// escalation id.
	Cursor audit.Cursor
}

// Validate checks the filter's values. Text that Postgres could not take
// (invalid UTF-8, NUL) is refused here, naming the field.
func (f ListFilter) Validate() error {
	switch f.Status {
	case "", StatusPending, StatusApproved, StatusDenied, StatusExpired, StatusCancelled:
	default:
		return fmt.Errorf("%w: status %q is not pending, approved, denied, expired or cancelled", ErrInvalidFilter, f.Status)
	}
	if f.Limit < 0 {
		return fmt.Errorf("%w: limit %d is negative", ErrInvalidFilter, f.Limit)
	}
	if err := audit.CheckText(f.Session); err != nil {
		return fmt.Errorf("%w: session: %v", ErrInvalidFilter, err)
	}
	return nil
}

// Cursor returns the position of e in a listing.
func (e *Escalation) Cursor() audit.Cursor { return audit.Cursor{Time: e.CreatedAt, CallID: e.ID} }

// List returns escalations (see ListEach). It collects them: use ListEach
// where the result is streamed.
func (p *PG) List(ctx context.Context, f ListFilter) ([]Escalation, error) {
	var out []Escalation
	err := p.ListEach(ctx, f, func(e *Escalation) error {
		out = append(out, *e)
		return nil
	})
	return out, err
}

// ListEach calls fn with each escalation matching f, one row at a time as
// Postgres returns them (nothing is collected): pending ones oldest first,
// otherwise newest first. Each row's arguments are in the listing form (see
// ListArgsBytes), at most about ListArgsBytes; Get returns them whole. fn
// may return audit.ErrStop to end early; any other error ends the listing
// and is returned. The *Escalation is reused: copy what you keep.
func (p *PG) ListEach(ctx context.Context, f ListFilter, fn func(*Escalation) error) error {
	if err := f.Validate(); err != nil {
		return fmt.Errorf("listing escalations: %w", err)
	}
	limit := f.Limit
	if limit == 0 {
		limit = DefaultListLimit
	}
	limit = min(limit, MaxListLimit)
	order, after := "created_at DESC, id DESC", "<"
	if f.Status == StatusPending {
		order, after = "created_at ASC, id ASC", ">"
	}
	args := []any{ListArgsBytes, audit.DefaultMaxValueBytes, listFieldChars, f.Status, f.Session, limit}
	where := `($4 = '' OR status = $4) AND ($5 = '' OR session_id = $5)`
	if !f.Cursor.IsZero() {
		args = append(args, f.Cursor.Time, f.Cursor.CallID)
		where += ` AND (created_at, id) ` + after + ` ($7, $8)`
	}
	// $1: the longest arguments returned as they are; longer ones come back
	// as their length, SHA-256 and first $2 characters. $3 bounds free text.
	rows, err := p.pool.Query(ctx, `
SELECT id, call_id, session_id, kind, server, tool,
       CASE WHEN octet_length(args) <= $1 THEN args END, octet_length(args),
       CASE WHEN octet_length(args) > $1 THEN left(args, $2) END,
       CASE WHEN octet_length(args) > $1 THEN encode(sha256(convert_to(args, 'UTF8')), 'hex') END,
       left(rule, $3), left(reason, $3), left(resource, $3), status, created_at, expires_at,
       decided_at, left(decided_by, $3), left(decision_reason, $3), consumed_by_call_id, consumed_at,
       auto_verdict, auto_outcome, left(auto_model, $3), left(auto_reasoning, $3), auto_at, auto_tokens, auto_cost_usd
FROM escalations
WHERE `+where+`
ORDER BY `+order+` LIMIT $6`, args...)
	if err != nil {
		return fmt.Errorf("listing escalations: %w", err)
	}
	defer rows.Close()
	var (
		e               Escalation
		auto            autoScan
		small, head     *string
		sum, consumedBy *string
		size            int
	)
	for rows.Next() {
		e, auto = Escalation{}, autoScan{}
		dest := append([]any{&e.ID, &e.CallID, &e.SessionID, &e.Kind, &e.Server, &e.Tool, &small, &size, &head, &sum,
			&e.Rule, &e.Reason, &e.Resource, &e.Status, &e.CreatedAt, &e.ExpiresAt,
			&e.DecidedAt, &e.DecidedBy, &e.DecisionReason, &consumedBy, &e.ConsumedAt}, auto.dest()...)
		if err := rows.Scan(dest...); err != nil {
			return fmt.Errorf("listing escalations: reading a row: %w", err)
		}
		e.Auto = auto.review()
		e.Args = listArgs(small, size, head, sum)
		if consumedBy != nil {
			e.ConsumedByCallID = *consumedBy
		}
		if err := fn(&e); err != nil {
			if errors.Is(err, audit.ErrStop) {
				return nil
			}
			return err
		}
	}
	if err := rows.Err(); err != nil {
		return fmt.Errorf("listing escalations: %w", err)
	}
	return nil
}

// listArgs turns a row's arguments into their listing form: the stored form
// of audit (audit.StoredArgs, which leaves ordinary arguments byte for byte
// as Get shows them) when the row returned them (small), else a marker over
// the whole canonical text from the length, SHA-256 and head Postgres
// computed.
func listArgs(small *string, size int, head, sum *string) json.RawMessage {
	if small != nil {
		return audit.StoredArgs(json.RawMessage(*small), audit.Limits{})
	}
	t := audit.Truncation{Bytes: size}
	if sum != nil {
		t.SHA256 = *sum
	}
	if head != nil {
		t.Head = headOf(*head, audit.DefaultMaxValueBytes)
	}
	var buf bytes.Buffer
	enc := json.NewEncoder(&buf)
	enc.SetEscapeHTML(false)
	_ = enc.Encode(map[string]audit.Truncation{audit.KeyTruncated: t})
	return bytes.TrimRight(buf.Bytes(), "\n")
}

// headOf returns the longest prefix of s of at most n bytes that ends on a
// UTF-8 sequence boundary (Postgres's left() counts characters).
func headOf(s string, n int) string {
	if len(s) <= n {
		return s
	}
	cut := n
	for cut > 0 && !utf8.RuneStart(s[cut]) {
		cut--
	}
	return s[:cut]
}
