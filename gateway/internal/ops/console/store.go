package console

import (
	"context"
	"errors"
	"fmt"
	"time"

	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgxpool"

	"ironcurtain.dev/gateway/internal/audit"
	"ironcurtain.dev/gateway/internal/ops/opsapi"
)

// Store is what the console reads from the audit trail.
type Store interface {
	// ToolCalls streams tool calls (audit.QueryEach).
	ToolCalls(ctx context.Context, f audit.Filter, fn func(*audit.ToolCall) error) error
	// EgressOf returns the egress events the given tool calls caused, at
	// most limit, oldest first.
	EgressOf(ctx context.Context, callIDs []string, limit int) ([]EgressEvent, error)
	// Around returns a session's relay calls and the egress events no tool
	// call caused (proxy tunnels, git, GitHub) between from and to (zero:
	// unbounded), newest first, at most limit of each.
	Around(ctx context.Context, session string, from, to time.Time, limit int) ([]LLMCall, []EgressEvent, error)
	// Disagreements returns recent tool calls on which the shadow policy
	// decided otherwise, newest first.
	Disagreements(ctx context.Context, limit int) ([]Disagreement, error)
	// Verify runs the hash-chain check of one session.
	Verify(ctx context.Context, session string) (audit.SessionCheck, error)
	// Summaries lists session activity (opsapi.PGData.Sessions).
	Summaries(ctx context.Context, limit int) ([]opsapi.SessionSummary, error)
}

// EgressEvent is one egress_events row.
type EgressEvent struct {
	ID         string
	ToolCallID string
	At         time.Time
	Kind       string
	Method     string
	Host       string
	Port       int
	IP         string
	Decision   string
	Reason     string
	Rule       string
	BytesUp    int64
	BytesDown  int64
	Duration   time.Duration
	Error      string
}

// LLMCall is one llm_calls row.
type LLMCall struct {
	ID           string
	At           time.Time
	Provider     string
	Model        string
	Path         string
	Stream       bool
	StatusCode   int
	InputTokens  int64
	OutputTokens int64
	CostUSD      float64
	Duration     time.Duration
	Error        string
}

// Disagreement is a tool call the shadow policy decided otherwise.
type Disagreement = audit.Disagreement

// fieldChars bounds the free-text columns one row returns, in characters.
const fieldChars = 8 << 10

// PGStore implements Store on the gateway's pool.
type PGStore struct {
	Pool *pgxpool.Pool
}

var _ Store = PGStore{}

// ToolCalls implements Store.
func (s PGStore) ToolCalls(ctx context.Context, f audit.Filter, fn func(*audit.ToolCall) error) error {
	return audit.QueryEach(ctx, s.Pool, f, fn)
}

const egressColumns = `id, tool_call_id, at, left(kind, 64), left(method, 64), left(host, 1024), port, left(resolved_ip, 64),
       decision, left(reason, $1), left(rule, $1), bytes_up, bytes_down, duration_ns, left(error, $1)`

func scanEgress(rows pgx.Rows) ([]EgressEvent, error) {
	return pgx.CollectRows(rows, func(r pgx.CollectableRow) (EgressEvent, error) {
		var e EgressEvent
		var dur int64
		err := r.Scan(&e.ID, &e.ToolCallID, &e.At, &e.Kind, &e.Method, &e.Host, &e.Port, &e.IP,
			&e.Decision, &e.Reason, &e.Rule, &e.BytesUp, &e.BytesDown, &dur, &e.Error)
		e.Duration = time.Duration(dur)
		return e, err
	})
}

// EgressOf implements Store (egress_events_tool_call_idx).
func (s PGStore) EgressOf(ctx context.Context, callIDs []string, limit int) ([]EgressEvent, error) {
	if len(callIDs) == 0 {
		return nil, nil
	}
	rows, err := s.Pool.Query(ctx, `SELECT `+egressColumns+` FROM egress_events
WHERE tool_call_id = ANY($2) AND tool_call_id <> '' ORDER BY at, id LIMIT $3`, fieldChars, callIDs, limit)
	if err != nil {
		return nil, fmt.Errorf("reading egress events: %w", err)
	}
	out, err := scanEgress(rows)
	if err != nil {
		return nil, fmt.Errorf("reading egress events: %w", err)
	}
	return out, nil
}

// Around implements Store.
func (s PGStore) Around(ctx context.Context, session string, from, to time.Time, limit int) ([]LLMCall, []EgressEvent, error) {
	lo, hi := any(nil), any(nil)
	if !from.IsZero() {
		lo = from
	}
	if !to.IsZero() {
		hi = to
	}
	rows, err := s.Pool.Query(ctx, `SELECT id, at, left(provider, 64), left(model, 256), left(path, 1024), stream, status_code,
       input_tokens, output_tokens, cost_usd, duration_ns, left(error, $1)
FROM llm_calls WHERE session_id = $2 AND ($3::timestamptz IS NULL OR at >= $3) AND ($4::timestamptz IS NULL OR at <= $4)
ORDER BY at DESC, id DESC LIMIT $5`, fieldChars, session, lo, hi, limit)
	if err != nil {
		return nil, nil, fmt.Errorf("reading relay calls: %w", err)
	}
	llm, err := pgx.CollectRows(rows, func(r pgx.CollectableRow) (LLMCall, error) {
		var l LLMCall
		var dur int64
		err := r.Scan(&l.ID, &l.At, &l.Provider, &l.Model, &l.Path, &l.Stream, &l.StatusCode,
			&l.InputTokens, &l.OutputTokens, &l.CostUSD, &dur, &l.Error)
		l.Duration = time.Duration(dur)
		return l, err
	})
	if err != nil {
		return nil, nil, fmt.Errorf("reading relay calls: %w", err)
	}
	rows, err = s.Pool.Query(ctx, `SELECT `+egressColumns+` FROM egress_events
WHERE session_id = $2 AND tool_call_id = '' AND ($3::timestamptz IS NULL OR at >= $3) AND ($4::timestamptz IS NULL OR at <= $4)
ORDER BY at DESC, id DESC LIMIT $5`, fieldChars, session, lo, hi, limit)
	if err != nil {
		return nil, nil, fmt.Errorf("reading egress events: %w", err)
	}
	eg, err := scanEgress(rows)
	if err != nil {
		return nil, nil, fmt.Errorf("reading egress events: %w", err)
	}
	return llm, eg, nil
}

// Disagreements implements Store.
func (s PGStore) Disagreements(ctx context.Context, limit int) ([]Disagreement, error) {
	return audit.Disagreements(ctx, s.Pool, limit, fieldChars)
}

// Verify implements Store.
func (s PGStore) Verify(ctx context.Context, session string) (audit.SessionCheck, error) {
	checks, err := audit.Verify(ctx, s.Pool, session)
	if err != nil {
		return audit.SessionCheck{}, err
	}
	if len(checks) != 1 {
		return audit.SessionCheck{}, errors.New("verifying: no such session")
	}
	return checks[0], nil
}

// Summaries implements Store.
func (s PGStore) Summaries(ctx context.Context, limit int) ([]opsapi.SessionSummary, error) {
	return opsapi.PGData{Pool: s.Pool}.Sessions(ctx, limit)
}
