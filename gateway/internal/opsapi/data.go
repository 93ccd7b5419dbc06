package opsapi

import (
	"context"
	"errors"
	"fmt"
	"time"

	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgxpool"

	"ironcurtain.dev/gateway/internal/audit"
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
}

// PGData implements Data on the gateway's Postgres pool.
type PGData struct {
	Pool *pgxpool.Pool
}

var _ Data = PGData{}

// ToolCalls implements Data: rows are streamed from Postgres one by one.
func (d PGData) ToolCalls(ctx context.Context, f audit.Filter, fn func(*audit.ToolCall) error) error {
	return audit.QueryEach(ctx, d.Pool, f, fn)
}

const sessionColumns = `session_id, first_seen, last_seen, records, tool_calls, allowed, denied, escalated,
       pending_escalations, egress_requests, llm_tokens, llm_cost_usd`

func scanSession(r pgx.Row) (SessionSummary, error) {
	var s SessionSummary
	err := r.Scan(&s.SessionID, &s.FirstSeen, &s.LastSeen, &s.Records, &s.ToolCalls, &s.Allowed, &s.Denied, &s.Escalated,
		&s.PendingEscalations, &s.EgressRequests, &s.LLMTokens, &s.LLMCostUSD)
	return s, err
}

// Sessions implements Data: the most recently active sessions first.
func (d PGData) Sessions(ctx context.Context, limit int) ([]SessionSummary, error) {
	if limit <= 0 {
		limit = 100
	}
	limit = min(limit, 1000)
	rows, err := d.Pool.Query(ctx, `SELECT `+sessionColumns+` FROM session_summary ORDER BY last_seen DESC LIMIT $1`, limit)
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
	s, err := scanSession(d.Pool.QueryRow(ctx, `SELECT `+sessionColumns+` FROM session_summary WHERE session_id = $1`, id))
	if errors.Is(err, pgx.ErrNoRows) {
		return s, fmt.Errorf("reading session %q: %w", id, ErrNotFound)
	}
	if err != nil {
		return s, fmt.Errorf("reading session %q: %w", id, err)
	}
	return s, nil
}

// Ready implements Data: the database answers and the schema is current.
func (d PGData) Ready(ctx context.Context) error {
	if err := d.Pool.Ping(ctx); err != nil {
		return errors.New("database unreachable")
	}
	if err := store.CheckSchema(ctx, d.Pool); err != nil {
		return err
	}
	return nil
}
