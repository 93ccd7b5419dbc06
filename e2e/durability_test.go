package e2e_test

import (
	"context"
	"fmt"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"ironcurtain.dev/e2e/internal/stack"
)

// durabilitySession is the agent session the durability scenarios use (the
// outage scenario's token; their files live in another directory).
const durabilitySession = "outage"

// loadTranscript writes n files named <prefix>-<i>.txt under dir, one call
// each, and reports each as ok or refused; a refusal does not stop it.
func loadTranscript(name, dir, prefix string, n int) string {
	return `name: ` + name + `
steps:
  - code: |
      const out = [];
      try { filesystem.create_directory({ path: "` + dir + `" }); } catch (e: any) { out.push("mkdir refused"); }
      for (let i = 0; i < ` + strconv.Itoa(n) + `; i++) {
        const p = "` + dir + `/` + prefix + `-" + i + ".txt";
        try {
          filesystem.write_file({ path: p, content: "` + prefix + ` " + i + "\n" });
          out.push("ok " + i);
        } catch (e: any) {
          out.push("refused " + i);
        }
      }
      return out.length + " calls";
  - expect: { status: ok, contains: ["calls"] }
    final: done.
`
}

// durabilityFault is one way Postgres goes away and comes back.
type durabilityFault struct {
	name    string
	down    func(ctx context.Context, s *stack.Stack) error
	up      func(ctx context.Context, s *stack.Stack) error
	outage  time.Duration
	workers int
}

// TestPostgresDurability drives concurrent agent runs that write files
// while Postgres is stopped, killed or paused mid-load, then brought back.
// It asserts issue 11's durability items against the real images:
//
//   - every call that ran (its file exists) has a committed allow decision
//     (no call ran without one) and, once Postgres is back and the spool
//     is written, its outcome row (status ok): nothing is lost (item 6);
//   - no decision row is left without an outcome once the spool is empty,
//     except none at all (refused calls carry a refused outcome);
//   - the session's hash chain verifies;
//   - it logs the time from Postgres back to the first successful call.
func TestPostgresDurability(t *testing.T) {
	s := topology(t)
	faults := []durabilityFault{
		{name: "stop", down: func(ctx context.Context, s *stack.Stack) error { return s.StopPostgres(ctx) },
			up: func(ctx context.Context, s *stack.Stack) error { return s.StartPostgres(ctx) }, outage: 12 * time.Second, workers: 3},
		{name: "kill", down: func(ctx context.Context, s *stack.Stack) error { return s.KillPostgres(ctx) },
			up: func(ctx context.Context, s *stack.Stack) error { return s.StartPostgres(ctx) }, outage: 12 * time.Second, workers: 3},
		{name: "pause", down: func(ctx context.Context, s *stack.Stack) error { return s.PausePostgres(ctx) },
			up: func(ctx context.Context, s *stack.Stack) error { return s.UnpausePostgres(ctx) }, outage: 15 * time.Second, workers: 3},
	}
	for _, f := range faults {
		t.Run(f.name, func(t *testing.T) {
			ctx := ctxFor(t, 10*time.Minute)
			if err := s.WaitGatewayReady(ctx, 2*time.Minute); err != nil {
				t.Fatal(err)
			}
			runDurability(t, ctx, s, f)
		})
	}
}

func runDurability(t *testing.T, ctx context.Context, s *stack.Stack, f durabilityFault) {
	dir := "/workspace/durability/" + f.name
	var (
		stop   atomic.Bool
		rounds atomic.Int64
		wg     sync.WaitGroup
		mu     sync.Mutex
		errs   []string
	)
	for w := range f.workers {
		wg.Go(func() {
			for round := 0; !stop.Load() && ctx.Err() == nil; round++ {
				prefix := fmt.Sprintf("w%d-r%d", w, round)
				name := fmt.Sprintf("durability-%s-%s", f.name, prefix)
				r, err := s.RunTranscript(ctx, durabilitySession, name, []byte(loadTranscript(name, dir, prefix, 40)), "write files", "--max-tool-calls", "100")
				rounds.Add(1)
				if err != nil {
					mu.Lock()
					errs = append(errs, err.Error())
					mu.Unlock()
					continue
				}
				if r.Code != 0 {
					// Refusals during the outage may end a run early;
					// what ran is judged from the records below.
					t.Logf("%s: run exited %d: %s", name, r.Code, lastLines(r.Stderr, 3))
				}
			}
		})
	}
	restore := func() {}
	t.Cleanup(func() { restore() })

	time.Sleep(3 * time.Second) // load is running
	if err := f.down(ctx, s); err != nil {
		stop.Store(true)
		wg.Wait()
		t.Fatal(err)
	}
	restore = func() { _ = f.up(context.WithoutCancel(ctx), s) }
	time.Sleep(f.outage)
	if err := f.up(ctx, s); err != nil {
		stop.Store(true)
		wg.Wait()
		t.Fatal(err)
	}
	restore = func() {}
	back := time.Now()
	time.Sleep(10 * time.Second) // load goes on after the database is back
	stop.Store(true)
	wg.Wait()
	if err := s.WaitGatewayReady(ctx, 2*time.Minute); err != nil {
		t.Fatal(err)
	}
	t.Logf("%s: %d agent runs of 40 writes", f.name, rounds.Load())
	for _, e := range errs {
		t.Errorf("agent run: %s", e)
	}

	// Time from Postgres back to the first successful call.
	first, err := s.SQL(ctx, `SELECT coalesce(extract(epoch FROM min(c.at))::text, '') FROM tool_calls c
		JOIN tool_call_outcomes o USING (call_id)
		WHERE c.session_id = `+stack.Quote(durabilitySession)+` AND o.status = 'ok'
		  AND c.at >= to_timestamp(`+strconv.FormatFloat(float64(back.UnixMicro())/1e6, 'f', 6, 64)+`)`)
	if err != nil {
		t.Fatal(err)
	}
	if first == "" {
		t.Errorf("%s: no call succeeded after Postgres came back", f.name)
	} else if sec, err := strconv.ParseFloat(first, 64); err == nil {
		t.Logf("%s: first successful call %.2f s after Postgres was back", f.name, sec-float64(back.UnixMicro())/1e6)
	}

	// Wait for the spool: every allowed write_file decision of this
	// scenario gets its outcome row.
	like := stack.Quote("%" + dir + "/%")
	pendingSQL := `SELECT count(*) FROM tool_calls c WHERE c.session_id = ` + stack.Quote(durabilitySession) + `
		AND c.args LIKE ` + like + ` AND NOT EXISTS (SELECT 1 FROM tool_call_outcomes o WHERE o.call_id = c.call_id)`
	deadline := time.Now().Add(90 * time.Second)
	for {
		n, err := s.SQL(ctx, pendingSQL)
		if err != nil {
			t.Fatal(err)
		}
		if n == "0" {
			break
		}
		if time.Now().After(deadline) {
			t.Errorf("%s: %s decisions still without an outcome 90 s after Postgres was back (spool not written?)", f.name, n)
			break
		}
		time.Sleep(time.Second)
	}

	// Every file that exists was written by a call with a committed allow
	// decision and an ok outcome.
	var rows []struct {
		Args     string `json:"args"`
		Decision string `json:"decision"`
		Outcome  string `json:"outcome"`
		Error    string `json:"error"`
	}
	if err := s.QueryJSON(ctx, `SELECT c.args, c.decision, coalesce(o.status, '') AS outcome, coalesce(o.error, '') AS error
		FROM tool_calls c LEFT JOIN tool_call_outcomes o USING (call_id)
		WHERE c.session_id = `+stack.Quote(durabilitySession)+` AND c.tool = 'write_file' AND c.args LIKE `+like, &rows); err != nil {
		t.Fatal(err)
	}
	ran := map[string]bool{}
	statuses := map[string]int{}
	for _, r := range rows {
		statuses[r.Decision+"/"+r.Outcome]++
		if r.Decision == "allow" && r.Outcome == "ok" {
			if i := strings.Index(r.Args, dir+"/"); i >= 0 {
				rest := r.Args[i+len(dir)+1:]
				if j := strings.Index(rest, ".txt"); j >= 0 {
					ran[rest[:j+4]] = true
				}
			}
		}
	}
	t.Logf("%s: decisions/outcomes %v", f.name, statuses)
	files, err := s.GatewayPaths(ctx, dir)
	if err != nil {
		t.Fatal(err)
	}
	written := 0
	for _, p := range files {
		if !strings.HasSuffix(p, ".txt") {
			continue
		}
		written++
		name := p[strings.LastIndex(p, "/")+1:]
		if !ran[name] {
			t.Errorf("%s: %s exists but has no allow decision with an ok outcome (ran unaudited or its outcome was lost)", f.name, p)
		}
	}
	if written == 0 {
		t.Fatalf("%s: no file was written: the load did not run", f.name)
	}
	t.Logf("%s: %d files written, all with decision and outcome rows", f.name, written)
	verifyChain(t, ctx, s, durabilitySession, int64(written))
}
