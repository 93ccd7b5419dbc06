package store

import (
	"context"
	"errors"
	"fmt"
	"time"

	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgxpool"
)

// ConsoleSession is one operator's console sign-in.
type ConsoleSession struct {
	Operator string
	CSRF     string
	Created  time.Time
	LastSeen time.Time
}

// ConsoleSessions keeps the console's sign-ins in Postgres
// (console_sessions, migration 0010), so a session made on one replica
// works on every replica. Keys are the SHA-256 of the cookie's random id.
// It satisfies console.SignIns.
type ConsoleSessions struct {
	Pool *pgxpool.Pool
}

// Create stores s under digest. Expired sessions (idle or older than
// maxAge at s.Created) are swept first; when max sessions remain, the
// oldest are ended to make room.
func (c ConsoleSessions) Create(ctx context.Context, digest [32]byte, s ConsoleSession, idle, maxAge time.Duration, max int) error {
	err := pgx.BeginFunc(ctx, c.Pool, func(tx pgx.Tx) error {
		// One sign-in at a time (the cap is counted): a transaction lock.
		if _, err := tx.Exec(ctx, `SELECT pg_advisory_xact_lock(hashtext('console_sessions'))`); err != nil {
			return err
		}
		if _, err := tx.Exec(ctx, `DELETE FROM console_sessions WHERE last_seen < $1 OR created_at < $2`,
			s.Created.Add(-idle), s.Created.Add(-maxAge)); err != nil {
			return err
		}
		if _, err := tx.Exec(ctx, `DELETE FROM console_sessions WHERE id_digest IN (
			SELECT id_digest FROM console_sessions ORDER BY created_at DESC, id_digest OFFSET $1)`, max-1); err != nil {
			return err
		}
		_, err := tx.Exec(ctx, `INSERT INTO console_sessions (id_digest, operator, csrf, created_at, last_seen) VALUES ($1, $2, $3, $4, $5)`,
			digest[:], s.Operator, s.CSRF, s.Created, s.LastSeen)
		return err
	})
	if err != nil {
		return fmt.Errorf("storing a console session: %w", err)
	}
	return nil
}

// Use returns the live session of digest and marks it used at now. A
// session unused for idle or older than maxAge is ended (ok false).
func (c ConsoleSessions) Use(ctx context.Context, digest [32]byte, now time.Time, idle, maxAge time.Duration) (ConsoleSession, bool, error) {
	var s ConsoleSession
	err := c.Pool.QueryRow(ctx, `
UPDATE console_sessions SET last_seen = greatest(last_seen, $2)
 WHERE id_digest = $1 AND last_seen >= $3 AND created_at >= $4
RETURNING operator, csrf, created_at, last_seen`, digest[:], now, now.Add(-idle), now.Add(-maxAge)).
		Scan(&s.Operator, &s.CSRF, &s.Created, &s.LastSeen)
	if errors.Is(err, pgx.ErrNoRows) {
		if _, err := c.Pool.Exec(ctx, `DELETE FROM console_sessions WHERE id_digest = $1`, digest[:]); err != nil {
			return ConsoleSession{}, false, fmt.Errorf("ending a console session: %w", err)
		}
		return ConsoleSession{}, false, nil
	}
	if err != nil {
		return ConsoleSession{}, false, fmt.Errorf("reading a console session: %w", err)
	}
	return s, true, nil
}

// Delete ends the session of digest (sign-out).
func (c ConsoleSessions) Delete(ctx context.Context, digest [32]byte) error {
	if _, err := c.Pool.Exec(ctx, `DELETE FROM console_sessions WHERE id_digest = $1`, digest[:]); err != nil {
		return fmt.Errorf("ending a console session: %w", err)
	}
	return nil
}
