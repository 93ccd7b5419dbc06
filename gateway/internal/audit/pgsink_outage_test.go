package audit

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"log/slog"
	"os"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgconn"
	"github.com/jackc/pgx/v5/pgxpool"
	"github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/client_golang/prometheus/testutil"

	"ironcurtain.dev/gateway/internal/store/pgtest"
)

// lockedBuffer collects log output from concurrent writers.
type lockedBuffer struct {
	mu sync.Mutex
	b  bytes.Buffer
}

func (l *lockedBuffer) Write(p []byte) (int, error) {
	l.mu.Lock()
	defer l.mu.Unlock()
	return l.b.Write(p)
}

func (l *lockedBuffer) String() string {
	l.mu.Lock()
	defer l.mu.Unlock()
	return l.b.String()
}

func (l *lockedBuffer) Len() int {
	l.mu.Lock()
	defer l.mu.Unlock()
	return l.b.Len()
}

// countingPool is a pool on db that counts connection attempts.
func countingPool(t testing.TB, db *pgtest.DB) (*pgxpool.Pool, *atomic.Int64) {
	t.Helper()
	cfg, err := pgxpool.ParseConfig(db.DSN)
	if err != nil {
		t.Fatal(err)
	}
	var dials atomic.Int64
	cfg.BeforeConnect = func(context.Context, *pgx.ConnConfig) error {
		dials.Add(1)
		return nil
	}
	cfg.ConnConfig.ConnectTimeout = 2 * time.Second
	pool, err := pgxpool.NewWithConfig(context.Background(), cfg)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(pool.Close)
	return pool, &dials
}

// spoolSink is a sink with a spool in dir, logging to log.
func spoolSink(t testing.TB, pool *pgxpool.Pool, dir string, log *slog.Logger) (*PGSink, *Spool) {
	t.Helper()
	sp, _, err := OpenSpool(dir, 0)
	if err != nil {
		t.Fatal(err)
	}
	s, err := NewPG(pool, Options{Spool: sp, OutcomeWait: 500 * time.Millisecond}, prometheus.NewRegistry(), log)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = s.Close(); _ = sp.Close() })
	return s, sp
}

func waitFor(t testing.TB, what string, within time.Duration, cond func() bool) time.Duration {
	t.Helper()
	start := time.Now()
	for !cond() {
		if time.Since(start) > within {
			t.Fatalf("%s: not within %v", what, within)
		}
		time.Sleep(20 * time.Millisecond)
	}
	return time.Since(start)
}

func countRows(t testing.TB, pool *pgxpool.Pool, sql string, args ...any) int {
	t.Helper()
	var n int
	if err := pool.QueryRow(context.Background(), sql, args...).Scan(&n); err != nil {
		t.Fatal(err)
	}
	return n
}

func verifyAll(t testing.TB, pool *pgxpool.Pool) {
	t.Helper()
	checks, err := Verify(context.Background(), pool, "")
	if err != nil {
		t.Fatal(err)
	}
	for _, c := range checks {
		if c.Break != nil {
			t.Errorf("session %s: chain broken: %v", c.SessionID, c.Break)
		}
	}
}

// TestPGOutageSpoolsOutcomesInChainOrder: calls whose decisions committed
// finish while Postgres is down; their outcomes are spooled (Record
// returns nil, fast), the database is started again, and the spool is
// written: every outcome row exists, once, and every chain verifies.
// Before the spool, these outcomes were lost (issue 11 item 6).
func TestPGOutageSpoolsOutcomesInChainOrder(t *testing.T) {
	db := pgtest.New(t, pgtest.Migrated())
	ctx := pgCtx(t)
	pool, _ := countingPool(t, db)
	s, sp := spoolSink(t, pool, t.TempDir(), nil)

	const n = 40
	for i := range n {
		if err := s.Record(ctx, decision(fmt.Sprintf("s%d", i%3), fmt.Sprintf("c%d", i))); err != nil {
			t.Fatal(err)
		}
	}
	// The first ten finish while the database is up.
	for i := range 10 {
		if err := s.Record(ctx, &ToolCallOutcome{CallID: fmt.Sprintf("c%d", i), SessionID: fmt.Sprintf("s%d", i%3), Status: OutcomeOK}); err != nil {
			t.Fatal(err)
		}
	}
	if err := db.Server.Stop(ctx); err != nil {
		t.Fatal(err)
	}
	start := time.Now()
	for i := 10; i < n; i++ {
		o := &ToolCallOutcome{CallID: fmt.Sprintf("c%d", i), SessionID: fmt.Sprintf("s%d", i%3), Status: OutcomeOK, ResultBytes: i}
		if err := s.Record(ctx, o); err != nil {
			t.Fatalf("outcome %d not kept: %v", i, err)
		}
	}
	if took := time.Since(start); took > 30*time.Second {
		t.Errorf("30 outcomes took %v to be kept", took)
	}
	if sp.Len() != n-10 {
		t.Fatalf("spool holds %d outcomes, want %d", sp.Len(), n-10)
	}
	// New calls are refused while the database is down.
	if err := s.Record(ctx, decision("s0", "during")); err == nil {
		t.Fatal("a decision was recorded while the database was down")
	}
	if err := db.Server.Start(ctx); err != nil {
		t.Fatal(err)
	}
	db.Pool.Reset() // the test's own pool: its connections died with the server
	waitFor(t, "spool written", 30*time.Second, func() bool { return sp.Len() == 0 })
	if got := countRows(t, db.Pool, `SELECT count(*) FROM tool_call_outcomes`); got != n {
		t.Fatalf("%d outcome rows, want %d", got, n)
	}
	if got := countRows(t, db.Pool, `SELECT count(*) FROM tool_calls t WHERE NOT EXISTS (SELECT 1 FROM tool_call_outcomes o WHERE o.call_id = t.call_id)`); got != 0 {
		t.Fatalf("%d decisions without an outcome", got)
	}
	// Spooled outcomes follow in spool order within each session's chain.
	rows, err := db.Pool.Query(ctx, `SELECT session_id, call_id FROM tool_call_outcomes WHERE result_bytes > 0 ORDER BY session_id, seq`)
	if err != nil {
		t.Fatal(err)
	}
	last := map[string]int{}
	for rows.Next() {
		var sess, call string
		if err := rows.Scan(&sess, &call); err != nil {
			t.Fatal(err)
		}
		i, _ := strconv.Atoi(strings.TrimPrefix(call, "c"))
		if i < last[sess] {
			t.Errorf("session %s: %s written after c%d", sess, call, last[sess])
		}
		last[sess] = i
	}
	rows.Close()
	verifyAll(t, db.Pool)
	// New calls are recorded again.
	if err := s.Record(ctx, decision("s0", "after")); err != nil {
		t.Fatal(err)
	}
	if got := testutil.ToFloat64(s.m.replayed.WithLabelValues("written")); got != n-10 {
		t.Errorf("replayed written metric = %v, want %d", got, n-10)
	}
}

// TestPGSpoolReplayedAtStart: outcomes spooled by a gateway that then
// stopped are written by the next one at start.
func TestPGSpoolReplayedAtStart(t *testing.T) {
	db := pgtest.New(t, pgtest.Migrated())
	ctx := pgCtx(t)
	dir := t.TempDir()
	pool, _ := countingPool(t, db)
	sp, _, err := OpenSpool(dir, 0)
	if err != nil {
		t.Fatal(err)
	}
	first, err := NewPG(pool, Options{Spool: sp, OutcomeWait: 300 * time.Millisecond}, nil, nil)
	if err != nil {
		t.Fatal(err)
	}
	for i := range 5 {
		if err := first.Record(ctx, decision("s", fmt.Sprintf("c%d", i))); err != nil {
			t.Fatal(err)
		}
	}
	if err := db.Server.Stop(ctx); err != nil {
		t.Fatal(err)
	}
	for i := range 5 {
		if err := first.Record(ctx, &ToolCallOutcome{CallID: fmt.Sprintf("c%d", i), SessionID: "s", Status: OutcomeOK}); err != nil {
			t.Fatal(err)
		}
	}
	_ = first.Close()
	_ = sp.Close()
	if err := db.Server.Start(ctx); err != nil {
		t.Fatal(err)
	}
	// The test's own pool held connections to the stopped server: drop them,
	// or its first count meets "terminating connection" (57P01).
	db.Pool.Reset()

	pool2, _ := countingPool(t, db)
	s2, sp2 := spoolSink(t, pool2, dir, nil)
	_ = s2
	waitFor(t, "spool written at start", 30*time.Second, func() bool { return sp2.Len() == 0 })
	if got := countRows(t, db.Pool, `SELECT count(*) FROM tool_call_outcomes WHERE session_id = 's'`); got != 5 {
		t.Fatalf("%d outcome rows after the restart, want 5", got)
	}
	verifyAll(t, db.Pool)
}

// lockSession holds the sessions row of id in an open transaction, so a
// write to that session's chain blocks until release.
func lockSession(t *testing.T, db *pgtest.DB, id string) (release func()) {
	t.Helper()
	ctx := context.Background()
	tx, err := db.Pool.Begin(ctx)
	if err != nil {
		t.Fatal(err)
	}
	if _, err := tx.Exec(ctx, `INSERT INTO sessions (id) VALUES ($1) ON CONFLICT (id) DO UPDATE SET last_seen = now()`, id); err != nil {
		t.Fatal(err)
	}
	var once sync.Once
	release = func() { once.Do(func() { _ = tx.Commit(ctx) }) }
	t.Cleanup(release)
	return release
}

// TestPGUnconfirmedDecision: the decision commit is ambiguous (the caller
// stopped waiting, or the connection died mid-statement). The call is
// refused; once the database answers, the decision row is read by call id:
// committed → the outcome says exactly UnconfirmedDecision; not committed →
// no outcome is invented. Before, such a call was recorded as a plain
// refusal "audit record was not written" next to a committed allow.
func TestPGUnconfirmedDecision(t *testing.T) {
	t.Run("decision committed after the caller gave up", func(t *testing.T) {
		db := pgtest.New(t, pgtest.Migrated())
		ctx := pgCtx(t)
		s, sp := spoolSink(t, db.Pool, t.TempDir(), nil)
		if err := s.Record(ctx, decision("u", "warm")); err != nil { // the session row exists
			t.Fatal(err)
		}
		release := lockSession(t, db, "u")
		rctx, cancel := context.WithTimeout(ctx, 300*time.Millisecond)
		err := s.Record(rctx, decision("u", "amb"))
		cancel()
		if !errors.Is(err, ErrNotWritten) || !uncertain(err) {
			t.Fatalf("Record = %v, want an uncertain ErrNotWritten", err)
		}
		release() // the flusher's write goes through now
		waitFor(t, "decision committed", 10*time.Second, func() bool {
			return countRows(t, db.Pool, `SELECT count(*) FROM tool_calls WHERE call_id = 'amb'`) == 1
		})
		// The hub refused the call and records that outcome.
		if err := s.Record(ctx, &ToolCallOutcome{CallID: "amb", SessionID: "u", Status: OutcomeRefused, Error: "audit: " + err.Error()}); err != nil {
			t.Fatal(err)
		}
		waitFor(t, "spool written", 10*time.Second, func() bool { return sp.Len() == 0 })
		var status, text string
		if err := db.Pool.QueryRow(ctx, `SELECT status, error FROM tool_call_outcomes WHERE call_id = 'amb'`).Scan(&status, &text); err != nil {
			t.Fatal(err)
		}
		if status != OutcomeRefused || text != UnconfirmedDecision {
			t.Fatalf("outcome = %s %q, want refused %q", status, text, UnconfirmedDecision)
		}
		verifyAll(t, db.Pool)
	})
	t.Run("connection died before the commit", func(t *testing.T) {
		db := pgtest.New(t, pgtest.Migrated())
		ctx := pgCtx(t)
		s, sp := spoolSink(t, db.Pool, t.TempDir(), nil)
		if err := s.Record(ctx, decision("k", "warm")); err != nil {
			t.Fatal(err)
		}
		release := lockSession(t, db, "k")
		done := make(chan error, 1)
		go func() { done <- s.Record(ctx, decision("k", "killed")) }()
		// Kill the backend whose statement waits for the session lock.
		waitFor(t, "write blocked on the lock", 10*time.Second, func() bool {
			var n int
			_ = db.Pool.QueryRow(ctx, `SELECT count(pg_terminate_backend(pid)) FROM pg_stat_activity
				WHERE datname = current_database() AND wait_event_type = 'Lock' AND pid <> pg_backend_pid()`).Scan(&n)
			return n > 0
		})
		err := <-done
		release()
		if err == nil {
			t.Fatal("decision reported written although its connection was killed")
		}
		var pgErr *pgconn.PgError
		if !uncertain(err) && !errors.As(err, &pgErr) {
			t.Fatalf("Record = %v: a connection that died mid-statement must count as unconfirmed", err)
		}
		if err := s.Record(ctx, &ToolCallOutcome{CallID: "killed", SessionID: "k", Status: OutcomeRefused}); err != nil {
			t.Fatal(err)
		}
		// The decision is not there: after the settle time, nothing is written.
		waitFor(t, "spool settled", unconfirmedSettle+15*time.Second, func() bool { return sp.Len() == 0 })
		if got := countRows(t, db.Pool, `SELECT count(*) FROM tool_call_outcomes WHERE call_id = 'killed'`); got != 0 {
			t.Fatalf("an outcome was written for a call whose decision never committed")
		}
		if got := countRows(t, db.Pool, `SELECT count(*) FROM tool_calls WHERE call_id = 'killed'`); got != 0 {
			t.Fatalf("the killed decision committed")
		}
		verifyAll(t, db.Pool)
	})
}

// TestPGOutageLogAndReconnects measures what an outage costs: decisions
// refused per second, log bytes per second and connection attempts per
// second while Postgres is stopped, with 16 writers retrying at once. The
// log stays a summary (issue 11: three lines per refused call, 2,800
// connection attempts a second, before). IC_OUTAGE_SECONDS sets the length
// (default 6).
func TestPGOutageLogAndReconnects(t *testing.T) {
	db := pgtest.New(t, pgtest.Migrated())
	ctx := pgCtx(t)
	secs := 6
	if v, err := strconv.Atoi(os.Getenv("IC_OUTAGE_SECONDS")); err == nil && v > 0 {
		secs = v
	}
	pool, dials := countingPool(t, db)
	var logBuf lockedBuffer
	s, _ := spoolSink(t, pool, t.TempDir(), slog.New(slog.NewJSONHandler(&logBuf, nil)))
	if err := s.Record(ctx, decision("m", "warm")); err != nil {
		t.Fatal(err)
	}
	if err := db.Server.Stop(ctx); err != nil {
		t.Fatal(err)
	}
	dials0, log0 := dials.Load(), logBuf.Len()
	var refused atomic.Int64
	stop := make(chan struct{})
	var wg sync.WaitGroup
	start := time.Now()
	for w := range 16 {
		wg.Go(func() {
			for i := 0; ; i++ {
				select {
				case <-stop:
					return
				default:
				}
				rctx, cancel := context.WithTimeout(ctx, 3*time.Second)
				err := s.Record(rctx, decision(fmt.Sprintf("m%d", w), fmt.Sprintf("m%d-%d", w, i)))
				cancel()
				if err == nil {
					t.Error("a decision was recorded while the database was stopped")
					return
				}
				refused.Add(1)
				// The hub records the refusal's outcome (kept only when
				// the decision may have committed).
				_ = s.Record(ctx, &ToolCallOutcome{CallID: fmt.Sprintf("m%d-%d", w, i), SessionID: fmt.Sprintf("m%d", w), Status: OutcomeRefused})
				time.Sleep(time.Millisecond) // an agent retrying at once, not a busy loop
			}
		})
	}
	time.Sleep(time.Duration(secs) * time.Second)
	close(stop)
	wg.Wait()
	elapsed := time.Since(start).Seconds()
	perSec := float64(refused.Load()) / elapsed
	logPerSec := float64(logBuf.Len()-log0) / elapsed
	dialsPerSec := float64(dials.Load()-dials0) / elapsed
	t.Logf("outage of %.1f s: %.0f decisions refused/s, %.0f log bytes/s, %.2f connection attempts/s", elapsed, perSec, logPerSec, dialsPerSec)
	if err := db.Server.Start(ctx); err != nil {
		t.Fatal(err)
	}
	back := time.Now()
	firstOK := waitFor(t, "first decision after the database is back", 30*time.Second, func() bool {
		rctx, cancel := context.WithTimeout(ctx, 2*time.Second)
		defer cancel()
		return s.Record(rctx, decision("m", fmt.Sprintf("after-%d", time.Now().UnixNano()))) == nil
	})
	t.Logf("first decision recorded %v after the database answered again (start returned %v ago)", firstOK.Round(time.Millisecond), time.Since(back).Round(time.Millisecond))

	if refused.Load() == 0 {
		t.Fatal("nothing was refused")
	}
	// Back-off: BackoffMax between probes at worst; allow the pool's own
	// connect attempts (a probe may dial more than once).
	if maxDials := 4 * (float64(secs)/BackoffMax.Seconds()*2 + 8); float64(dials.Load()-dials0) > maxDials {
		t.Errorf("%d connection attempts in %d s of outage, want ≤ %.0f (back-off)", dials.Load()-dials0, secs, maxDials)
	}
	// Summary: a first line, one per 10 s, the recovery.
	lines := strings.Count(logBuf.String(), "\n")
	if want := secs/10 + 4; lines > want {
		t.Errorf("%d log lines for %d refusals, want ≤ %d:\n%s", lines, refused.Load(), want, logBuf.String())
	}
	if !strings.Contains(logBuf.String(), "audit writes recovered after") {
		t.Errorf("recovery not logged:\n%s", logBuf.String())
	}
}
