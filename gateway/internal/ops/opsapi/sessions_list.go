package opsapi

import (
	"context"
	"errors"
	"fmt"
	"net/http"

	"ironcurtain.dev/gateway/internal/audit"
)

// Bounds of a session listing.
const (
	DefaultSessionLimit = 100
	MaxSessionLimit     = 1000
)

// SessionFilter selects sessions for a listing: Status "" (or "all") is
// every session, else static, active, expired or revoked. Cursor continues
// after the last row of a previous page (a "next" token).
type SessionFilter struct {
	Status string
	Limit  int
	Cursor audit.Cursor
}

// ErrInvalidSessionFilter is returned for a status no session has.
var ErrInvalidSessionFilter = errors.New("invalid session filter")

// Validate checks the filter.
func (f SessionFilter) Validate() error {
	switch f.Status {
	case "", "all", StatusStatic, "active", "expired", "revoked":
		return nil
	}
	return fmt.Errorf("%w: status: want static, active, expired, revoked or all", ErrInvalidSessionFilter)
}

// SessionLister streams a session listing row by row (PGData implements
// it). Without it the API lists one bounded page from Data.Sessions.
type SessionLister interface {
	SessionsEach(ctx context.Context, f SessionFilter, fn func(*SessionSummary) error) error
}

// SessionPage is the body of GET /v1/sessions, with Next and Error as in
// ToolCallPage.
type SessionPage struct {
	Sessions []SessionSummary `json:"sessions"`
	Next     string           `json:"next,omitempty"`
	Error    *ErrorDetail     `json:"error,omitempty"`
}

// cursor is the row's position in a listing: most recent activity first,
// then by id.
func (s *SessionSummary) cursor() audit.Cursor {
	return audit.Cursor{Time: s.LastSeen, CallID: s.SessionID}
}

// sessionStatus is the SQL of SessionSummary.Status.
const sessionStatus = `CASE WHEN a.id IS NULL THEN 'static' WHEN a.revoked_at IS NOT NULL THEN 'revoked'
  WHEN a.expires_at <= now() THEN 'expired' ELSE 'active' END`

// SessionsEach implements SessionLister: rows are read from Postgres and
// handed to fn one at a time (fn may return audit.ErrStop).
func (d PGData) SessionsEach(ctx context.Context, f SessionFilter, fn func(*SessionSummary) error) error {
	if err := f.Validate(); err != nil {
		return err
	}
	limit := f.Limit
	if limit <= 0 {
		limit = DefaultSessionLimit
	}
	limit = min(limit, MaxSessionLimit)
	status := f.Status
	if status == "all" {
		status = ""
	}
	var after any
	if !f.Cursor.IsZero() {
		after = f.Cursor.Time
	}
	rows, err := d.Pool.Query(ctx, `SELECT `+sessionColumns+sessionFrom+`
WHERE ($1 = '' OR `+sessionStatus+` = $1)
  AND ($2::timestamptz IS NULL OR (ss.last_seen, ss.session_id) < ($2::timestamptz, $3))
ORDER BY ss.last_seen DESC, ss.session_id DESC
LIMIT $4`, status, after, f.Cursor.CallID, limit)
	if err != nil {
		return fmt.Errorf("listing sessions: %w", err)
	}
	defer rows.Close()
	for rows.Next() {
		s, err := scanSession(rows)
		if err != nil {
			return fmt.Errorf("listing sessions: %w", err)
		}
		if err := fn(&s); err != nil {
			if errors.Is(err, audit.ErrStop) {
				return nil
			}
			return err
		}
	}
	if err := rows.Err(); err != nil {
		return fmt.Errorf("listing sessions: %w", err)
	}
	return nil
}

var _ SessionLister = PGData{}

// streamSessions writes a SessionPage row by row, bounded by
// MaxResponseBytes like the other listings.
func (a *api) streamSessions(w http.ResponseWriter, r *http.Request, lister SessionLister, f SessionFilter) {
	limit := f.Limit
	if limit <= 0 {
		limit = DefaultSessionLimit
	}
	limit = min(limit, MaxSessionLimit)
	p := newPageWriter(w, "sessions")
	err := lister.SessionsEach(r.Context(), f, func(s *SessionSummary) error {
		return p.add(s, s.cursor())
	})
	a.finishPage(p, err, limit, "session listing")
}
