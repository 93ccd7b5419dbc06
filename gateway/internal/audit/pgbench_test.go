package audit

import (
	"context"
	"fmt"
	"sort"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"ironcurtain.dev/gateway/internal/store/pgtest"
)

// TestPGWriteAheadWithDatabaseKilled runs "tool calls" that act only after
// their decision was recorded, kills Postgres mid-run and brings it back:
// every action that ran has its decision row, records failed (the action
// was refused) while the database was down, and recording recovers.
// Not parallel: it stops the shared server.
func TestPGWriteAheadWithDatabaseKilled(t *testing.T) {
	db := pgtest.New(t, pgtest.Migrated())
	ctx := pgCtx(t)
	s, _ := newTestSink(t, db, Options{})

	var (
		mu        sync.Mutex
		executed  []string // actions that ran
		refused   atomic.Int64
		afterUp   atomic.Int64 // actions that ran after the restart
		restarted atomic.Bool
		stop      = make(chan struct{})
		wg        sync.WaitGroup
	)
	for w := range 8 {
		wg.Go(func() {
			for i := 0; ; i++ {
				select {
				case <-stop:
					return
				default:
				}
				call := fmt.Sprintf("w%d-%d", w, i)
				rctx, cancel := context.WithTimeout(ctx, 3*time.Second)
				err := s.Record(rctx, decision(fmt.Sprintf("s%d", w%2), call))
				cancel()
				if err != nil {
					refused.Add(1) // fail closed: the action does not run
					time.Sleep(20 * time.Millisecond)
					continue
				}
				mu.Lock()
				executed = append(executed, call) // the action runs
				mu.Unlock()
				if restarted.Load() {
					afterUp.Add(1)
				}
			}
		})
	}
	time.Sleep(500 * time.Millisecond)
	if err := db.Server.Stop(ctx); err != nil {
		t.Fatal(err)
	}
	time.Sleep(1500 * time.Millisecond)
	if err := db.Server.Start(ctx); err != nil {
		t.Fatal(err)
	}
	restarted.Store(true)
	deadline := time.Now().Add(30 * time.Second)
	for afterUp.Load() < 50 && time.Now().Before(deadline) {
		time.Sleep(50 * time.Millisecond)
	}
	close(stop)
	wg.Wait()

	if refused.Load() == 0 {
		t.Fatal("no record failed while the database was down")
	}
	if afterUp.Load() < 50 {
		t.Fatalf("only %d actions ran after the restart: recording did not recover", afterUp.Load())
	}
	rows, err := db.Pool.Query(ctx, `SELECT call_id FROM tool_calls`)
	if err != nil {
		t.Fatal(err)
	}
	stored := map[string]bool{}
	for rows.Next() {
		var id string
		if err := rows.Scan(&id); err != nil {
			t.Fatal(err)
		}
		stored[id] = true
	}
	rows.Close()
	for _, call := range executed {
		if !stored[call] {
			t.Errorf("action %s ran without its decision row", call)
		}
	}
	checks, err := Verify(ctx, db.Pool, "")
	if err != nil {
		t.Fatal(err)
	}
	for _, c := range checks {
		if c.Break != nil {
			t.Errorf("chain broken after the crash: %v", c.Break)
		}
	}
	t.Logf("%d actions ran (%d after the restart), %d refused while the database was down; %d decision rows stored",
		len(executed), afterUp.Load(), refused.Load(), len(stored))
}

// benchmarkRecords runs b.N decision records from `writers` goroutines over
// 16 sessions and reports records/s and the per-record latency quantiles.
// record is the way one record is written.
func benchmarkRecords(b *testing.B, writers int, record func(ctx context.Context, e Event) error) {
	ctx := context.Background()
	lat := make([]time.Duration, b.N)
	var next atomic.Int64
	var failed atomic.Int64
	b.ReportAllocs()
	b.ResetTimer()
	start := time.Now()
	var wg sync.WaitGroup
	for w := range writers {
		wg.Go(func() {
			for {
				i := int(next.Add(1)) - 1
				if i >= b.N {
					return
				}
				t0 := time.Now()
				if err := record(ctx, decision(fmt.Sprintf("s%d", w%16), fmt.Sprintf("b%d", i))); err != nil {
					failed.Add(1)
				}
				lat[i] = time.Since(t0)
			}
		})
	}
	wg.Wait()
	elapsed := time.Since(start)
	b.StopTimer()
	if failed.Load() > 0 {
		b.Fatalf("%d records failed", failed.Load())
	}
	sort.Slice(lat, func(i, j int) bool { return lat[i] < lat[j] })
	q := func(p float64) float64 { return float64(lat[int(p*float64(len(lat)-1))].Microseconds()) / 1000 }
	b.ReportMetric(float64(b.N)/elapsed.Seconds(), "records/s")
	b.ReportMetric(q(0.50), "p50-ms")
	b.ReportMetric(q(0.99), "p99-ms")
}

// BenchmarkPGRecord64Writers compares group commit with one transaction
// per record, in the same run, on the harness Postgres (fsync on).
//
//	go test -run '^$' -bench PGRecord -benchtime 5000x ./internal/audit/
func BenchmarkPGRecord64Writers(b *testing.B) {
	b.Run("group_commit", func(b *testing.B) {
		db := pgtest.New(b, pgtest.Migrated())
		s, _ := newTestSink(b, db, Options{})
		benchmarkRecords(b, 64, s.Record)
	})
	b.Run("one_insert_per_call", func(b *testing.B) {
		db := pgtest.New(b, pgtest.Migrated())
		s, _ := newTestSink(b, db, Options{})
		benchmarkRecords(b, 64, func(ctx context.Context, e Event) error {
			p, err := s.prepare(e)
			if err != nil {
				return err
			}
			return s.writeWithRetry(ctx, []*pending{p})
		})
	})
}

// BenchmarkPGRecordLatency is the latency a lone write-ahead record adds to
// a tool call (one writer, nothing to group with), and with 8 concurrent
// calls.
func BenchmarkPGRecordLatency(b *testing.B) {
	for _, writers := range []int{1, 8} {
		b.Run(fmt.Sprintf("writers=%d", writers), func(b *testing.B) {
			db := pgtest.New(b, pgtest.Migrated())
			s, _ := newTestSink(b, db, Options{})
			benchmarkRecords(b, writers, s.Record)
		})
	}
}
