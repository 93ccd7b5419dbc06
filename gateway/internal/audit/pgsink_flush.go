package audit

import (
	"context"
	"errors"
	"fmt"
	"time"

	"github.com/jackc/pgx/v5/pgconn"

	"ironcurtain.dev/gateway/internal/store"
)

// flusher is the state of one flush loop.
type flusher struct {
	queue chan *pending
	// heads caches the chain heads of the flusher's sessions as this
	// flusher last wrote or read them. Another replica may have moved a
	// head since: writes check it (see writeSQL).
	heads map[string]chainHead
}

// maxCachedHeads bounds a flusher's head cache; past it, an arbitrary head
// is forgotten (and read again when its session writes).
const maxCachedHeads = 4096

func (f *flusher) remember(session string, h chainHead) {
	if _, ok := f.heads[session]; !ok && len(f.heads) >= maxCachedHeads {
		for id := range f.heads {
			delete(f.heads, id)
			break
		}
	}
	f.heads[session] = h
}

func (s *PGSink) flushLoop(f *flusher) {
	defer s.wg.Done()
	queue := f.queue
	batch := make([]*pending, 0, s.opts.MaxBatch)
	for {
		var first *pending
		select {
		case first = <-queue:
		case <-s.stop:
			// Drain: nothing queued is dropped.
			for {
				select {
				case p := <-queue:
					s.flush(f, s.fill(queue, append(batch[:0], p)))
				default:
					return
				}
			}
		}
		batch = append(batch[:0], first)
		batch = s.fill(queue, batch)
		s.flush(f, batch)
	}
}

// fill adds queued records to batch without waiting, then lingers for
// Options.Linger if the batch is still not full.
func (s *PGSink) fill(queue chan *pending, batch []*pending) []*pending {
	for len(batch) < s.opts.MaxBatch {
		select {
		case p := <-queue:
			batch = append(batch, p)
			continue
		default:
		}
		break
	}
	if s.opts.Linger <= 0 || len(batch) >= s.opts.MaxBatch {
		return batch
	}
	timer := time.NewTimer(s.opts.Linger)
	defer timer.Stop()
	for len(batch) < s.opts.MaxBatch {
		select {
		case p := <-queue:
			batch = append(batch, p)
		case <-timer.C:
			return batch
		}
	}
	return batch
}

// flushTimeout bounds one transaction, so a hung database fails records
// instead of holding callers until their own deadlines.
const flushTimeout = 30 * time.Second

// flush writes batch and reports to every record. A batch that fails on a
// data or constraint error is retried record by record, so one bad record
// fails alone.
//
// While the database is unreachable (see gate), a batch is not sent at all
// unless it is the probe that is due: it fails at once with
// ErrDatabaseDown, so an outage costs no connection attempt per batch.
func (s *PGSink) flush(f *flusher, batch []*pending) {
	if !s.gate.allow() {
		down := s.downError()
		s.m.failures.WithLabelValues("db_down").Add(float64(len(batch)))
		s.failing.Fail(len(batch), down)
		for _, p := range batch {
			p.done <- down
		}
		return
	}
	ctx, cancel := context.WithTimeout(context.Background(), flushTimeout)
	defer cancel()
	start := time.Now()
	written, rest, err := s.writeCached(ctx, f, batch)
	if err == nil && len(rest) > 0 {
		// Another writer moved some of the heads: write those records in
		// a transaction that locks the sessions rows and reads the heads.
		s.m.retries.Inc()
		err = s.writeWithRetry(ctx, rest)
		if err == nil {
			for _, p := range rest {
				f.remember(p.session, chainHead{seq: p.seq, hash: p.hash})
			}
		}
	}
	if err != nil {
		// The heads of the failed records are unknown (the commit may or
		// may not have happened): read them again next time.
		for _, p := range rest {
			delete(f.heads, p.session)
		}
	}
	s.m.commitSeconds.Observe(time.Since(start).Seconds())
	s.m.batchSize.Observe(float64(len(batch)))
	s.reached(err)
	if err == nil {
		for _, p := range batch {
			p.done <- nil
		}
		return
	}
	for _, p := range written {
		p.done <- nil
	}
	if len(rest) > 1 && isDataError(err) {
		for _, p := range rest {
			s.flush(f, []*pending{p})
		}
		return
	}
	s.m.failures.WithLabelValues(failureReason(err)).Add(float64(len(rest)))
	if isDataError(err) {
		s.log.Error("audit record rejected by the database", "type", rest[0].typ, "err", err)
	} else {
		s.failing.Fail(len(rest), err)
	}
	for _, p := range rest {
		p.done <- err
	}
}

// reached updates the gate after a write that ended with err: an error
// from the server (a rejected row, a deadlock) still means it is reachable.
func (s *PGSink) reached(err error) {
	if err != nil && !isDataError(err) && !isRetryable(err) {
		cause := err
		if we := store.Classify(err); we != nil {
			cause = we
		}
		s.lastFail.Store(&writeFailure{err: cause, at: time.Now()})
		s.gate.failed()
		return
	}
	if err == nil {
		s.lastFail.Store(nil)
	}
	if wasDown, _ := s.gate.ok(); wasDown {
		s.wakeReplay()
	}
	s.failing.OK()
}

func (s *PGSink) writeWithRetry(ctx context.Context, batch []*pending) error {
	var err error
	for attempt := 0; attempt < 3; attempt++ {
		err = s.writeBatch(ctx, batch)
		if err == nil || !isRetryable(err) {
			return err
		}
		s.m.retries.Inc()
	}
	return err
}

// notSentError marks a write error that happened before anything that
// could commit was sent (reading heads, beginning, statements of a
// transaction that was never committed): the records were certainly not
// written.
type notSentError struct{ err error }

func (e notSentError) Error() string { return e.err.Error() }
func (e notSentError) Unwrap() error { return e.err }

func notSent(err error) error { return notSentError{err} }

// uncertain reports whether a record that failed with err may nevertheless
// have been committed: the connection died (or the wait ended) after the
// commit could have reached the server.
func uncertain(err error) bool {
	var ns notSentError
	var ce *pgconn.ConnectError
	switch {
	case err == nil,
		errors.Is(err, ErrDatabaseDown), errors.Is(err, ErrClosed), errors.Is(err, ErrQueueFull),
		errors.Is(err, ErrInvalid), errors.Is(err, ErrSpoolFull),
		errors.As(err, &ns), errors.As(err, &ce), isDataError(err):
		return false
	case errors.Is(err, ErrNotWritten):
		return true // the wait ended; the flusher may still commit it
	}
	return !pgconn.SafeToRetry(err)
}

func isDataError(err error) bool {
	var pgErr *pgconn.PgError
	if errors.As(err, &pgErr) {
		return len(pgErr.Code) == 5 && (pgErr.Code[:2] == "22" || pgErr.Code[:2] == "23")
	}
	return false
}

func isRetryable(err error) bool {
	var pgErr *pgconn.PgError
	return errors.As(err, &pgErr) && (pgErr.Code == "40001" || pgErr.Code == "40P01")
}

func failureReason(err error) string {
	switch {
	case isDataError(err):
		return "rejected"
	case errors.Is(err, context.DeadlineExceeded):
		return "timeout"
	case errors.Is(err, ErrDatabaseDown):
		return "db_down"
	default:
		return "db"
	}
}

// writeFailure is a failed write to the database and when it happened.
type writeFailure struct {
	err error
	at  time.Time
}

// downError is the error of a record not sent while the gate is down: it
// is ErrDatabaseDown and names the last failure's condition.
func (s *PGSink) downError() error {
	if f := s.lastFail.Load(); f != nil {
		return fmt.Errorf("%w: last failure: %w", ErrDatabaseDown, f.err)
	}
	return ErrDatabaseDown
}

// WriteFailure returns the audit writer's last failure to write to the
// database (a *store.WriteError when it could be classified: read-only,
// disk full, unreachable) when it happened within window, else nil. A
// successful write clears it. Readiness reports it: while the writer fails,
// calls are refused, so the gateway is not ready.
func (s *PGSink) WriteFailure(window time.Duration) error {
	f := s.lastFail.Load()
	if f == nil || time.Since(f.at) > window {
		return nil
	}
	return f.err
}
