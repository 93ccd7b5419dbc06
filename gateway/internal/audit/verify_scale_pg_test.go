package audit

import (
	"context"
	"encoding/json"
	"fmt"
	"math/rand/v2"
	"os"
	"runtime"
	"runtime/debug"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgxpool"
	"golang.org/x/sync/errgroup"

	"ironcurtain.dev/gateway/internal/store/pgtest"
	"ironcurtain.dev/gateway/internal/testenv"
)

// EnvScaleRows sets the number of chained records TestVerifyQueryScale
// writes (default scaleRowsDefault; docs/performance.md "Scaling" ran it
// at 10^3 to 10^7).
const EnvScaleRows = "IC_SCALE_ROWS"

const scaleRowsDefault = 1000

// scaleHeapBudget bounds the heap growth of verify and query whatever the
// number of rows: they stream.
const scaleHeapBudget = 64 << 20

// chanSource is a pgx.CopyFromSource fed by a channel.
type chanSource struct {
	rows <-chan []any
	row  []any
}

func (s *chanSource) Next() bool {
	r, ok := <-s.rows
	s.row = r
	return ok
}
func (s *chanSource) Values() ([]any, error) { return s.row, nil }
func (s *chanSource) Err() error             { return nil }

// scaleCall names the call of the i-th tool call of writeScaleChain.
func scaleCall(session string, i int64) string { return fmt.Sprintf("%s-c%09d", session, i) }

// writeScaleChain writes n chained records of one session with COPY, in
// chain order as the gateway writes them: per call a decision (every
// seventh denied), every fifth call a fetch egress row of it, then its
// outcome. The hashes are computed as the sink computes them (chainFields,
// chainHash), so the chain is intact. It returns the call ids' count.
func writeScaleChain(t testing.TB, ctx context.Context, pool *pgxpool.Pool, session string, n int64) int64 {
	t.Helper()
	calls, outcomes, egress := make(chan []any, 1024), make(chan []any, 1024), make(chan []any, 1024)
	g, gctx := errgroup.WithContext(ctx)
	copyTo := func(table string, cols []string, rows chan []any) {
		g.Go(func() error {
			_, err := pool.CopyFrom(gctx, pgx.Identifier{table}, cols, &chanSource{rows: rows})
			for range rows { // drain so the generator never blocks on a failed copy
			}
			return err
		})
	}
	copyTo("tool_calls", []string{"call_id", "session_id", "seq", "at", "server", "tool", "args", "decision", "rule", "reason", "prev_hash", "hash"}, calls)
	copyTo("tool_call_outcomes", []string{"call_id", "session_id", "seq", "at", "status", "duration_ns", "result_bytes", "truncated", "error", "prev_hash", "hash"}, outcomes)
	copyTo("egress_events", []string{"id", "session_id", "seq", "tool_call_id", "at", "kind", "method", "host", "port", "resolved_ip", "decision",
		"reason", "rule", "bytes_up", "bytes_down", "duration_ns", "error", "prev_hash", "hash"}, egress)

	base := time.Date(2026, 1, 1, 0, 0, 0, 0, time.UTC)
	var (
		seq  int64
		prev = genesis
		call int64
		send = func(ch chan []any, row []any) bool {
			select {
			case ch <- row:
				return true
			case <-gctx.Done():
				return false
			}
		}
	)
	next := func(e Event) (int64, []byte, []byte, bool) {
		if seq >= n {
			return 0, nil, nil, false
		}
		seq++
		kind, sess, fields := chainFields(e)
		h := chainHash(prev, kind, sess, seq, fields)
		p := prev
		prev = h
		return seq, p, h, true
	}
	func() {
		defer close(calls)
		defer close(outcomes)
		defer close(egress)
		for seq < n {
			call++
			id := scaleCall(session, call)
			at := base.Add(time.Duration(seq) * time.Millisecond)
			d := &ToolCallDecision{CallID: id, SessionID: session, Time: at, Server: "filesystem", Tool: "read_file",
				Args: json.RawMessage(`{"path":"/workspace/f` + strconv.FormatInt(call, 10) + `.txt"}`), Decision: "allow",
				Rule: "sandbox-read", Reason: "inside the sandbox"}
			status := OutcomeOK
			if call%7 == 0 {
				d.Decision, d.Rule, d.Reason, status = "deny", "protected-path", "outside the sandbox", OutcomeDenied
			}
			s, p, h, ok := next(d)
			if !ok || !send(calls, []any{d.CallID, session, s, d.Time, d.Server, d.Tool, string(d.Args), d.Decision, d.Rule, d.Reason, p, h}) {
				return
			}
			if call%5 == 0 && d.Decision == "allow" {
				ev := NewEgressEvent(EgressFields{ID: id + "-e", SessionID: session, ToolCallID: id, Time: at, Kind: "fetch",
					Method: "GET", Host: "example.com", Port: 443})
				ev.ResolvedIP, ev.Decision, ev.Reason, ev.Rule = "93.184.215.14", "allow", "listed", "example.com"
				ev.BytesUp, ev.BytesDown, ev.Duration = 512, 20480, 30*time.Millisecond
				s, p, h, ok := next(ev)
				if !ok || !send(egress, []any{ev.ID, session, s, ev.ToolCallID, ev.Time, ev.Kind, ev.Method, ev.Host, ev.Port, ev.ResolvedIP,
					ev.Decision, ev.Reason, ev.Rule, ev.BytesUp, ev.BytesDown, int64(ev.Duration), ev.Error, p, h}) {
					return
				}
			}
			o := &ToolCallOutcome{CallID: id, SessionID: session, Time: at.Add(time.Millisecond / 2), Status: status,
				Duration: 400 * time.Microsecond, ResultBytes: 1200}
			s, p, h, ok = next(o)
			if !ok || !send(outcomes, []any{o.CallID, session, s, o.Time, o.Status, int64(o.Duration), int64(o.ResultBytes), o.Truncated, o.Error, p, h}) {
				return
			}
		}
	}()
	if err := g.Wait(); err != nil {
		t.Fatalf("writing %d records: %v", n, err)
	}
	if _, err := pool.Exec(ctx, `INSERT INTO sessions (id, chain_seq, chain_hash) VALUES ($1, $2, $3)`, session, seq, prev); err != nil {
		t.Fatal(err)
	}
	if _, err := pool.Exec(ctx, `ANALYZE tool_calls, tool_call_outcomes, egress_events`); err != nil {
		t.Fatal(err)
	}
	return call
}

// peakMem samples the heap in use and the resident set every 10 ms while
// f runs and returns their peaks above what they were before (after a GC).
func peakMem(f func()) (heap, rss int64) {
	debug.FreeOSMemory()
	var ms runtime.MemStats
	runtime.ReadMemStats(&ms)
	heap0, rss0 := int64(ms.HeapInuse), procRSS()
	var (
		mu             sync.Mutex
		peakH, peakR   = heap0, rss0
		stop, finished = make(chan struct{}), make(chan struct{})
	)
	go func() {
		defer close(finished)
		tick := time.NewTicker(10 * time.Millisecond)
		defer tick.Stop()
		for {
			var ms runtime.MemStats
			runtime.ReadMemStats(&ms)
			r := procRSS()
			mu.Lock()
			peakH, peakR = max(peakH, int64(ms.HeapInuse)), max(peakR, r)
			mu.Unlock()
			select {
			case <-stop:
				return
			case <-tick.C:
			}
		}
	}()
	f()
	close(stop)
	<-finished
	return peakH - heap0, peakR - rss0
}

// procRSS is the process's resident set in bytes (0 where /proc is missing).
func procRSS() int64 {
	kib, _ := testenv.ProcStatusKiB("self", "VmRSS")
	return kib << 10
}

// TestVerifyQueryScale writes one session of IC_SCALE_ROWS chained records
// (default 1,000) and runs `audit verify` and `audit query` over it: verify
// walks every record in bounded memory and reports records/s; query's
// newest page, a deep page (keyset cursor in the middle) and the filtered
// listings return at once; a record edited, deleted or two records swapped
// in the middle of the chain are found and named. Run with -v for the
// figures (docs/performance.md "Scaling").
func TestVerifyQueryScale(t *testing.T) {
	n := int64(scaleRowsDefault)
	if v := os.Getenv(EnvScaleRows); v != "" {
		var err error
		if n, err = strconv.ParseInt(v, 10, 64); err != nil || n < 10 {
			t.Fatalf("%s=%q: want a number of rows >= 10", EnvScaleRows, v)
		}
	}
	db := pgtest.New(t, pgtest.Migrated())
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Hour)
	defer cancel()
	const session = "scale"
	start := time.Now()
	calls := writeScaleChain(t, ctx, db.Pool, session, n)
	t.Logf("wrote %d records (%d calls) in %.1fs", n, calls, time.Since(start).Seconds())

	verify := func() SessionCheck {
		t.Helper()
		var checks []SessionCheck
		heap, rss := peakMem(func() {
			err := VerifyEach(ctx, db.Pool, session, func(c SessionCheck) error {
				checks = append(checks, c)
				return nil
			})
			if err != nil {
				t.Fatal(err)
			}
		})
		if len(checks) != 1 {
			t.Fatalf("verify = %+v", checks)
		}
		c := checks[0]
		t.Logf("verify: %d records in %.2fs (%.0f records/s); peak growth above idle: heap %.1f MB, RSS %.1f MB",
			c.Records, c.Seconds, c.RecordsPerSecond, float64(heap)/1e6, float64(rss)/1e6)
		if heap > scaleHeapBudget {
			t.Fatalf("verify of %d records grew the heap by %d bytes (budget %d)", n, heap, scaleHeapBudget)
		}
		return c
	}
	c := verify()
	// The chain's last call may have no outcome yet (n cut it): one gap.
	if c.Break != nil || c.Records != n || c.GapCount > 1 || c.RecordsPerSecond <= 0 {
		t.Fatalf("intact chain: %+v", c)
	}

	t.Run("query", func(t *testing.T) {
		mid := scaleCall(session, calls/2)
		var midAt time.Time
		if err := db.Pool.QueryRow(ctx, `SELECT at FROM tool_calls WHERE call_id = $1`, mid).Scan(&midAt); err != nil {
			t.Fatal(err)
		}
		cursor := Cursor{Time: midAt, CallID: mid}
		denied := min(int((calls)/7), DefaultQueryLimit)
		for _, q := range []struct {
			name  string
			f     Filter
			want  int
			check func(t *testing.T, first *ToolCall)
		}{
			{"newest page", Filter{}, DefaultQueryLimit, nil},
			{"newest page of the session", Filter{Session: session}, DefaultQueryLimit, nil},
			{"newest denials", Filter{Decision: "deny"}, denied, func(t *testing.T, c *ToolCall) {
				if c.Decision != "deny" {
					t.Fatalf("first = %+v", c)
				}
			}},
			{"deep page (cursor in the middle)", Filter{Cursor: cursor}, DefaultQueryLimit, func(t *testing.T, c *ToolCall) {
				if c.CallID != scaleCall(session, calls/2-1) {
					t.Fatalf("first after the cursor = %s", c.CallID)
				}
			}},
			{"deep page of the session, largest page", Filter{Session: session, Cursor: cursor, Limit: MaxQueryLimit}, int(min(calls/2-1, MaxQueryLimit)), nil},
		} {
			var (
				got   int
				first *ToolCall
			)
			start := time.Now()
			heap, _ := peakMem(func() {
				err := QueryEach(ctx, db.Pool, q.f, func(c *ToolCall) error {
					if got++; got == 1 {
						cp := *c
						first = &cp
					}
					return nil
				})
				if err != nil {
					t.Fatal(err)
				}
			})
			t.Logf("query %s: %d rows in %.1f ms; heap growth %.1f MB", q.name, got, float64(time.Since(start).Microseconds())/1e3, float64(heap)/1e6)
			if got != q.want {
				t.Fatalf("query %s: %d rows, want %d", q.name, got, q.want)
			}
			if q.check != nil && first != nil {
				q.check(t, first)
			}
			if heap > scaleHeapBudget {
				t.Fatalf("query %s grew the heap by %d bytes", q.name, heap)
			}
		}
	})

	// Tampering in the middle of the chain, each undone after it is found:
	// an allowed call without egress, so its outcome directly follows it.
	k := calls / 2
	for k%5 == 0 || k%7 == 0 {
		k++
	}
	midCall := scaleCall(session, k)
	var midSeq int64
	if err := db.Pool.QueryRow(ctx, `SELECT seq FROM tool_calls WHERE call_id = $1`, midCall).Scan(&midSeq); err != nil {
		t.Fatal(err)
	}
	exec := func(sql string, args ...any) {
		t.Helper()
		if _, err := db.Pool.Exec(ctx, sql, args...); err != nil {
			t.Fatal(err)
		}
	}
	for _, tc := range []struct {
		name         string
		tamper, undo string
		table, rowID string
		seq          int64
		problem      string
	}{
		{"row edited", `UPDATE tool_calls SET reason = 'nothing to see' WHERE call_id = $1`,
			`UPDATE tool_calls SET reason = 'inside the sandbox' WHERE call_id = $1`,
			"tool_calls", midCall, midSeq, "row edited"},
		{"row deleted", `WITH d AS (DELETE FROM tool_call_outcomes WHERE call_id = $1 RETURNING *) INSERT INTO scale_saved SELECT * FROM d`,
			`INSERT INTO tool_call_outcomes SELECT * FROM scale_saved WHERE call_id = $1`,
			"", "", midSeq + 1, fmt.Sprintf("record seq %d is missing", midSeq+1)},
		{"rows reordered", `UPDATE tool_calls SET seq = seq + 1 WHERE call_id = $1; UPDATE tool_call_outcomes SET seq = seq - 1 WHERE call_id = $1`,
			`UPDATE tool_calls SET seq = seq - 1 WHERE call_id = $1; UPDATE tool_call_outcomes SET seq = seq + 1 WHERE call_id = $1`,
			"tool_call_outcomes", midCall, midSeq, "prev_hash does not match"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			exec(`CREATE TABLE IF NOT EXISTS scale_saved (LIKE tool_call_outcomes)`)
			// Multi-statement SQL cannot take parameters: quote the id
			// (ours, no quotes in it).
			lit := "'" + midCall + "'"
			exec(strings.ReplaceAll(tc.tamper, "$1", lit))
			c := verify()
			exec(strings.ReplaceAll(tc.undo, "$1", lit))
			b := c.Break
			if b == nil || b.Seq != tc.seq || (tc.table != "" && b.Table != tc.table) || (tc.rowID != "" && b.RowID != tc.rowID) ||
				!strings.Contains(b.Problem, tc.problem) {
				t.Fatalf("break = %+v, want seq %d %s %s %q", b, tc.seq, tc.table, tc.rowID, tc.problem)
			}
			if !strings.Contains(b.String(), strconv.FormatInt(tc.seq, 10)) {
				t.Fatalf("the report %q does not name seq %d", b, tc.seq)
			}
		})
	}
	if c := verify(); c.Break != nil || c.Records != n {
		t.Fatalf("after undoing: %+v", c)
	}
}

// TestVerifyGapsQueryMatchesWalk is the differential test of the gap query
// that replaces the walk's open-decision map when more decisions are open
// than maxOpenDecisions: on a session with every kind of gap (and more than
// MaxReportedGaps of them) both paths report the same gaps and count.
func TestVerifyGapsQueryMatchesWalk(t *testing.T) {
	db := pgtest.New(t, pgtest.Migrated())
	ctx := pgCtx(t)
	sink, _ := newTestSink(t, db, Options{})
	rng := rand.New(rand.NewPCG(27, 3))
	const session = "diff"
	var escalations [][3]string // id, call, consumed by
	for i := range 400 {
		id := fmt.Sprintf("d%03d", i)
		d := &ToolCallDecision{CallID: id, SessionID: session, Server: "git", Tool: "push", Args: json.RawMessage(`{}`)}
		switch rng.IntN(3) {
		case 0:
			d.Decision = "allow"
		case 1:
			d.Decision = "deny"
		default:
			d.Decision, d.EscalationID = "escalate", "e-"+id
			consumed := ""
			if rng.IntN(2) == 0 {
				consumed = id
			}
			escalations = append(escalations, [3]string{d.EscalationID, id, consumed})
		}
		events := []Event{d}
		if rng.IntN(3) == 0 { // egress of the call
			events = append(events, &EgressEvent{SessionID: session, ToolCallID: id, Kind: "fetch", Host: "example.com", Port: 443,
				Decision: "allow", Reason: "listed"})
		}
		if rng.IntN(2) == 0 { // its outcome
			events = append(events, &ToolCallOutcome{CallID: id, SessionID: session, Status: OutcomeOK})
		}
		if rng.IntN(8) == 0 { // egress of no call
			events = append(events, &EgressEvent{SessionID: session, Kind: "connect", Host: "example.com", Port: 443, Decision: "allow", Reason: "listed"})
		}
		for _, e := range events {
			if err := sink.Record(ctx, e); err != nil {
				t.Fatal(err)
			}
		}
	}
	for _, e := range escalations {
		var consumed any
		if e[2] != "" {
			consumed = e[2]
		}
		if _, err := db.Pool.Exec(ctx, `INSERT INTO escalations (id, call_id, session_id, kind, status, expires_at, decided_at,
			consumed_by_call_id, consumed_at) VALUES ($1, $2, $3, 'tool_call', 'approved', now(), now(), $4, CASE WHEN $4::text IS NULL THEN NULL ELSE now() END)`,
			e[0], e[1], session, consumed); err != nil {
			t.Fatal(err)
		}
	}
	check := func(maxOpen int) SessionCheck {
		t.Helper()
		defer func(old int) { maxOpenDecisions = old }(maxOpenDecisions)
		maxOpenDecisions = maxOpen
		c, err := verifySession(ctx, db.Pool, session)
		if err != nil {
			t.Fatal(err)
		}
		c.Seconds, c.RecordsPerSecond = 0, 0
		return c
	}
	walk, query := check(1<<20), check(0)
	kinds := map[string]int{}
	for _, g := range walk.Gaps {
		kinds[g.Kind]++
	}
	if walk.Break != nil || walk.GapCount <= MaxReportedGaps || len(kinds) != 3 {
		t.Fatalf("the session does not exercise the gaps: %d gaps, kinds %v, break %v", walk.GapCount, kinds, walk.Break)
	}
	a, _ := json.Marshal(walk)
	b, _ := json.Marshal(query)
	if string(a) != string(b) {
		t.Fatalf("walk and query differ:\nwalk  %s\nquery %s", a, b)
	}
	// Between the two: the map overflows part-way through the walk.
	if m, _ := json.Marshal(check(10)); string(m) != string(a) {
		t.Fatalf("walk and overflow part-way differ:\nwalk %s\nmid  %s", a, m)
	}
}

// TestVerifyPageBoundaries walks a chain in pages of 7 records: an intact
// chain verifies whole, and a second record with the same seq (a row
// inserted beside any of the first 20, so also beside each page's last and
// first) is found at that seq, wherever the page boundary falls.
func TestVerifyPageBoundaries(t *testing.T) {
	db := pgtest.New(t, pgtest.Migrated())
	ctx := pgCtx(t)
	defer func(old int) { chainPageRows = old }(chainPageRows)
	chainPageRows = 7
	const session, n = "pages", 60
	writeScaleChain(t, ctx, db.Pool, session, n)
	c, err := verifySession(ctx, db.Pool, session)
	if err != nil || c.Break != nil || c.Records != n {
		t.Fatalf("intact chain in pages: %+v %v", c, err)
	}
	for seq := int64(1); seq <= 20; seq++ {
		if _, err := db.Pool.Exec(ctx, `INSERT INTO llm_calls (id, session_id, seq, at, provider, model, path, stream, status_code,
			input_tokens, output_tokens, cost_usd, duration_ns, prev_hash, hash) VALUES ('dup', $1, $2, now(), 'anthropic', 'm', '/v1/messages',
			false, 200, 1, 1, 0, 1, '\x00'::bytea, '\x00'::bytea)`, session, seq); err != nil {
			t.Fatal(err)
		}
		c, err := verifySession(ctx, db.Pool, session)
		if _, derr := db.Pool.Exec(ctx, `DELETE FROM llm_calls WHERE id = 'dup'`); derr != nil {
			t.Fatal(derr)
		}
		if err != nil || c.Break == nil || c.Break.Seq != seq {
			t.Fatalf("a second record at seq %d: %+v %v", seq, c.Break, err)
		}
	}
}
