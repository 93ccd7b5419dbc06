package audit

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"os"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/client_golang/prometheus/testutil"

	"ironcurtain.dev/gateway/internal/store/pgtest"
)

func TestMain(m *testing.M) { os.Exit(pgtest.Main(m)) }

func newTestSink(t testing.TB, db *pgtest.DB, opts Options) (*PGSink, *prometheus.Registry) {
	t.Helper()
	reg := prometheus.NewRegistry()
	s, err := NewPG(db.Pool, opts, reg, nil)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = s.Close() })
	return s, reg
}

func pgCtx(t testing.TB) context.Context {
	ctx, cancel := context.WithTimeout(context.Background(), 3*time.Minute)
	t.Cleanup(cancel)
	return ctx
}

func decision(session, call string) *ToolCallDecision {
	return &ToolCallDecision{CallID: call, SessionID: session, Server: "filesystem", Tool: "read_file",
		Args: json.RawMessage(`{"path":"/workspace/a.txt"}`), Decision: "allow", Rule: "sandbox-read", Reason: "inside the sandbox"}
}

// TestPGRecordVerifyQuery writes every event type from concurrent writers
// over several sessions; every chain verifies and queries filter.
func TestPGRecordVerifyQuery(t *testing.T) {
	db := pgtest.New(t, pgtest.Migrated())
	ctx := pgCtx(t)
	s, reg := newTestSink(t, db, Options{})
	var wg sync.WaitGroup
	var failed atomic.Int64
	for w := range 16 {
		wg.Go(func() {
			sess := fmt.Sprintf("s%d", w%4)
			for i := range 10 {
				call := fmt.Sprintf("w%d-c%d", w, i)
				d := decision(sess, call)
				if i%3 == 0 {
					d.Decision, d.Server, d.Tool = "deny", "git", "push"
				}
				evs := []Event{d,
					&ToolCallOutcome{CallID: call, SessionID: sess, Status: OutcomeOK, Duration: time.Millisecond, ResultBytes: 12},
					&EgressEvent{SessionID: sess, ToolCallID: call, Kind: "fetch", Host: "example.com", Port: 443, Decision: "allow", Reason: "listed"},
					&LLMCall{SessionID: sess, Provider: "anthropic", Model: "m", Path: "/v1/messages", StatusCode: 200, InputTokens: 3, OutputTokens: 4, CostUSD: 0.0125},
				}
				for _, e := range evs {
					if err := s.Record(ctx, e); err != nil {
						t.Errorf("Record: %v", err)
						failed.Add(1)
					}
				}
			}
		})
	}
	wg.Wait()
	if failed.Load() > 0 {
		t.FailNow()
	}
	checks, err := Verify(ctx, db.Pool, "")
	if err != nil {
		t.Fatal(err)
	}
	if len(checks) != 4 {
		t.Fatalf("verified %d sessions, want 4", len(checks))
	}
	for _, c := range checks {
		if c.Break != nil || c.Records != 160 {
			t.Errorf("session %s: %d records, break %v", c.SessionID, c.Records, c.Break)
		}
	}
	if got := testutil.ToFloat64(s.m.records.WithLabelValues(TypeToolCallDecision, "ok")); got != 160 {
		t.Errorf("decision ok metric = %v", got)
	}
	_ = reg

	tests := []struct {
		name string
		f    Filter
		want int
	}{
		{name: "all capped by default limit", f: Filter{}, want: DefaultQueryLimit},
		{name: "session", f: Filter{Session: "s1", Limit: 1000}, want: 40},
		{name: "decision deny", f: Filter{Decision: "deny", Limit: 1000}, want: 64},
		{name: "server and tool", f: Filter{Server: "git", Tool: "push", Limit: 1000}, want: 64},
		{name: "since future", f: Filter{Since: time.Now().Add(time.Hour)}, want: 0},
		{name: "limit", f: Filter{Limit: 7}, want: 7},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			got, err := Query(ctx, db.Pool, tt.f)
			if err != nil {
				t.Fatal(err)
			}
			if len(got) != tt.want {
				t.Fatalf("got %d rows, want %d", len(got), tt.want)
			}
			for _, c := range got {
				if c.Outcome == nil || c.Outcome.Status != OutcomeOK {
					t.Fatalf("call %s has no outcome joined: %+v", c.CallID, c)
				}
			}
		})
	}
	if _, err := Query(ctx, db.Pool, Filter{Decision: "maybe"}); err == nil {
		t.Fatal("bad decision filter accepted")
	}
}

// TestPGHashChainCatchesTampering edits, deletes and reorders rows behind
// the gateway's back; verify names the first broken row.
func TestPGHashChainCatchesTampering(t *testing.T) {
	tests := []struct {
		name      string
		tamper    string // SQL run after 6 records (c1..c3 decisions + outcomes) of session s
		wantTable string
		wantRow   string
		wantSeq   int64
		wantText  string
	}{
		{name: "edited args", tamper: `UPDATE tool_calls SET args = '{"path":"/etc/shadow"}' WHERE call_id = 'c2'`,
			wantTable: "tool_calls", wantRow: "c2", wantSeq: 3, wantText: "row edited"},
		{name: "edited decision", tamper: `UPDATE tool_calls SET decision = 'deny' WHERE call_id = 'c1'`,
			wantTable: "tool_calls", wantRow: "c1", wantSeq: 1, wantText: "row edited"},
		{name: "edited outcome", tamper: `UPDATE tool_call_outcomes SET status = 'error' WHERE call_id = 'c3'`,
			wantTable: "tool_call_outcomes", wantRow: "c3", wantSeq: 6, wantText: "row edited"},
		{name: "deleted middle row", tamper: `DELETE FROM tool_call_outcomes WHERE call_id = 'c1'`,
			wantTable: "tool_calls", wantRow: "c2", wantSeq: 2, wantText: "missing"},
		{name: "deleted last row", tamper: `DELETE FROM tool_call_outcomes WHERE call_id = 'c3'`,
			wantTable: "sessions", wantSeq: 6, wantText: "head says 6 records but 5"},
		{name: "reordered rows", tamper: `
UPDATE tool_calls SET seq = -1 WHERE call_id = 'c2';
UPDATE tool_calls SET seq = 3 WHERE call_id = 'c3';
UPDATE tool_calls SET seq = 5 WHERE call_id = 'c2';`,
			wantTable: "tool_calls", wantRow: "c3", wantSeq: 3, wantText: "prev_hash"},
		{name: "row moved to another session", tamper: `UPDATE tool_calls SET session_id = 'other' WHERE call_id = 'c2'`,
			wantTable: "tool_call_outcomes", wantRow: "c2", wantSeq: 3, wantText: "missing"},
		{name: "edited time", tamper: `UPDATE tool_calls SET at = at - interval '1 hour' WHERE call_id = 'c3'`,
			wantTable: "tool_calls", wantRow: "c3", wantSeq: 5, wantText: "row edited"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			db := pgtest.New(t, pgtest.Migrated())
			ctx := pgCtx(t)
			s, _ := newTestSink(t, db, Options{})
			for _, c := range []string{"c1", "c2", "c3"} {
				if err := s.Record(ctx, decision("s", c)); err != nil {
					t.Fatal(err)
				}
				if err := s.Record(ctx, &ToolCallOutcome{CallID: c, SessionID: "s", Status: OutcomeOK}); err != nil {
					t.Fatal(err)
				}
			}
			checks, err := Verify(ctx, db.Pool, "s")
			if err != nil || len(checks) != 1 || checks[0].Break != nil {
				t.Fatalf("before tampering: %+v, %v", checks, err)
			}
			if _, err := db.Pool.Exec(ctx, tt.tamper); err != nil {
				t.Fatalf("tampering: %v", err)
			}
			checks, err = Verify(ctx, db.Pool, "s")
			if err != nil {
				t.Fatal(err)
			}
			b := checks[0].Break
			if b == nil {
				t.Fatal("verify did not notice")
			}
			if b.Table != tt.wantTable || b.RowID != tt.wantRow || b.Seq != tt.wantSeq || !strings.Contains(b.Problem, tt.wantText) {
				t.Fatalf("break = %+v\nwant table %s row %q seq %d problem containing %q", *b, tt.wantTable, tt.wantRow, tt.wantSeq, tt.wantText)
			}
		})
	}
}

func TestPGRedactsBeforeStorage(t *testing.T) {
	db := pgtest.New(t, pgtest.Migrated())
	ctx := pgCtx(t)
	s, _ := newTestSink(t, db, Options{})
	d := decision("s", "c1")
	d.Args = json.RawMessage(`{"url":"https://x:` + ghToken + `@github.com/a/b","headers":{"Authorization":"Bearer abc"},"password":"hunter2"}`)
	d.Detail = "token " + ghPAT
	if err := s.Record(ctx, d); err != nil {
		t.Fatal(err)
	}
	if err := s.Record(ctx, &ToolCallOutcome{CallID: "c1", SessionID: "s", Status: OutcomeError, Error: "push: " + awsKeyID}); err != nil {
		t.Fatal(err)
	}
	var dump string
	err := db.Pool.QueryRow(ctx, `
SELECT (SELECT string_agg(t::text, ' ') FROM tool_calls t) || (SELECT string_agg(o::text, ' ') FROM tool_call_outcomes o)`).Scan(&dump)
	if err != nil {
		t.Fatal(err)
	}
	for _, secret := range []string{ghToken, "Bearer abc", "hunter2", ghPAT, awsKeyID} {
		if strings.Contains(dump, secret) {
			t.Errorf("stored rows contain %q: %s", secret, dump)
		}
	}
	if !strings.Contains(dump, Redacted) {
		t.Errorf("no redaction marker in %s", dump)
	}
	if checks, _ := Verify(ctx, db.Pool, "s"); checks[0].Break != nil {
		t.Errorf("redacted rows do not verify: %v", checks[0].Break)
	}
}

// A bad record in a batch fails alone; the others commit.
func TestPGBadRecordFailsAlone(t *testing.T) {
	db := pgtest.New(t, pgtest.Migrated())
	ctx := pgCtx(t)
	s, _ := newTestSink(t, db, Options{Flushers: 1, Linger: 20 * time.Millisecond})
	var wg sync.WaitGroup
	errs := make([]error, 20)
	for i := range errs {
		wg.Go(func() {
			d := decision("s", fmt.Sprintf("c%d", i))
			if i == 7 {
				d.Decision = "maybe" // violates the CHECK constraint
			}
			if i == 9 {
				d.CallID = "c8" // duplicate call id
			}
			errs[i] = s.Record(ctx, d)
		})
	}
	wg.Wait()
	failures := 0
	for i, err := range errs {
		if err != nil {
			failures++
			if i != 7 && i != 8 && i != 9 {
				t.Errorf("record %d failed: %v", i, err)
			}
		}
	}
	if failures != 2 { // the bad decision and one of the two c8
		t.Fatalf("%d records failed, want 2: %v", failures, errs)
	}
	if c, _ := Verify(ctx, db.Pool, "s"); c[0].Break != nil || c[0].Records != 18 {
		t.Fatalf("chain after partial failure: %+v", c[0])
	}
	if got := testutil.ToFloat64(s.m.failures.WithLabelValues("rejected")); got != 2 {
		t.Fatalf("rejected failures metric = %v, want 2", got)
	}
}

func TestPGRejectsInvalidEvents(t *testing.T) {
	db := pgtest.New(t, pgtest.Migrated())
	s, _ := newTestSink(t, db, Options{})
	ctx := pgCtx(t)
	for _, e := range []Event{nil, (*ToolCallOutcome)(nil), &ToolCallDecision{SessionID: "s"}, &ToolCallOutcome{}} {
		if err := s.Record(ctx, e); !errors.Is(err, ErrInvalid) {
			t.Errorf("Record(%#v) = %v, want ErrInvalid", e, err)
		}
	}
}

// When the queue is full, Record blocks up to its context and then fails:
// nothing is dropped silently, and the failure is counted.
func TestPGQueueFullBlocksThenFails(t *testing.T) {
	db := pgtest.New(t, pgtest.Migrated())
	ctx := pgCtx(t)
	s, _ := newTestSink(t, db, Options{QueueSize: 1, Flushers: 1, MaxBatch: 1})
	if err := s.Record(ctx, decision("s", "c0")); err != nil { // creates the session row
		t.Fatal(err)
	}
	// Hold the session row lock: the flusher blocks on it.
	tx, err := db.Pool.Begin(ctx)
	if err != nil {
		t.Fatal(err)
	}
	if _, err := tx.Exec(ctx, `SELECT 1 FROM sessions WHERE id = 's' FOR UPDATE`); err != nil {
		t.Fatal(err)
	}
	results := make(chan error, 3)
	for i := 1; i <= 3; i++ {
		go func() {
			rctx, cancel := context.WithTimeout(ctx, 1500*time.Millisecond)
			defer cancel()
			results <- s.Record(rctx, decision("s", fmt.Sprintf("c%d", i)))
		}()
	}
	var full, notWritten int
	for range 3 {
		err := <-results
		switch {
		case errors.Is(err, ErrQueueFull):
			full++
		case errors.Is(err, ErrNotWritten):
			notWritten++
		default:
			t.Errorf("Record = %v, want a queue-full or not-written error", err)
		}
	}
	if full < 1 {
		t.Errorf("no record saw the queue full (full=%d, timed out=%d)", full, notWritten)
	}
	_ = tx.Rollback(ctx)
	if got := testutil.ToFloat64(s.m.failures.WithLabelValues("queue_full")); got < 1 {
		t.Errorf("queue_full metric = %v", got)
	}
}

// Two gateway replicas (two sinks, two pools) write the same sessions at
// once: the chains stay linear.
func TestPGTwoReplicasShareChains(t *testing.T) {
	db := pgtest.New(t, pgtest.Migrated())
	ctx := pgCtx(t)
	a, _ := newTestSink(t, db, Options{})
	other := pgtest.Connect(t, db)
	b, err := NewPG(other, Options{}, nil, nil)
	if err != nil {
		t.Fatal(err)
	}
	defer b.Close()
	var wg sync.WaitGroup
	for w := range 8 {
		sink := a
		if w%2 == 1 {
			sink = b
		}
		wg.Go(func() {
			for i := range 25 {
				if err := sink.Record(ctx, decision(fmt.Sprintf("s%d", i%3), fmt.Sprintf("w%d-%d", w, i))); err != nil {
					t.Errorf("Record: %v", err)
				}
			}
		})
	}
	wg.Wait()
	checks, err := Verify(ctx, db.Pool, "")
	if err != nil {
		t.Fatal(err)
	}
	total := int64(0)
	for _, c := range checks {
		if c.Break != nil {
			t.Errorf("session %s broken: %v", c.SessionID, c.Break)
		}
		total += c.Records
	}
	if total != 200 {
		t.Fatalf("verified %d records, want 200", total)
	}
}

// A sink's cached chain head goes stale when another replica writes the
// session: the next write notices, writes again from the head it reads
// under the session lock, and the chain stays linear.
func TestPGStaleCachedHead(t *testing.T) {
	db := pgtest.New(t, pgtest.Migrated())
	ctx := pgCtx(t)
	a, _ := newTestSink(t, db, Options{})
	b, err := NewPG(pgtest.Connect(t, db), Options{}, nil, nil)
	if err != nil {
		t.Fatal(err)
	}
	defer b.Close()
	for i, sink := range []*PGSink{a, b, a, a, b, b, a} {
		if err := sink.Record(ctx, decision("s", fmt.Sprintf("c%d", i))); err != nil {
			t.Fatalf("record %d: %v", i, err)
		}
	}
	checks, err := Verify(ctx, db.Pool, "s")
	if err != nil {
		t.Fatal(err)
	}
	if len(checks) != 1 || checks[0].Break != nil || checks[0].Records != 7 {
		t.Fatalf("chain after writes from two replicas: %+v", checks)
	}
	// a's cached head was stale at records 2 and 6, b's at record 4 (b
	// read the head at record 1).
	for _, tt := range []struct {
		name string
		sink *PGSink
		want float64
	}{{"a", a, 2}, {"b", b, 1}} {
		if got := testutil.ToFloat64(tt.sink.m.retries); got != tt.want {
			t.Errorf("sink %s: retries metric = %v, want %v", tt.name, got, tt.want)
		}
	}
}

func TestPGClose(t *testing.T) {
	db := pgtest.New(t, pgtest.Migrated())
	ctx := pgCtx(t)
	s, _ := newTestSink(t, db, Options{})
	if err := s.Record(ctx, decision("s", "c1")); err != nil {
		t.Fatal(err)
	}
	if err := s.Close(); err != nil {
		t.Fatal(err)
	}
	if err := s.Record(ctx, decision("s", "c2")); !errors.Is(err, ErrClosed) {
		t.Fatalf("Record after Close = %v, want ErrClosed", err)
	}
}
