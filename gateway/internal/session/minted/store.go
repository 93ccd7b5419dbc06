package minted

import (
	"context"
	"crypto/subtle"
	"encoding/json"
	"errors"
	"fmt"
	"log/slog"
	"time"

	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgxpool"

	"ironcurtain.dev/gateway/internal/audit"
	"ironcurtain.dev/gateway/internal/escalation"
	"ironcurtain.dev/gateway/internal/session"
)

// AuthTimeout bounds the database read of one authentication.
const AuthTimeout = 3 * time.Second

// Store keeps minted sessions in Postgres.
type Store struct {
	pool *pgxpool.Pool
	now  func() time.Time
	ws   Workspaces   // nil: minted sessions share the configured sandbox (workspaces.go)
	log  *slog.Logger // failures releasing workspaces
}

var (
	_ session.Authenticator   = (*Store)(nil)
	_ session.ToolCallCharger = (*Store)(nil)
)

// NewStore returns a Store on pool.
func NewStore(pool *pgxpool.Pool) *Store { return &Store{pool: pool, now: time.Now} }

// Columns selects a minted session (the status as of the database's clock).
const Columns = `id, name,
       CASE WHEN revoked_at IS NOT NULL THEN 'revoked' WHEN expires_at <= now() THEN 'expired' ELSE 'active' END,
       created_at, created_by, expires_at, revoked_at, revoked_by, revoke_reason,
       max_tokens, max_cost_usd, max_tool_calls, tool_calls_used, labels`

// Scan reads the columns of Columns (prefixed or not) into s, followed by extra.
func Scan(row pgx.Row, s *Session, extra ...any) error {
	var labels []byte
	dest := append([]any{&s.ID, &s.Name, &s.Status, &s.CreatedAt, &s.CreatedBy, &s.ExpiresAt, &s.RevokedAt, &s.RevokedBy, &s.RevokeReason,
		&s.Budget.MaxTokens, &s.Budget.MaxCostUSD, &s.Budget.MaxToolCalls, &s.ToolCallsUsed, &labels}, extra...)
	if err := row.Scan(dest...); err != nil {
		return err
	}
	s.Labels = map[string]string{}
	if len(labels) > 0 {
		if err := json.Unmarshal(labels, &s.Labels); err != nil {
			return fmt.Errorf("reading labels of session %s: %w", s.ID, err)
		}
	}
	return nil
}

// Mint creates a session from spec for operator by and returns it with its
// token. The token exists only in the return value: show it once.
func (st *Store) Mint(ctx context.Context, spec Spec, by string) (Session, Token, error) {
	now := st.now()
	if err := spec.Validate(now); err != nil {
		return Session{}, "", err
	}
	if by == "" {
		return Session{}, "", fmt.Errorf("%w: created_by: required", ErrInvalid)
	}
	id, tok, err := newCredentials()
	if err != nil {
		return Session{}, "", fmt.Errorf("minting a session: %w", err)
	}
	labels := spec.Labels
	if labels == nil {
		labels = map[string]string{}
	}
	lj, err := json.Marshal(labels)
	if err != nil {
		return Session{}, "", fmt.Errorf("minting a session: labels: %w", err)
	}
	undo, ws, err := st.createWorkspace(id)
	if err != nil {
		return Session{}, "", fmt.Errorf("minting a session: %w", err)
	}
	d := Digest(string(tok))
	var s Session
	err = pgx.BeginFunc(ctx, st.pool, func(tx pgx.Tx) error {
		if err := Scan(tx.QueryRow(ctx, `
INSERT INTO agent_sessions (id, name, token_digest, created_by, expires_at, max_tokens, max_cost_usd, max_tool_calls, labels)
VALUES ($1, $2, $3, $4, $5, $6, $7, $8, $9)
RETURNING `+Columns,
			id, spec.Name, d[:], by, spec.Expiry(now), spec.Budget.MaxTokens, spec.Budget.MaxCostUSD, spec.Budget.MaxToolCalls, lj), &s); err != nil {
			return err
		}
		// The audit trail's chain head: the session is listed (with no
		// activity yet) from the moment it exists.
		_, err := tx.Exec(ctx, `INSERT INTO sessions (id) VALUES ($1) ON CONFLICT (id) DO NOTHING`, id)
		return err
	})
	if err != nil {
		undo()
		return Session{}, "", fmt.Errorf("minting a session: %w", err)
	}
	s.Workspace = ws
	return s, tok, nil
}

// Get returns one minted session.
func (st *Store) Get(ctx context.Context, id string) (Session, error) {
	if !ValidID(id) {
		return Session{}, fmt.Errorf("reading session: %w", ErrNotFound)
	}
	var s Session
	err := Scan(st.pool.QueryRow(ctx, `SELECT `+Columns+` FROM agent_sessions WHERE id = $1`, id), &s)
	if errors.Is(err, pgx.ErrNoRows) {
		return Session{}, fmt.Errorf("reading session %s: %w", id, ErrNotFound)
	}
	if err != nil {
		return Session{}, fmt.Errorf("reading session %s: %w", id, err)
	}
	if st.ws != nil {
		s.Workspace, _ = st.ws.Path(id) // id is valid (checked above)
	}
	return s, nil
}

// Revoke ends a session for operator by: from its commit on, the token is
// refused on every door of every replica, and in the same transaction every
// pending escalation of the session is cancelled (recorded with by and the
// reason; the waiting calls are woken and refused). Revoking a revoked
// session again keeps the first revocation and cancels whatever is still
// pending. It returns the session and the cancelled escalations' ids.
func (st *Store) Revoke(ctx context.Context, id, by, reason string) (Session, []string, error) {
	if err := ValidateReason(reason); err != nil {
		return Session{}, nil, err
	}
	if by == "" {
		return Session{}, nil, fmt.Errorf("%w: revoked_by: required", ErrInvalid)
	}
	if !ValidID(id) {
		return Session{}, nil, fmt.Errorf("revoking session: %w", ErrNotFound)
	}
	var (
		s         Session
		cancelled []string
	)
	err := pgx.BeginFunc(ctx, st.pool, func(tx pgx.Tx) error {
		// The row lock orders this with the escalation trigger's FOR SHARE.
		err := Scan(tx.QueryRow(ctx, `
UPDATE agent_sessions
SET revoked_at = coalesce(revoked_at, now()),
    revoked_by = CASE WHEN revoked_at IS NULL THEN $2 ELSE revoked_by END,
    revoke_reason = CASE WHEN revoked_at IS NULL THEN $3 ELSE revoke_reason END
WHERE id = $1
RETURNING `+Columns, id, audit.RedactString(by), audit.RedactString(reason)), &s)
		if errors.Is(err, pgx.ErrNoRows) {
			return ErrNotFound
		}
		if err != nil {
			return err
		}
		why := "the session was revoked"
		if reason != "" {
			why += ": " + reason
		}
		cancelled, err = escalation.CancelSession(ctx, tx, id, by, why)
		return err
	})
	if err != nil {
		return Session{}, nil, fmt.Errorf("revoking session %s: %w", id, err)
	}
	st.releaseWorkspace(id)
	return s, cancelled, nil
}

// Authenticate implements session.Authenticator: the token's digest is
// looked up by the unique index and compared again in constant time; a
// revoked or expired session is refused (ErrRevoked, ErrExpired, both
// session.ErrUnknownToken). Tokens that do not have the minted form are
// refused without a database round trip. A database failure is returned as
// is: the request is refused.
func (st *Store) Authenticate(ctx context.Context, token string) (session.Session, error) {
	if !plausible(token) {
		return session.Session{}, session.ErrUnknownToken
	}
	d := Digest(token)
	ctx, cancel := context.WithTimeout(ctx, AuthTimeout)
	defer cancel()
	var (
		id, name        string
		stored          []byte
		revoked, expird bool
		b               Budget
	)
	err := st.pool.QueryRow(ctx, `
SELECT id, name, token_digest, revoked_at IS NOT NULL, expires_at <= now(), max_tokens, max_cost_usd, max_tool_calls
FROM agent_sessions WHERE token_digest = $1`, d[:]).Scan(&id, &name, &stored, &revoked, &expird, &b.MaxTokens, &b.MaxCostUSD, &b.MaxToolCalls)
	if errors.Is(err, pgx.ErrNoRows) {
		return session.Session{}, session.ErrUnknownToken
	}
	if err != nil {
		return session.Session{}, fmt.Errorf("authenticating a minted session: %w", err)
	}
	if subtle.ConstantTimeCompare(stored, d[:]) != 1 {
		return session.Session{}, session.ErrUnknownToken
	}
	switch {
	case revoked:
		return session.Session{}, ErrRevoked
	case expird:
		return session.Session{}, ErrExpired
	}
	out := session.Session{ID: id, Name: name, Budget: b.session()}
	if st.ws != nil {
		if out.Workspace, err = st.ws.Path(id); err != nil {
			return session.Session{}, fmt.Errorf("authenticating a minted session: %w", err)
		}
	}
	return out, nil
}

// ChargeToolCall counts one tool call against the session's tool-call
// budget, atomically across replicas. It returns ErrBudgetSpent (with what
// was used) when the budget is used up; any other error refuses the call
// too. A session without a tool-call budget is not charged.
func (st *Store) ChargeToolCall(ctx context.Context, sessionID string) (used, limit int64, err error) {
	err = st.pool.QueryRow(ctx, `
UPDATE agent_sessions SET tool_calls_used = tool_calls_used + 1
WHERE id = $1 AND max_tool_calls > 0 AND tool_calls_used < max_tool_calls
RETURNING tool_calls_used, max_tool_calls`, sessionID).Scan(&used, &limit)
	if err == nil {
		return used, limit, nil
	}
	if !errors.Is(err, pgx.ErrNoRows) {
		return 0, 0, fmt.Errorf("charging a tool call to session %s: %w", sessionID, err)
	}
	err = st.pool.QueryRow(ctx, `SELECT tool_calls_used, max_tool_calls FROM agent_sessions WHERE id = $1`, sessionID).Scan(&used, &limit)
	switch {
	case errors.Is(err, pgx.ErrNoRows):
		return 0, 0, fmt.Errorf("charging a tool call to session %s: %w", sessionID, ErrNotFound)
	case err != nil:
		return 0, 0, fmt.Errorf("charging a tool call to session %s: %w", sessionID, err)
	case limit == 0:
		return used, 0, nil
	}
	return used, limit, fmt.Errorf("session %s used %d of %d tool calls: %w", sessionID, used, limit, ErrBudgetSpent)
}

// JSONColumn is an SQL expression of a minted session as a JSON object (the
// form of Session), NULL when alias (an agent_sessions row of a LEFT JOIN)
// is NULL. The token digest is never part of it.
func JSONColumn(alias string) string {
	a := alias + "."
	return `CASE WHEN ` + a + `id IS NULL THEN NULL ELSE jsonb_build_object(
  'id', ` + a + `id, 'name', ` + a + `name,
  'status', CASE WHEN ` + a + `revoked_at IS NOT NULL THEN 'revoked' WHEN ` + a + `expires_at <= now() THEN 'expired' ELSE 'active' END,
  'created_at', ` + a + `created_at, 'created_by', ` + a + `created_by, 'expires_at', ` + a + `expires_at,
  'revoked_at', ` + a + `revoked_at, 'revoked_by', ` + a + `revoked_by, 'revoke_reason', ` + a + `revoke_reason,
  'budget', jsonb_build_object('max_tokens', ` + a + `max_tokens, 'max_cost_usd', ` + a + `max_cost_usd, 'max_tool_calls', ` + a + `max_tool_calls),
  'tool_calls_used', ` + a + `tool_calls_used, 'labels', ` + a + `labels) END`
}
