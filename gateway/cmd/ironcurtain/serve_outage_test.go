package main

import (
	"context"
	"fmt"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"ironcurtain.dev/gateway/internal/audit"
	"ironcurtain.dev/gateway/internal/store/pgtest"
)

// logMeter counts what serve logs (safe for concurrent writers).
type logMeter struct {
	mu    sync.Mutex
	bytes int64
	lines []string
}

func (m *logMeter) Write(p []byte) (int, error) {
	m.mu.Lock()
	defer m.mu.Unlock()
	m.bytes += int64(len(p))
	if len(m.lines) < 10_000 {
		m.lines = append(m.lines, strings.TrimSpace(string(p)))
	}
	return len(p), nil
}

func (m *logMeter) size() int64 {
	m.mu.Lock()
	defer m.mu.Unlock()
	return m.bytes
}

// TestServeDatabaseOutage runs serve with agents writing files while
// Postgres is killed (IC_OUTAGE_SECONDS, default 8) and started again. It
// measures refused calls and log bytes per second during the outage and
// the time from Postgres back to the first successful call, and checks:
// no finished call came back as a transport error, the log is a summary
// (issue 11: 236 MB in 65 s before, three lines per refused call), every
// file written has an allow decision and, once the spool is written, an ok
// outcome, and every chain verifies.
func TestServeDatabaseOutage(t *testing.T) {
	db := pgtest.New(t, pgtest.Migrated())
	ctx := context.Background()
	secs := 8
	if v, err := strconv.Atoi(os.Getenv("IC_OUTAGE_SECONDS")); err == nil && v > 0 {
		secs = v
	}
	sandbox := t.TempDir()
	var logs logMeter
	g := runGatewayLogged(t, db, sandbox, sandboxPolicy(t, sandbox), &logs)

	const workers = 8
	var (
		stop                     atomic.Bool
		down                     atomic.Bool
		ok, refused, downRefused atomic.Int64
		transport                atomic.Int64
		firstOKAfter             atomic.Int64 // unix nanos of the first ok after Postgres is back
		upAt                     atomic.Int64
		wg                       sync.WaitGroup
		mu                       sync.Mutex
		transportErrs            []string
	)
	for w := range workers {
		agent := connectAgent(t, g.api)
		wg.Go(func() {
			for i := 0; !stop.Load(); i++ {
				p := filepath.Join(sandbox, fmt.Sprintf("w%d-%d.txt", w, i))
				r := <-callAsync(agent, "filesystem__write_file", map[string]any{"path": p, "content": "x\n"})
				switch {
				case r.err != nil:
					transport.Add(1)
					mu.Lock()
					transportErrs = append(transportErrs, r.err.Error())
					mu.Unlock()
				case r.isError:
					refused.Add(1)
					if down.Load() {
						downRefused.Add(1)
					}
					time.Sleep(time.Millisecond) // an agent that retries at once
				default:
					ok.Add(1)
					if up := upAt.Load(); up != 0 {
						firstOKAfter.CompareAndSwap(0, time.Now().UnixNano())
					}
				}
			}
		})
	}
	time.Sleep(2 * time.Second)
	if ok.Load() == 0 {
		t.Fatalf("no call succeeded before the outage (refused %d)", refused.Load())
	}
	if err := db.Server.Stop(ctx); err != nil {
		t.Fatal(err)
	}
	down.Store(true)
	time.Sleep(time.Second) // the first failures are logged at once: measure the steady state
	log0, ref0, t0 := logs.size(), downRefused.Load(), time.Now()
	time.Sleep(time.Duration(secs) * time.Second)
	logBytes, refusedN, el := logs.size()-log0, downRefused.Load()-ref0, time.Since(t0).Seconds()
	if err := db.Server.Start(ctx); err != nil {
		t.Fatal(err)
	}
	down.Store(false)
	back := time.Now()
	upAt.Store(back.UnixNano())
	deadline := time.Now().Add(30 * time.Second)
	for firstOKAfter.Load() == 0 && time.Now().Before(deadline) {
		time.Sleep(10 * time.Millisecond)
	}
	time.Sleep(time.Second)
	stop.Store(true)
	wg.Wait()

	t.Logf("outage %.1f s with %d agents: %.0f calls refused/s, %.0f log bytes/s (%d bytes)", el, workers, float64(refusedN)/el, float64(logBytes)/el, logBytes)
	if f := firstOKAfter.Load(); f == 0 {
		t.Fatal("no call succeeded within 30 s of Postgres being back")
	} else {
		t.Logf("first successful call %v after Postgres answered again", time.Duration(f-back.UnixNano()).Round(time.Millisecond))
	}
	if transport.Load() > 0 {
		t.Errorf("%d calls ended in a transport error, e.g. %s", transport.Load(), transportErrs[0])
	}
	if refusedN == 0 {
		t.Fatal("no call was refused during the outage")
	}
	if perSec := float64(logBytes) / el; perSec > 2048 {
		t.Errorf("%.0f log bytes/s during the outage, want a summary (≤ 2 KiB/s)", perSec)
	}

	// Every file written has its decision and, once the spool is written,
	// its outcome.
	waitNoPending := time.Now().Add(30 * time.Second)
	for {
		var n int
		if err := db.Pool.QueryRow(ctx, `SELECT count(*) FROM tool_calls c WHERE NOT EXISTS
			(SELECT 1 FROM tool_call_outcomes o WHERE o.call_id = c.call_id)`).Scan(&n); err != nil {
			t.Fatal(err)
		}
		if n == 0 {
			break
		}
		if time.Now().After(waitNoPending) {
			t.Fatalf("%d decisions without an outcome 30 s after Postgres was back", n)
		}
		time.Sleep(100 * time.Millisecond)
	}
	rows, err := db.Pool.Query(ctx, `SELECT c.args::jsonb->>'path' FROM tool_calls c JOIN tool_call_outcomes o USING (call_id)
		WHERE c.decision = 'allow' AND o.status = 'ok'`)
	if err != nil {
		t.Fatal(err)
	}
	recorded := map[string]bool{}
	for rows.Next() {
		var p string
		if err := rows.Scan(&p); err != nil {
			t.Fatal(err)
		}
		recorded[p] = true
	}
	rows.Close()
	entries, err := os.ReadDir(sandbox)
	if err != nil {
		t.Fatal(err)
	}
	files := 0
	for _, e := range entries {
		if !strings.HasSuffix(e.Name(), ".txt") {
			continue
		}
		files++
		if p := filepath.Join(sandbox, e.Name()); !recorded[p] {
			t.Errorf("%s was written without an allow decision and an ok outcome", p)
		}
	}
	t.Logf("%d files written, %d calls ok, %d refused; all written files have decision and outcome rows", files, ok.Load(), refused.Load())
	checks, err := audit.Verify(ctx, db.Pool, "")
	if err != nil {
		t.Fatal(err)
	}
	for _, c := range checks {
		if c.Break != nil {
			t.Errorf("session %s: %v", c.SessionID, c.Break)
		}
	}
}
