package escalation

import (
	"context"
	"errors"
	"fmt"
	"math/rand/v2"
	"time"

	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgconn"

	"ironcurtain.dev/gateway/internal/store"
)

// Back-off of a waiter whose reads fail (the database is unreachable): the
// first retry follows after about retryBase, each later one after twice as
// long, at most retryMax, with jitter so that many waiters do not retry in
// step. The listener reconnects with the same shape, up to listenMax.
const (
	retryBase = 50 * time.Millisecond
	retryMax  = 2 * time.Second
	listenMax = 5 * time.Second
	// attemptTimeout bounds one read while retrying: a paused or
	// partitioned database does not answer, it does not refuse.
	attemptTimeout = 5 * time.Second
	// consumeBudget bounds the retries of recording that an approval is
	// used, when the approval was already decided before the call waited.
	consumeBudget = 30 * time.Second
)

// ErrDatabaseUnavailable: the database could not be reached until the
// escalation's deadline, so no decision could be read. The call is refused;
// the escalation row stays as it was (pending rows expire on schedule).
var ErrDatabaseUnavailable = errors.New("the database was unreachable until the escalation's deadline")

// backoff yields jittered, exponentially growing delays.
type backoff struct {
	base, max, next time.Duration
}

func newBackoff(base, max time.Duration) *backoff { return &backoff{base: base, max: max, next: base} }

// delay returns the next delay, uniformly drawn from [d/2, d] where d
// doubles from base up to max ("equal jitter": never zero, never in step).
func (b *backoff) delay() time.Duration {
	d := b.next
	b.next = min(b.next*2, b.max)
	half := d / 2
	return half + rand.N(half+1)
}

// reset starts again from base (after a success).
func (b *backoff) reset() { b.next = b.base }

// transient reports whether err may go away when the operation is retried:
// network and connection failures, timeouts of one attempt, and the server
// errors of a restart or overload (SQLSTATE classes 08, 57, 53, and
// serialization failures). No rows, a missing escalation and any other
// server error are final.
func transient(err error) bool {
	if err == nil || errors.Is(err, pgx.ErrNoRows) || errors.Is(err, ErrNotFound) ||
		errors.Is(err, context.Canceled) && !errors.Is(err, context.DeadlineExceeded) {
		return false
	}
	var pgErr *pgconn.PgError
	if errors.As(err, &pgErr) {
		switch {
		case len(pgErr.Code) < 2:
			return false
		case pgErr.Code[:2] == "08", pgErr.Code[:2] == "57", pgErr.Code[:2] == "53":
			return true
		case pgErr.Code == "40001", pgErr.Code == "40P01":
			return true
		}
		return false
	}
	return true // connect errors, broken connections, EOF, attempt timeouts
}

// retryUntil runs op until it succeeds, fails for a reason that is not
// transient, ctx ends, the gateway closes or deadline passes. Each attempt
// gets at most attemptTimeout. wake, when not nil, cuts a back-off short
// (the listener reconnected: the database is probably back). The outage
// is logged twice at most (when it starts, and when it ends or the deadline
// passes), never once per retry.
func (p *PG) retryUntil(ctx context.Context, deadline time.Time, wake <-chan struct{}, what string, op func(context.Context) error) error {
	var (
		b       *backoff
		started time.Time
		tries   int
	)
	for {
		// An attempt may run a second past the deadline (never less than a
		// second in all), so that a read just at the deadline can finish.
		now := time.Now()
		actx, cancel := context.WithDeadline(ctx, minTime(now.Add(attemptTimeout), maxTime(deadline, now).Add(time.Second)))
		err := op(actx)
		cancel()
		if err == nil || ctx.Err() != nil || !transient(err) {
			if !started.IsZero() {
				if err == nil {
					p.log.Info("escalation: database reachable again", "what", what, "after", time.Since(started).Round(time.Millisecond), "retries", tries)
				}
			}
			if err != nil && ctx.Err() != nil {
				return ctx.Err()
			}
			return err
		}
		tries++
		p.m.readRetries.Inc()
		if started.IsZero() {
			started = time.Now()
			b = newBackoff(retryBase, retryMax)
			p.log.Warn("escalation: "+dbCondition(err)+"; retrying until the deadline", "what", what, "deadline_in", time.Until(deadline).Round(time.Millisecond), "err", err)
		}
		left := time.Until(deadline)
		if left <= 0 {
			p.m.gaveUp.Inc()
			p.log.Warn("escalation: "+dbCondition(err)+" still, at the deadline; refusing", "what", what, "outage", time.Since(started).Round(time.Millisecond), "retries", tries, "err", err)
			return fmt.Errorf("%w (for %s, %d retries): %w", ErrDatabaseUnavailable, time.Since(started).Round(time.Millisecond), tries, err)
		}
		t := time.NewTimer(min(b.delay(), left))
		select {
		case <-t.C:
		case <-wake:
			t.Stop()
		case <-ctx.Done():
			t.Stop()
			return ctx.Err()
		case <-p.closing:
			t.Stop()
			return ErrShuttingDown
		}
	}
}

// dbCondition names what is wrong with the database for the log: "database
// disk full (SQLSTATE 53100)" rather than "unreachable" when it answered.
func dbCondition(err error) string {
	if we := store.Classify(err); we != nil {
		return we.Error()
	}
	return "database unreachable"
}

func maxTime(a, b time.Time) time.Time {
	if a.After(b) {
		return a
	}
	return b
}

func minTime(a, b time.Time) time.Time {
	if a.Before(b) {
		return a
	}
	return b
}
