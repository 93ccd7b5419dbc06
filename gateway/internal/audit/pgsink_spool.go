package audit

import (
	"context"
	"fmt"
	"sort"
	"sync"
	"time"

	"github.com/jackc/pgx/v5"
)

// With a Spool (Options.Spool), a tool call's records go through two
// steps that keep every outcome and never hold a finished call hostage:
//
//   - the decision (write-ahead) reserves room in the spool first: when
//     there is none, the call is refused (ErrSpoolFull) before anything is
//     written, so the outcome of a call that runs can always be kept. The
//     way the decision write ended is remembered by call id: committed,
//     certainly not written, or unconfirmed (the connection died or the
//     wait ended after the commit could have reached the server);
//   - the outcome is written if that takes at most Options.OutcomeWait;
//     otherwise, or if the write fails, it is appended to the spool
//     (fsynced) and Record returns nil: the record is kept. The outcome of
//     a call whose decision is unconfirmed is always spooled, marked so.
//
// The replayer writes spooled outcomes once the database answers again, in
// spool order, each appended to its session's hash chain at the head it
// finds (one transaction per batch that locks the sessions rows, so the
// chain stays linear; a record's `at` keeps the time the call finished). In
// that transaction it skips outcomes already written (a write that was
// given up on may have committed after all) and resolves unconfirmed
// decisions by reading the decision row by call id: if it exists the
// outcome says UnconfirmedDecision; if it is still missing unconfirmedSettle
// after it was first found missing (so a commit in flight on the old
// connection, say in a database that was paused and thaws, has landed or
// is gone), there is nothing to record.

// unconfirmedSettle is how long a decision row must stay missing before
// the unconfirmed call counts as never decided.
const unconfirmedSettle = 5 * time.Second

// decisionState is how the write of a call's decision ended.
type decisionState uint8

const (
	decisionCommitted decisionState = iota
	decisionNotWritten
	decisionUnconfirmed
)

// callState is how a call's decision write ended and whether spool room
// is reserved for its outcome.
type callState struct {
	decision decisionState
	reserved bool
}

// callStates remembers the state of each call from its decision until its
// outcome. Every decision must be followed by its outcome (the hub records
// one on every path), or its entry and reservation stay.
type callStates struct {
	mu sync.Mutex
	m  map[string]callState
}

func (c *callStates) set(id string, st callState) {
	c.mu.Lock()
	c.m[id] = st
	c.mu.Unlock()
}

// take returns and forgets the state of id (zero for a call this sink saw
// no decision of: committed, nothing reserved).
func (c *callStates) take(id string) callState {
	c.mu.Lock()
	defer c.mu.Unlock()
	st := c.m[id]
	delete(c.m, id)
	return st
}

// recordDecision reserves spool room for the call's outcome, then writes
// the decision and remembers how the write ended.
func (s *PGSink) recordDecision(ctx context.Context, p *pending, d *ToolCallDecision, start time.Time) error {
	if err := s.opts.Spool.reserve(); err != nil {
		s.m.spoolFull.Inc()
		s.m.failures.WithLabelValues("spool_full").Inc()
		s.spoolFull.Fail(1, fmt.Errorf("%w: %d outcomes wait for the database", err, s.opts.Spool.Len()))
		s.calls.set(d.CallID, callState{decision: decisionNotWritten})
		return fmt.Errorf("recording audit event: %w", err)
	}
	s.spoolFull.OK()
	err := s.commit(ctx, p, start)
	st := callState{decision: decisionCommitted, reserved: true}
	switch {
	case err == nil:
	case uncertain(err):
		st.decision = decisionUnconfirmed
	default:
		st.decision = decisionNotWritten
	}
	s.calls.set(d.CallID, st)
	return err
}

// recordOutcome writes an outcome, or spools it (see above). It returns an
// error only when the outcome is neither written nor kept: the database
// rejected the row, the decision was certainly not written and the
// database is still down (there is no decision for it to complete), or
// the spool itself failed.
func (s *PGSink) recordOutcome(ctx context.Context, p *pending, o *ToolCallOutcome, start time.Time) error {
	st := s.calls.take(o.CallID)
	reserved := st.reserved
	if st.decision == decisionUnconfirmed {
		return s.spool(spoolUnconfirmed, o, reserved)
	}
	wctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), s.opts.OutcomeWait)
	defer cancel()
	err := s.commit(wctx, p, start)
	if err == nil || isDataError(err) || st.decision == decisionNotWritten {
		if reserved {
			s.opts.Spool.release()
		}
		return err
	}
	return s.spool(spoolOutcome, o, reserved)
}

// spool appends o to the spool and wakes the replayer.
func (s *PGSink) spool(kind string, o *ToolCallOutcome, reserved bool) error {
	if err := s.opts.Spool.add(kind, o, reserved); err != nil {
		s.m.failures.WithLabelValues("spool").Inc()
		s.log.Error("audit outcome neither written nor spooled", "call_id", o.CallID, "err", err)
		return fmt.Errorf("spooling audit outcome: %w", err)
	}
	s.m.spooled.WithLabelValues(kind).Inc()
	s.wakeReplay()
	return nil
}

func (s *PGSink) wakeReplay() {
	select {
	case s.kick <- struct{}{}:
	default:
	}
}

// replayLoop writes the spool whenever it holds records and the database
// can be tried, until Close.
func (s *PGSink) replayLoop() {
	defer s.wg.Done()
	timer := time.NewTimer(0)
	defer timer.Stop()
	for {
		select {
		case <-s.stop:
			return
		case <-s.kick:
		case <-timer.C:
		}
		wait := s.replayOnce()
		if !timer.Stop() {
			select {
			case <-timer.C:
			default:
			}
		}
		timer.Reset(wait)
	}
}

// replayIdle is how often the replayer looks at a spool it could not empty
// (unconfirmed records still settling); a new spooled record or the
// database coming back wakes it sooner.
const replayIdle = time.Second

// replayOnce writes one batch from the spool and returns how long to wait
// before the next attempt.
func (s *PGSink) replayOnce() time.Duration {
	sp := s.opts.Spool
	if sp.Len() == 0 {
		return time.Minute
	}
	if down, at := s.gate.isDown(); down {
		if wait := time.Until(at); wait > 0 {
			return wait
		}
	}
	if !s.gate.allow() {
		return BackoffBase
	}
	ctx, cancel := context.WithTimeout(context.Background(), flushTimeout)
	defer cancel()
	entries := sp.head(s.opts.MaxBatch)
	done, err := s.replayBatch(ctx, entries)
	s.reached(err)
	if err != nil {
		if !isDataError(err) {
			return BackoffBase // the gate now holds the back-off
		}
		// A row the database refuses would block the spool for ever:
		// write the batch one by one; a refused record stays, is logged,
		// and the rest goes on.
		done = map[uint64]bool{}
		for _, e := range entries {
			d, err := s.replayBatch(ctx, []spoolEntry{e})
			if err != nil {
				s.log.Error("spooled audit outcome rejected by the database; it stays in the spool", "call_id", e.Outcome.CallID, "err", err)
				continue
			}
			for id := range d {
				done[id] = true
			}
		}
	}
	rejected := sp.Rejected()
	if err := sp.remove(done); err != nil {
		s.log.Error("rewriting the audit spool failed; written records stay in it and will be skipped", "err", err)
		return replayIdle
	}
	if n := sp.Rejected() - rejected; n > 0 {
		s.log.Error("audit spool: another writer added lines the gateway did not write; refused, moved to outcomes.spool.rejected, not replayed", "lines", n)
	}
	if len(done) == len(entries) && sp.Len() > 0 {
		return 0 // more to write
	}
	if sp.Len() == 0 {
		s.log.Info("audit spool written to the database")
	}
	return replayIdle
}

// replayBatch writes entries in one transaction and returns the ids of the
// entries that are done (written, already written, or nothing to write).
// Only the replayer goroutine calls it (s.missing is its own).
func (s *PGSink) replayBatch(ctx context.Context, entries []spoolEntry) (map[uint64]bool, error) {
	tx, err := s.pool.Begin(ctx)
	if err != nil {
		return nil, fmt.Errorf("replaying audit spool: %w", err)
	}
	defer func() { _ = tx.Rollback(context.WithoutCancel(ctx)) }()

	seen := map[string]bool{}
	var sessions, calls, unconfirmed []string
	for _, e := range entries {
		if !seen["s"+e.Outcome.SessionID] {
			seen["s"+e.Outcome.SessionID] = true
			sessions = append(sessions, e.Outcome.SessionID)
		}
		calls = append(calls, e.Outcome.CallID)
		if e.Kind == spoolUnconfirmed {
			unconfirmed = append(unconfirmed, e.Outcome.CallID)
		}
	}
	sort.Strings(sessions)
	// Lock the sessions rows (in id order, as writeBatch does) before
	// reading: a commit of one of these calls still in flight on another
	// connection holds the same lock, so what is read next is final.
	heads, err := lockHeads(ctx, tx, sessions)
	if err != nil {
		return nil, fmt.Errorf("replaying audit spool: %w", err)
	}
	written, err := existing(ctx, tx, `SELECT call_id FROM tool_call_outcomes WHERE call_id = ANY($1::text[])`, calls)
	if err != nil {
		return nil, fmt.Errorf("replaying audit spool: %w", err)
	}
	decided, err := existing(ctx, tx, `SELECT call_id FROM tool_calls WHERE call_id = ANY($1::text[])`, unconfirmed)
	if err != nil {
		return nil, fmt.Errorf("replaying audit spool: %w", err)
	}

	done := map[uint64]bool{}
	var batch []*pending
	var already, undecided int
	now := time.Now()
	for _, e := range entries {
		o := e.Outcome
		switch {
		case written[o.CallID]:
			done[e.ID] = true
			already++
			continue
		case e.Kind == spoolUnconfirmed && !decided[o.CallID]:
			first, seen := s.missing[e.ID]
			if !seen {
				s.missing[e.ID] = now
			} else if now.Sub(first) >= unconfirmedSettle {
				done[e.ID] = true
				undecided++
			}
			continue
		case e.Kind == spoolUnconfirmed:
			o.Status, o.Error = OutcomeRefused, UnconfirmedDecision
		}
		written[o.CallID] = true // a call's outcome once, even if spooled twice
		done[e.ID] = true
		batch = append(batch, &pending{ev: o, typ: TypeToolCallOutcome, session: o.SessionID})
	}
	if len(batch) > 0 {
		bs := sessionsOf(batch)
		sql, args := chain(batch, bs, heads)
		rows, err := tx.Query(ctx, sql, args...)
		if err != nil {
			return nil, fmt.Errorf("replaying audit spool: %w", err)
		}
		moved := 0
		for rows.Next() {
			moved++
		}
		rows.Close()
		if err := rows.Err(); err != nil {
			return nil, fmt.Errorf("replaying audit spool: %w", err)
		}
		if moved != len(bs) {
			return nil, fmt.Errorf("replaying audit spool: %d of %d locked chain heads moved", moved, len(bs))
		}
	}
	if err := tx.Commit(ctx); err != nil {
		return nil, fmt.Errorf("replaying audit spool: committing: %w", err)
	}
	for id := range done {
		delete(s.missing, id)
	}
	s.m.replayed.WithLabelValues("written").Add(float64(len(batch)))
	s.m.replayed.WithLabelValues("already_written").Add(float64(already))
	s.m.replayed.WithLabelValues("not_decided").Add(float64(undecided))
	if undecided > 0 {
		s.log.Info("unconfirmed decisions had not committed: those calls left no record and did not run", "calls", undecided)
	}
	return done, nil
}

// existing returns which of ids the query (one text[] parameter, one text
// column) finds.
func existing(ctx context.Context, tx pgx.Tx, sql string, ids []string) (map[string]bool, error) {
	found := map[string]bool{}
	if len(ids) == 0 {
		return found, nil
	}
	rows, err := tx.Query(ctx, sql, ids)
	if err != nil {
		return nil, err
	}
	defer rows.Close()
	for rows.Next() {
		var id string
		if err := rows.Scan(&id); err != nil {
			return nil, err
		}
		found[id] = true
	}
	return found, rows.Err()
}
