package store

import (
	"context"
	"errors"
	"fmt"
	"time"

	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgtype"
	"github.com/jackc/pgx/v5/pgxpool"

	"ironcurtain.dev/gateway/internal/loopguard"
)

// LoopBreaker keeps the loop breaker's per-session state in Postgres
// (loop_breaker_sessions and loop_breaker_digests, migration 0010), so a
// session's calls on every replica count together and a pause or cooldown
// holds on every replica. It reads a paused session's escalation with its
// state (loopguard.State.Pause), so a pause ends from its escalation's
// decision on whichever replica sees the session next. It satisfies
// loopguard.Store and loopguard.Sweeper.
type LoopBreaker struct {
	Pool *pgxpool.Pool
}

var (
	_ loopguard.Store          = LoopBreaker{}
	_ loopguard.Sweeper        = LoopBreaker{}
	_ loopguard.OutcomeCounter = LoopBreaker{}
)

// CountOutcome implements loopguard.OutcomeCounter: After's count in one
// statement (a running session only; the row lock orders it with Update).
func (l LoopBreaker) CountOutcome(ctx context.Context, session string, o loopguard.Outcome, now time.Time) error {
	var err error
	switch o {
	case loopguard.Ran:
		_, err = l.Pool.Exec(ctx, `UPDATE loop_breaker_sessions SET denials = 0 WHERE session_id = $1 AND state = 'running' AND denials <> 0`, session)
	case loopguard.Denied:
		_, err = l.Pool.Exec(ctx, `
UPDATE loop_breaker_sessions SET first_denial = CASE WHEN denials = 0 THEN $2 ELSE first_denial END,
       last_denial = $2, denials = denials + 1
 WHERE session_id = $1 AND state = 'running'`, session, now)
	}
	if err != nil {
		return fmt.Errorf("loop breaker: counting an outcome of session %s: %w", session, err)
	}
	return nil
}

// loadLoopState locks (creating) the session's row and reads it with the
// pause's escalation and the digest's counter, in one statement.
const loadLoopState = `
WITH s AS (
    INSERT INTO loop_breaker_sessions AS t (session_id, last_seen) VALUES ($1, $2)
    ON CONFLICT (session_id) DO UPDATE SET last_seen = greatest(t.last_seen, $2)
    RETURNING *
)
SELECT s.state, s.limit_name, s.reason, s.escalation_id, s.paused_at, s.until, s.minute,
       s.calls_cur, s.calls_prev, s.denials, s.first_denial, s.last_denial, s.generation,
       e.id IS NOT NULL, coalesce(e.status, ''), e.decided_at
  FROM s
  LEFT JOIN escalations e ON s.state = 'paused' AND s.escalation_id <> '' AND e.id = s.escalation_id`

// loadLoopCounter reads the digest's counter. It is a statement of its
// own, after the row lock: its snapshot then sees what the previous holder
// of the lock committed (in the locking statement it would not).
const loadLoopCounter = `SELECT generation, first_at, n FROM loop_breaker_digests WHERE session_id = $1 AND digest = $2`

const saveLoopState = `
UPDATE loop_breaker_sessions SET state = $2, limit_name = $3, reason = $4, escalation_id = $5, paused_at = $6,
       until = $7, minute = $8, calls_cur = $9, calls_prev = $10, denials = $11, first_denial = $12,
       last_denial = $13, generation = $14
 WHERE session_id = $1`

func tsOrNil(t time.Time) any {
	if t.IsZero() {
		return nil
	}
	return t
}

func fromTS(t pgtype.Timestamptz) time.Time {
	if !t.Valid {
		return time.Time{}
	}
	return t.Time
}

// Update implements loopguard.Store: one transaction holding the session's
// row lock (every replica's Update of the session waits for it).
func (l LoopBreaker) Update(ctx context.Context, session string, now time.Time, digest *[32]byte, fn func(*loopguard.State, *loopguard.Counter)) error {
	if now.IsZero() {
		now = time.Now()
	}
	var dg []byte
	if digest != nil {
		dg = digest[:]
	}
	err := pgx.BeginFunc(ctx, l.Pool, func(tx pgx.Tx) error {
		var (
			st                                              loopguard.State
			pausedAt, until, minute, firstDen, lastDen, dec pgtype.Timestamptz
			dgen                                            pgtype.Int8
			dfirst                                          pgtype.Timestamptz
			dn                                              int
		)
		// One round trip: the batch's statements run one after the other,
		// so the counter's read starts after the row lock is held.
		load := &pgx.Batch{}
		load.Queue(loadLoopState, session, now).QueryRow(func(r pgx.Row) error {
			return r.Scan(&st.Status, &st.Limit, &st.Reason, &st.EscalationID, &pausedAt, &until, &minute,
				&st.Cur, &st.Prev, &st.Denials, &firstDen, &lastDen, &st.Generation,
				&st.Pause.Found, &st.Pause.Status, &dec)
		})
		if digest != nil {
			load.Queue(loadLoopCounter, session, dg).QueryRow(func(r pgx.Row) error {
				if err := r.Scan(&dgen, &dfirst, &dn); err != nil && !errors.Is(err, pgx.ErrNoRows) {
					return err
				}
				return nil
			})
		}
		if err := tx.SendBatch(ctx, load).Close(); err != nil {
			return fmt.Errorf("reading: %w", err)
		}
		st.PausedAt, st.Until, st.Minute = fromTS(pausedAt), fromTS(until), fromTS(minute)
		st.FirstDenial, st.LastDenial, st.Pause.DecidedAt = fromTS(firstDen), fromTS(lastDen), fromTS(dec)
		st.Pause.Known = true
		var c loopguard.Counter
		if dgen.Valid && dgen.Int64 == st.Generation {
			c = loopguard.Counter{First: fromTS(dfirst), N: dn}
		}
		gen := st.Generation
		fn(&st, &c)
		if st.Status == "" {
			st.Status = loopguard.StatusRunning
		}
		b := &pgx.Batch{}
		b.Queue(saveLoopState, session, st.Status, st.Limit, st.Reason, st.EscalationID, tsOrNil(st.PausedAt),
			tsOrNil(st.Until), tsOrNil(st.Minute), st.Cur, st.Prev, st.Denials, tsOrNil(st.FirstDenial),
			tsOrNil(st.LastDenial), st.Generation)
		if st.Generation != gen {
			b.Queue(`DELETE FROM loop_breaker_digests WHERE session_id = $1`, session)
		}
		if digest != nil && c.N > 0 {
			b.Queue(`INSERT INTO loop_breaker_digests (session_id, digest, generation, first_at, n) VALUES ($1, $2, $3, $4, $5)
ON CONFLICT (session_id, digest) DO UPDATE SET generation = $3, first_at = $4, n = $5`, session, dg, st.Generation, c.First, c.N)
		}
		if err := tx.SendBatch(ctx, b).Close(); err != nil {
			return fmt.Errorf("saving: %w", err)
		}
		return nil
	})
	if err != nil {
		return fmt.Errorf("loop breaker state of session %s: %w", session, err)
	}
	return nil
}

// Sweep implements loopguard.Sweeper: it forgets identical-call counters
// outside the window or of an older generation, sessions running or cooled
// down (cooldown over) unseen for an hour, and paused sessions unseen for a
// day whose escalation is no longer pending (a pending one still decides
// its session).
func (l LoopBreaker) Sweep(ctx context.Context, now time.Time, identicalWindow time.Duration) error {
	_, err := l.Pool.Exec(ctx, `
DELETE FROM loop_breaker_digests d USING loop_breaker_sessions s
 WHERE d.session_id = s.session_id AND (d.first_at < $1 OR d.generation <> s.generation)`, now.Add(-identicalWindow))
	if err == nil {
		_, err = l.Pool.Exec(ctx, `
DELETE FROM loop_breaker_sessions s
 WHERE (s.last_seen < $1 AND (s.state = 'running' OR (s.state = 'cooling' AND s.until < $2)))
    OR (s.state = 'paused' AND s.last_seen < $3 AND NOT EXISTS (
        SELECT 1 FROM escalations e WHERE e.id = s.escalation_id AND e.status = 'pending'))`, now.Add(-time.Hour), now, now.Add(-24*time.Hour))
	}
	if err != nil && !errors.Is(err, context.Canceled) {
		return fmt.Errorf("sweeping the loop breaker's state: %w", err)
	}
	return err
}
