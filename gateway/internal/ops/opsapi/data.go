package opsapi

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"time"

	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgxpool"

	"ironcurtain.dev/gateway/internal/audit"
	"ironcurtain.dev/gateway/internal/session/minted"
	"ironcurtain.dev/gateway/internal/store"
)

// SessionSummary is one row of the session_summary view.
type SessionSummary struct {
	SessionID          string    `json:"session_id"`
	FirstSeen          time.Time `json:"first_seen"`
	LastSeen           time.Time `json:"last_seen"`
	Records            int64     `json:"records"`
	ToolCalls          int64     `json:"tool_calls"`
	Allowed            int64     `json:"allowed"`
	Denied             int64     `json:"denied"`
	Escalated          int64     `json:"escalated"`
	PendingEscalations int64     `json:"pending_escalations"`
	EgressRequests     int64     `json:"egress_requests"`
	LLMTokens          int64     `json:"llm_tokens"`
	LLMCostUSD         float64   `json:"llm_cost_usd"`
	// Status is "static" (a token file's session) or a minted session's
	// status: "active", "expired" or "revoked".
	Status string `json:"status"`
	// Minted is the minted session (nil for a static session).
	Minted *minted.Session `json:"minted,omitempty"`
}

// StatusStatic is the Status of a session from a token file.
const StatusStatic = "static"

// PGData implements Data on the gateway's Postgres pool.
type PGData struct {
	Pool *pgxpool.Pool
}

var _ Data = PGData{}

// ToolCalls implements Data: rows are streamed from Postgres one by one.
func (d PGData) ToolCalls(ctx context.Context, f audit.Filter, fn func(*audit.ToolCall) error) error {
	return audit.QueryEach(ctx, d.Pool, f, fn)
}

var sessionColumns = `ss.session_id, ss.first_seen, ss.last_seen, ss.records, ss.tool_calls, ss.allowed, ss.denied, ss.escalated,
       ss.pending_escalations, ss.egress_requests, ss.llm_tokens, ss.llm_cost_usd, ` + minted.JSONColumn("a")

// sessionFrom is the session summary with the minted session, if any.
const sessionFrom = ` FROM session_summary ss LEFT JOIN agent_sessions a ON a.id = ss.session_id`

func scanSession(r pgx.Row) (SessionSummary, error) {
	var s SessionSummary
	var m []byte
	err := r.Scan(&s.SessionID, &s.FirstSeen, &s.LastSeen, &s.Records, &s.ToolCalls, &s.Allowed, &s.Denied, &s.Escalated,
		&s.PendingEscalations, &s.EgressRequests, &s.LLMTokens, &s.LLMCostUSD, &m)
	if err != nil {
		return s, err
	}
	s.Status = StatusStatic
	if m != nil {
		s.Minted = &minted.Session{}
		if err := json.Unmarshal(m, s.Minted); err != nil {
			return s, fmt.Errorf("reading minted session %s: %w", s.SessionID, err)
		}
		s.Status = s.Minted.Status
	}
	return s, nil
}

// Sessions implements Data: the most recently active sessions first.
func (d PGData) Sessions(ctx context.Context, limit int) ([]SessionSummary, error) {
	if limit <= 0 {
		limit = 100
	}
	limit = min(limit, 1000)
	rows, err := d.Pool.Query(ctx, `SELECT `+sessionColumns+sessionFrom+` ORDER BY ss.last_seen DESC LIMIT $1`, limit)
	if err != nil {
		return nil, fmt.Errorf("listing sessions: %w", err)
	}
	out, err := pgx.CollectRows(rows, func(r pgx.CollectableRow) (SessionSummary, error) { return scanSession(r) })
	if err != nil {
		return nil, fmt.Errorf("listing sessions: %w", err)
	}
	return out, nil
}

// Session implements Data.
func (d PGData) Session(ctx context.Context, id string) (SessionSummary, error) {
	s, err := scanSession(d.Pool.QueryRow(ctx, `SELECT `+sessionColumns+sessionFrom+` WHERE ss.session_id = $1`, id))
	if errors.Is(err, pgx.ErrNoRows) {
		return s, fmt.Errorf("reading session %q: %w", id, ErrNotFound)
	}
	if err != nil {
		return s, fmt.Errorf("reading session %q: %w", id, err)
	}
	return s, nil
}

// Ready implements Data: the database answers, the schema is current and
// it takes a write now (store.WriteProbe: a read-only database, a full disk
// make it fail with the condition named).
func (d PGData) Ready(ctx context.Context) error {
	if err := d.Pool.Ping(ctx); err != nil {
		return &store.WriteError{Condition: store.Unreachable, Err: err}
	}
	if err := store.CheckSchema(ctx, d.Pool); err != nil {
		return err
	}
	return store.WriteProbe(ctx, d.Pool)
}
