package replay

import (
	"context"
	"os"
	"path/filepath"
	"runtime"
	"strconv"
	"sync/atomic"
	"testing"
	"time"

	"ironcurtain.dev/gateway/internal/store/pgtest"
	"ironcurtain.dev/gateway/policy"
)

func TestMain(m *testing.M) { os.Exit(pgtest.Main(m)) }

// generateSQL fills tool_calls with n recorded calls in one statement
// (generate_series: a million rows take seconds), a mix of five kinds of
// call across 100 sessions, one per millisecond back from $2. The hash
// chain is not built: replay does not read it.
const generateSQL = `
INSERT INTO tool_calls (call_id, session_id, seq, at, server, tool, args, decision, rule, reason, prev_hash, hash, policy_version)
SELECT 'c' || g, 's' || (g % 100), g, $2::timestamptz - make_interval(secs => g / 1000.0),
  (ARRAY['filesystem', 'filesystem', 'github', 'fetch', 'filesystem'])[g % 5 + 1],
  (ARRAY['read_file', 'write_file', 'pr_view', 'http_fetch', 'read_file'])[g % 5 + 1],
  CASE g % 5
    WHEN 0 THEN format('{"path":"/workspace/src/file%s.go"}', g)
    WHEN 1 THEN format('{"content":"hello %s","path":"/workspace/out/%s.txt"}', g, g)
    WHEN 2 THEN format('{"number":%s,"owner":"acme","repo":"app"}', g)
    WHEN 3 THEN format('{"url":"https://docs.example.com/page/%s"}', g)
    ELSE '{"path":"/etc/hosts"}' END,
  (ARRAY['allow', 'allow', 'allow', 'allow', 'deny'])[g % 5 + 1],
  (ARRAY['structural-sandbox-allow', 'structural-sandbox-allow', 'allow-github-reads', 'allow-fetch-allowlisted', 'deny-read-outside-sandbox'])[g % 5 + 1],
  'recorded', '\x00'::bytea, '\x00'::bytea, 'aaaaaaaaaaaaaaaa'
FROM generate_series(1, $1::bigint) AS g`

func generate(t testing.TB, db *pgtest.DB, n int, end time.Time) {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Minute)
	defer cancel()
	if _, err := db.Pool.Exec(ctx, generateSQL, n, end); err != nil {
		t.Fatalf("generating %d rows: %v", n, err)
	}
	if _, err := db.Pool.Exec(ctx, `ANALYZE tool_calls`); err != nil {
		t.Fatal(err)
	}
}

func changedReplayer(t testing.TB) *Replayer {
	t.Helper()
	dir := filepath.Join("testdata", "candidate-changed")
	eng, err := policy.LoadDirRecorded(dir, testSettings())
	if err != nil {
		t.Fatal(err)
	}
	return New(eng, dir)
}

// TestPGSource: the Postgres source applies every filter, streams the rows
// in the order they were decided, and the replay of generated calls counts
// each kind of call where it belongs.
func TestPGSource(t *testing.T) {
	db := pgtest.New(t, pgtest.Migrated())
	end := time.Date(2026, 11, 20, 12, 0, 0, 0, time.UTC)
	generate(t, db, 5000, end) // 5 s of calls, one per millisecond
	src := PG{Pool: db.Pool}
	ctx := context.Background()
	tests := []struct {
		name string
		f    Filter
		want int
	}{
		{name: "all", want: 5000},
		{name: "since", f: Filter{Since: end.Add(-time.Second)}, want: 1000},
		{name: "until", f: Filter{Until: end.Add(-4 * time.Second)}, want: 1000},
		{name: "window", f: Filter{Since: end.Add(-3 * time.Second), Until: end.Add(-2 * time.Second)}, want: 1000},
		{name: "session", f: Filter{Session: "s7"}, want: 50},
		{name: "server", f: Filter{Server: "github"}, want: 1000},
		{name: "session and server", f: Filter{Session: "s7", Server: "github"}, want: 50},
		{name: "no match", f: Filter{Session: "nobody"}, want: 0},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			n := 0
			var last time.Time
			err := src.Each(ctx, tt.f, func(r *Record) error {
				n++
				if r.At.Before(last) {
					t.Fatalf("row %s at %s after one at %s: not in order", r.CallID, r.At, last)
				}
				last = r.At
				if r.PolicyVersion != "aaaaaaaaaaaaaaaa" || !r.ArgsEscaped || len(r.Args) == 0 {
					t.Fatalf("row %+v", *r)
				}
				return nil
			})
			if err != nil || n != tt.want {
				t.Fatalf("%d rows, %v; want %d", n, err, tt.want)
			}
		})
	}
	rep, err := changedReplayer(t).Run(ctx, src, Filter{})
	if err != nil {
		t.Fatal(err)
	}
	// Candidate-changed denies pr_view (tighter), reads outside the
	// sandbox stay denied (by the unreachable-path invariant), the rest is
	// unchanged.
	if rep.Records != 5000 || rep.Replayed != 5000 || rep.Counts[Tighter] != 1000 || rep.Counts[RuleOnly] != 1000 || rep.Counts[Unchanged] != 3000 || rep.Looser() {
		t.Fatalf("report: records %d replayed %d counts %v not replayable %v", rep.Records, rep.Replayed, rep.Counts, rep.NotReplayable)
	}
	cctx, cancel := context.WithCancel(ctx)
	cancel()
	if _, err := changedReplayer(t).Run(cctx, src, Filter{}); err == nil {
		t.Fatal("a cancelled replay succeeded")
	}
}

// peakHeap samples the heap in use every few milliseconds until stop.
func peakHeap(stop <-chan struct{}, peak *atomic.Uint64) {
	var ms runtime.MemStats
	tick := time.NewTicker(5 * time.Millisecond)
	defer tick.Stop()
	for {
		runtime.ReadMemStats(&ms)
		if ms.HeapInuse > peak.Load() {
			peak.Store(ms.HeapInuse)
		}
		select {
		case <-stop:
			return
		case <-tick.C:
		}
	}
}

func replayMeasured(t testing.TB, rp *Replayer, db *pgtest.DB) (*Report, uint64, time.Duration) {
	t.Helper()
	runtime.GC()
	var peak atomic.Uint64
	stop := make(chan struct{})
	done := make(chan struct{})
	go func() { defer close(done); peakHeap(stop, &peak) }()
	begin := time.Now()
	rep, err := rp.Run(context.Background(), PG{Pool: db.Pool}, Filter{})
	took := time.Since(begin)
	close(stop)
	<-done
	if err != nil {
		t.Fatal(err)
	}
	return rep, peak.Load(), took
}

// TestReplayMemoryFlat: replaying four times as many rows does not need
// more memory (rows stream; the report holds counts and examples).
func TestReplayMemoryFlat(t *testing.T) {
	db := pgtest.New(t, pgtest.Migrated())
	end := time.Now()
	rp := changedReplayer(t)
	generate(t, db, 25000, end)
	_, small, _ := replayMeasured(t, rp, db)
	if _, err := db.Pool.Exec(context.Background(), `TRUNCATE tool_calls`); err != nil {
		t.Fatal(err)
	}
	generate(t, db, 100000, end)
	rep, large, took := replayMeasured(t, rp, db)
	if rep.Records != 100000 {
		t.Fatalf("%d records", rep.Records)
	}
	t.Logf("peak heap in use: %.1f MB for 25,000 rows, %.1f MB for 100,000 rows (%.0f rows/s)",
		float64(small)/1e6, float64(large)/1e6, 100000/took.Seconds())
	const slack = 16 << 20
	if large > small+slack {
		t.Fatalf("peak heap grew from %d to %d bytes with four times the rows: not streaming", small, large)
	}
}

// BenchmarkReplayPG replays IC_REPLAY_BENCH_ROWS recorded calls (default
// 100,000; the figure is 1,000,000) from Postgres under a
// candidate policy and reports rows/s and the peak heap in use.
func BenchmarkReplayPG(b *testing.B) {
	rows := 100000
	if s := os.Getenv("IC_REPLAY_BENCH_ROWS"); s != "" {
		n, err := strconv.Atoi(s)
		if err != nil || n <= 0 {
			b.Fatalf("IC_REPLAY_BENCH_ROWS=%q: want a positive number", s)
		}
		rows = n
	}
	db := pgtest.New(b, pgtest.Migrated())
	begin := time.Now()
	generate(b, db, rows, time.Now())
	b.Logf("generated %d rows in %s", rows, time.Since(begin).Round(time.Millisecond))
	rp := changedReplayer(b)
	b.ResetTimer()
	var peak uint64
	var total time.Duration
	for b.Loop() {
		rep, p, took := replayMeasured(b, rp, db)
		if rep.Records != int64(rows) {
			b.Fatalf("%d records, want %d", rep.Records, rows)
		}
		peak, total = max(peak, p), total+took
	}
	b.ReportMetric(float64(rows)*float64(b.N)/total.Seconds(), "rows/s")
	b.ReportMetric(float64(peak)/1e6, "peak-heap-MB")
}
