package audit

import (
	"errors"
	"fmt"
	"log/slog"
	"math/rand/v2"
	"strconv"
	"sync"
	"sync/atomic"
	"time"
)

// This file holds what keeps a database outage from turning into a storm:
// a gate that lets one write probe the database on an exponential back-off
// with jitter while it is unreachable (every other write fails at once,
// without a connection attempt), and a summary that turns a flood of
// identical failures into one log line per interval.

// ErrDatabaseDown fails a record that was not sent because the database was
// unreachable and the next connection attempt is not due yet. The record was
// certainly not written.
// While down, PGSink fails records with an error that wraps it and names
// the condition of the last failure (read-only, disk full, unreachable).
var ErrDatabaseDown = errors.New("audit database not taking writes; not retried before the back-off ends")

// Back-off of the gate: the first retry after BackoffBase, doubling up to
// BackoffMax, each wait drawn in [d/2, d) (jitter), so that replicas and
// flushers do not reconnect in step.
const (
	BackoffBase = 100 * time.Millisecond
	BackoffMax  = 2 * time.Second
)

// backoff computes exponential waits with jitter.
type backoff struct {
	base, max time.Duration
	attempt   int
	rand      func() float64 // in [0, 1)
}

// next returns the wait before the next attempt and counts the attempt.
func (b *backoff) next() time.Duration {
	d := b.max
	if b.attempt < 30 && b.base<<b.attempt < b.max {
		d = b.base << b.attempt
	}
	b.attempt++
	return d/2 + time.Duration(b.rand()*float64(d/2))
}

func (b *backoff) reset() { b.attempt = 0 }

// gate tracks whether the database is reachable. While it is not, allow
// admits one write (the probe) each time the back-off expires; the others
// fail at once with ErrDatabaseDown. A success opens the gate again.
type gate struct {
	now  func() time.Time
	down atomic.Bool // fast path for allow while up

	mu      sync.Mutex
	b       backoff
	since   time.Time // first failure of the current outage
	retryAt time.Time
	probing bool
}

func newGate(now func() time.Time, rnd func() float64) *gate {
	if now == nil {
		now = time.Now
	}
	if rnd == nil {
		rnd = rand.Float64
	}
	return &gate{now: now, b: backoff{base: BackoffBase, max: BackoffMax, rand: rnd}}
}

// allow reports whether a write may use the database now. A true while the
// gate is down makes the caller the probe: it must report failed or ok.
func (g *gate) allow() bool {
	if !g.down.Load() {
		return true
	}
	g.mu.Lock()
	defer g.mu.Unlock()
	if !g.down.Load() {
		return true
	}
	if g.probing || g.now().Before(g.retryAt) {
		return false
	}
	g.probing = true
	return true
}

// failed records a failure to reach the database and schedules the next
// probe; it returns how long the outage has lasted.
func (g *gate) failed() time.Duration {
	g.mu.Lock()
	defer g.mu.Unlock()
	now := g.now()
	if !g.down.Load() {
		g.down.Store(true)
		g.since = now
		g.b.reset()
	}
	g.probing = false
	g.retryAt = now.Add(g.b.next())
	return now.Sub(g.since)
}

// ok records a successful write; it reports whether the gate was down and
// for how long.
func (g *gate) ok() (wasDown bool, outage time.Duration) {
	if !g.down.Load() {
		return false, 0
	}
	g.mu.Lock()
	defer g.mu.Unlock()
	if !g.down.Load() {
		return false, 0
	}
	now := g.now()
	g.down.Store(false)
	g.probing = false
	g.b.reset()
	return true, now.Sub(g.since)
}

// isDown reports whether the gate is closed and, if so, when the next
// probe is due.
func (g *gate) isDown() (bool, time.Time) {
	if !g.down.Load() {
		return false, time.Time{}
	}
	g.mu.Lock()
	defer g.mu.Unlock()
	return g.down.Load(), g.retryAt
}

// DefaultSummaryEvery is how often a FailureSummary logs while failures go on.
const DefaultSummaryEvery = 10 * time.Second

// FailureSummary logs a stream of like failures as a few lines: the first
// failure at once, then one line per interval with the duration and the
// count ("audit writes failing for 12s, 4,210 calls refused"), and one line
// when they stop. It is safe for concurrent use.
type FailureSummary struct {
	log   *slog.Logger
	what  string // "audit writes"
	unit  string // "calls refused"
	every time.Duration
	now   func() time.Time

	failing atomic.Bool
	mu      sync.Mutex
	since   time.Time
	last    time.Time
	total   int64
	lastErr error
}

// NewFailureSummary returns a summary that logs to log (nil: discarded)
// about what failing, counting unit, at most once per every (0: the
// default); now is the clock (nil: time.Now).
func NewFailureSummary(log *slog.Logger, what, unit string, every time.Duration, now func() time.Time) *FailureSummary {
	if log == nil {
		log = slog.New(slog.DiscardHandler)
	}
	if every <= 0 {
		every = DefaultSummaryEvery
	}
	if now == nil {
		now = time.Now
	}
	return &FailureSummary{log: log, what: what, unit: unit, every: every, now: now}
}

// Fail counts n failures caused by err.
func (f *FailureSummary) Fail(n int, err error) {
	f.mu.Lock()
	defer f.mu.Unlock()
	now := f.now()
	f.lastErr = err
	if !f.failing.Load() {
		f.failing.Store(true)
		f.since, f.last, f.total = now, now, int64(n)
		f.log.Error(f.what+" failing", "err", err)
		return
	}
	f.total += int64(n)
	if now.Sub(f.last) < f.every {
		return
	}
	f.last = now
	d := now.Sub(f.since).Round(time.Second)
	f.log.Error(fmt.Sprintf("%s failing for %s, %s %s", f.what, d, groupDigits(f.total), f.unit),
		"failing_for", d.String(), "count", f.total, "err", err)
}

// OK ends a run of failures (a no-op when none is going on).
func (f *FailureSummary) OK() {
	if !f.failing.Load() {
		return
	}
	f.mu.Lock()
	defer f.mu.Unlock()
	if !f.failing.Load() {
		return
	}
	f.failing.Store(false)
	d := f.now().Sub(f.since).Round(time.Millisecond)
	f.log.Warn(fmt.Sprintf("%s recovered after %s; %s %s meanwhile", f.what, d, groupDigits(f.total), f.unit),
		"failed_for", d.String(), "count", f.total, "last_err", f.lastErr)
}

// groupDigits writes n with thousands separators: 4210 → "4,210".
func groupDigits(n int64) string {
	s := strconv.FormatInt(n, 10)
	neg := ""
	if n < 0 {
		neg, s = "-", s[1:]
	}
	for i := len(s) - 3; i > 0; i -= 3 {
		s = s[:i] + "," + s[i:]
	}
	return neg + s
}
