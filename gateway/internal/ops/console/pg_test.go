package console

import (
	"context"
	"fmt"
	"net/http"
	"net/http/httptest"
	"os"
	"regexp"
	"sort"
	"strings"
	"testing"
	"time"

	"ironcurtain.dev/gateway/internal/audit"
	"ironcurtain.dev/gateway/internal/escalation"
	"ironcurtain.dev/gateway/internal/ops/opsapi"
	"ironcurtain.dev/gateway/internal/store/pgtest"
)

func TestMain(m *testing.M) { os.Exit(pgtest.Main(m)) }

// seed writes n tool calls of session "bench" (a tenth denied, the rest
// with an outcome), an egress event for every fifth call, a relay call for
// every tenth, egress without a call, pending and decided escalations. The
// chain columns are placeholders: these rows are for reading, not verify.
func seed(t testing.TB, db *pgtest.DB, n int) {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Minute)
	defer cancel()
	for _, q := range []string{
		`INSERT INTO sessions (id) VALUES ('bench')`,
		`INSERT INTO tool_calls (call_id, session_id, seq, at, server, tool, args, args_escaped, decision, rule, reason, prev_hash, hash)
SELECT 'call-' || g, 'bench', g, now() - ($1 - g) * interval '10 ms', 'filesystem', 'read_file',
       '{"path":"/workspace/dir-' || (g % 50) || '/file-' || g || '.txt","note":"<script>alert(' || g || ')</script>"}', true,
       CASE WHEN g % 10 = 0 THEN 'deny' ELSE 'allow' END, 'rule-' || (g % 7), 'reason for call ' || g, '\x00', '\x00'
FROM generate_series(1, $1) g`,
		`INSERT INTO tool_call_outcomes (call_id, session_id, seq, at, status, duration_ns, result_bytes, truncated, prev_hash, hash)
SELECT 'call-' || g, 'bench', $1 + g, now() - ($1 - g) * interval '10 ms' + interval '2 ms', 'ok', 2000000, 512, false, '\x00', '\x00'
FROM generate_series(1, $1) g WHERE g % 10 <> 0`,
		`INSERT INTO egress_events (id, session_id, seq, tool_call_id, at, kind, method, host, port, resolved_ip, decision, reason, bytes_up, bytes_down, duration_ns, prev_hash, hash)
SELECT 'eg-' || g, 'bench', 3 * $1 + g, CASE WHEN g % 20 = 1 THEN '' ELSE 'call-' || g END, now() - ($1 - g) * interval '10 ms' + interval '1 ms',
       'fetch', 'GET', 'example.com', 443, '93.184.215.14', 'allow', 'allowlisted', 120, 4096, 1500000, '\x00', '\x00'
FROM generate_series(1, $1, 5) g`,
		`INSERT INTO llm_calls (id, session_id, seq, at, provider, model, path, stream, status_code, input_tokens, output_tokens, cost_usd, duration_ns, prev_hash, hash)
SELECT 'llm-' || g, 'bench', 4 * $1 + g, now() - ($1 - g) * interval '10 ms' + interval '3 ms', 'anthropic', 'claude', '/v1/messages', true, 200, 1000, 200, 0.01, 900000000, '\x00', '\x00'
FROM generate_series(1, $1, 10) g`,
		`INSERT INTO escalations (id, call_id, session_id, kind, server, tool, args, rule, reason, resource, status, created_at, expires_at, decided_at, decided_by, decision_reason)
SELECT 'esc-' || g, 'call-' || g, 'bench', 'tool_call', 'filesystem', 'delete_file',
       '{"path":"/workspace/dir-' || (g % 50) || '/file-' || g || '.txt"}', 'escalate-deletes', 'deletes need approval', '/workspace/dir-' || (g % 50),
       CASE WHEN g % 100 < 2 THEN 'pending' ELSE 'approved' END, now() - ($1 - g) * interval '10 ms', now() + interval '5 minutes',
       CASE WHEN g % 100 < 2 THEN NULL ELSE now() END, CASE WHEN g % 100 < 2 THEN '' ELSE 'alice' END, ''
FROM generate_series(10, $1, 10) g`,
		`ANALYZE`,
	} {
		var args []any
		if strings.Contains(q, "$1") {
			args = append(args, n)
		}
		if _, err := db.Pool.Exec(ctx, q, args...); err != nil {
			t.Fatalf("seeding: %v\n%s", err, q)
		}
	}
}

func pgConsole(t testing.TB, db *pgtest.DB) (*Console, *escalation.PG) {
	t.Helper()
	return pgConsoleWith(t, db, nil)
}

// pgConsoleWith is a console for alice on db with a real escalator (closed
// at the end of the test); mod, if not nil, changes its dependencies first.
func pgConsoleWith(t testing.TB, db *pgtest.DB, mod func(*Deps)) (*Console, *escalation.PG) {
	t.Helper()
	esc, err := escalation.NewPG(db.Pool, escalation.Config{}, nil, nil)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = esc.Close() })
	ops, err := opsapi.NewOperators(map[string]opsapi.OperatorToken{"alice": operatorToken})
	if err != nil {
		t.Fatal(err)
	}
	d := Deps{Operators: ops, Escalations: esc, Store: PGStore{Pool: db.Pool}, Watch: esc.Watch}
	if mod != nil {
		mod(&d)
	}
	c, err := New(d)
	if err != nil {
		t.Fatal(err)
	}
	return c, esc
}

func signedIn(t testing.TB, c *Console) *client {
	t.Helper()
	id, _, err := c.sessions.create(context.Background(), "alice")
	if err != nil {
		t.Fatal(err)
	}
	return &client{t: t, h: c.Handler(), cookie: &http.Cookie{Name: cookieName, Value: id}}
}

// TestPGStore: the Postgres store behind the pages (tool calls with their
// egress nested, relay calls and egress without a call around a page, the
// escalations) on seeded rows.
func TestPGStore(t *testing.T) {
	db := pgtest.New(t, pgtest.Migrated())
	seed(t, db, 1000)
	c, _ := pgConsole(t, db)
	cl := signedIn(t, c)
	ctx := context.Background()

	eg, err := PGStore{Pool: db.Pool}.EgressOf(ctx, []string{"call-6", "call-11", "call-21", "call-nope"}, 10)
	if err != nil || len(eg) != 2 || eg[0].ToolCallID != "call-6" || eg[1].Host != "example.com" {
		t.Fatalf("EgressOf: %+v %v", eg, err)
	}
	llm, other, err := PGStore{Pool: db.Pool}.Around(ctx, "bench", time.Time{}, time.Time{}, 1000)
	if err != nil || len(llm) != 100 || len(other) != 50 {
		t.Fatalf("Around: %d relay calls, %d egress without a call, %v", len(llm), len(other), err)
	}

	page := cl.get("/ui/timeline?session=bench")
	body := page.Body.String()
	if page.Code != http.StatusOK {
		t.Fatalf("timeline: %d %s", page.Code, body)
	}
	if n := strings.Count(body, `<tbody class="call`); n != timelineRows {
		t.Errorf("timeline page lists %d calls, want %d", n, timelineRows)
	}
	if !strings.Contains(body, `id="call-call-1000"`) || !strings.Contains(body, "tr class=\"egress nested\"") {
		i := strings.Index(body, `<tbody class="call`)
		t.Errorf("the newest call or its nested egress event is missing:\n%s", body[i:min(len(body), i+3000)])
	}
	if strings.Contains(body, "<script>alert(") {
		t.Error("an argument was rendered as markup")
	}
	next := regexp.MustCompile(`cursor=([A-Za-z0-9_-]+)">Older`).FindStringSubmatch(body)
	if next == nil {
		t.Fatal("no next page link")
	}
	page2 := cl.get("/ui/timeline?session=bench&cursor=" + next[1]).Body.String()
	if !strings.Contains(page2, `id="call-call-900"`) || strings.Contains(page2, `id="call-call-901"`) {
		t.Error("the second page does not continue after the first")
	}
	if res := cl.get("/ui/timeline?session=bench&decision=deny"); !strings.Contains(res.Body.String(), `id="call-call-990"`) || strings.Contains(res.Body.String(), `id="call-call-999"`) {
		t.Error("the decision filter does not filter")
	}

	escs := cl.get("/ui/escalations").Body.String()
	if n := strings.Count(escs, `class="esc st-pending"`); n != 10 {
		t.Errorf("%d pending escalations listed, want 10", n)
	}
	if n := strings.Count(escs, `class="esc st-approved"`); n != historyRows {
		t.Errorf("%d decided escalations listed, want %d", n, historyRows)
	}
	res := cl.post("/ui/escalation/decide", map[string][]string{"csrf": {c.sessionsCSRF(t, cl)}, "id": {"esc-100"}, "action": {"deny"}, "reason": {"no"}}, "")
	if res.Code != http.StatusSeeOther {
		t.Fatalf("deny: %d %s", res.Code, res.Body.String())
	}
	var status, by string
	if err := db.Pool.QueryRow(ctx, `SELECT status, decided_by FROM escalations WHERE id = 'esc-100'`).Scan(&status, &by); err != nil || status != "denied" || by != "alice" {
		t.Fatalf("after deny: %s by %s (%v)", status, by, err)
	}
	if res := cl.get("/ui/sessions"); res.Code != http.StatusOK || !strings.Contains(res.Body.String(), "bench") {
		t.Fatalf("sessions: %d", res.Code)
	}

	// Shadow disagreements: only calls the shadow decided otherwise.
	if _, err := db.Pool.Exec(ctx, `UPDATE tool_calls SET shadow_decision = 'allow', shadow_rule = 'shadow-rule' WHERE call_id IN ('call-10', 'call-11')`); err != nil {
		t.Fatal(err)
	}
	dis, err := PGStore{Pool: db.Pool}.Disagreements(ctx, 10)
	if err != nil || len(dis) != 1 || dis[0].CallID != "call-10" || dis[0].Decision != "deny" || dis[0].ShadowRule != "shadow-rule" {
		t.Fatalf("Disagreements: %+v %v", dis, err)
	}

	// Verify walks the real chain: the seeded rows' placeholder hashes are
	// a broken chain, and the page says so.
	check, err := PGStore{Pool: db.Pool}.Verify(ctx, "bench")
	if err != nil || check.Break == nil {
		t.Fatalf("Verify: %+v %v", check, err)
	}
	res = cl.post("/ui/timeline/verify", map[string][]string{"csrf": {c.sessionsCSRF(t, cl)}, "session": {"bench"}}, "")
	if res.Code != http.StatusOK || !strings.Contains(res.Body.String(), `class="verified broken"`) {
		t.Fatalf("verify page: %d", res.Code)
	}
}

// sessionsCSRF reads the CSRF token of cl's session.
func (c *Console) sessionsCSRF(t testing.TB, cl *client) string {
	t.Helper()
	s, ok, err := c.sessions.get(context.Background(), cl.cookie.Value)
	if err != nil || !ok {
		t.Fatal("no session")
	}
	return s.csrf
}

// BenchmarkPages is the figure of docs/console.md: server time (p95) and
// bytes of the escalations page and of a session timeline with 100,000
// tool calls in Postgres (plus their outcomes, egress events and relay
// calls). Run: IC_POSTGRES_IMAGE=... go test -run '^$' -bench BenchmarkPages ./gateway/internal/ops/console/
func BenchmarkPages(b *testing.B) {
	db := pgtest.New(b, pgtest.Migrated())
	const rows = 100000
	seed(b, db, rows)
	c, _ := pgConsole(b, db)
	cl := signedIn(b, c)
	mid := audit.Cursor{Time: time.Now().Add(-rows / 2 * 10 * time.Millisecond), CallID: "call-50000"}
	for _, p := range []struct{ name, path string }{
		{"escalations", "/ui/escalations"},
		{"timeline-first", "/ui/timeline?session=bench"},
		{"timeline-middle", "/ui/timeline?session=bench&cursor=" + mid.String()},
		{"timeline-denied", "/ui/timeline?session=bench&decision=deny"},
		{"sessions", "/ui/sessions"},
	} {
		b.Run(p.name, func(b *testing.B) {
			var times []time.Duration
			size := 0
			for b.Loop() {
				start := time.Now()
				rec := httptest.NewRecorder()
				cl.h.ServeHTTP(rec, withCookie(httptest.NewRequest(http.MethodGet, "http://ops.test"+p.path, nil), cl.cookie))
				times = append(times, time.Since(start))
				if rec.Code != http.StatusOK {
					b.Fatalf("%s: %d", p.path, rec.Code)
				}
				size = rec.Body.Len()
			}
			sort.Slice(times, func(i, j int) bool { return times[i] < times[j] })
			p95 := times[len(times)*95/100]
			b.ReportMetric(float64(p95.Microseconds())/1000, "p95-ms")
			b.ReportMetric(float64(size), "bytes/page")
			b.Logf("%s: p95 %s over %d requests, %s", p.name, p95, len(times), fmt.Sprint(size, " bytes"))
		})
	}
}

func withCookie(r *http.Request, ck *http.Cookie) *http.Request {
	r.AddCookie(ck)
	return r
}
