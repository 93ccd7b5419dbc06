package escalation

import (
	"context"
	"encoding/json"
	"errors"
	"io"
	"net/http"
	"net/http/httptest"
	"os"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/prometheus/client_golang/prometheus/testutil"

	"ironcurtain.dev/gateway/internal/store/pgtest"
)

func TestMain(m *testing.M) { os.Exit(pgtest.Main(m)) }

func newTestPG(t testing.TB, db *pgtest.DB, cfg Config) *PG {
	t.Helper()
	p, err := NewPG(db.Pool, cfg, nil, nil)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = p.Close() })
	waitListening(t, p)
	return p
}

func waitListening(t testing.TB, p *PG) {
	t.Helper()
	select {
	case <-p.listener.ready:
	case <-time.After(30 * time.Second):
		t.Fatal("listener did not connect")
	}
}

func testCtx(t testing.TB) context.Context {
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	t.Cleanup(cancel)
	return ctx
}

func req(call string) Request {
	return Request{CallID: call, SessionID: "s1", Kind: KindToolCall, Server: "filesystem", Tool: "delete_file",
		Args: json.RawMessage(`{"path":"/w/src/a.txt","token":"secret-value"}`), Rule: "escalate-deletes", Reason: "deletes need approval",
		Resource: "/w/src"}
}

type outcome struct {
	res Result
	err error
	at  time.Time
}

// escalateAsync starts Escalate and returns the escalation id once the row
// exists, plus a channel with the outcome.
func escalateAsync(t testing.TB, p *PG, ctx context.Context, r Request) (string, <-chan outcome) {
	t.Helper()
	ch := make(chan outcome, 1)
	go func() {
		res, err := p.Escalate(ctx, r)
		ch <- outcome{res, err, time.Now()}
	}()
	deadline := time.Now().Add(30 * time.Second)
	for time.Now().Before(deadline) {
		if e, err := p.getByCallID(ctx, r.CallID); err == nil {
			return e.ID, ch
		}
		time.Sleep(10 * time.Millisecond)
	}
	t.Fatal("escalation row never appeared")
	return "", nil
}

func TestApproveAndDeny(t *testing.T) {
	tests := []struct {
		name       string
		approve    bool
		wantStatus string
	}{
		{name: "approve", approve: true, wantStatus: StatusApproved},
		{name: "deny", approve: false, wantStatus: StatusDenied},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			db := pgtest.New(t, pgtest.Migrated())
			ctx := testCtx(t)
			p := newTestPG(t, db, Config{})
			id, done := escalateAsync(t, p, ctx, req("c1"))
			e, err := p.Get(ctx, id)
			if err != nil || e.Status != StatusPending {
				t.Fatalf("Get = %+v, %v", e, err)
			}
			if strings.Contains(string(e.Args), "secret-value") {
				t.Fatalf("stored args not redacted: %s", e.Args)
			}
			if _, err := p.Decide(ctx, id, Decision{Approve: tt.approve, By: "alice", Reason: "checked"}); err != nil {
				t.Fatal(err)
			}
			o := <-done
			if o.err != nil {
				t.Fatal(o.err)
			}
			if o.res.Status != tt.wantStatus || o.res.Approved != tt.approve || o.res.DecidedBy != "alice" || o.res.Reason != "checked" || o.res.ID != id {
				t.Fatalf("result = %+v", o.res)
			}
			if _, err := p.Decide(ctx, id, Decision{Approve: true, By: "bob"}); !errors.Is(err, ErrAlreadyDecided) {
				t.Fatalf("second decision = %v, want ErrAlreadyDecided", err)
			}
		})
	}
}

func TestDecideErrors(t *testing.T) {
	db := pgtest.New(t, pgtest.Migrated())
	ctx := testCtx(t)
	p := newTestPG(t, db, Config{})
	id, done := escalateAsync(t, p, ctx, req("c1"))
	tests := []struct {
		name string
		id   string
		d    Decision
		want error
	}{
		{name: "unknown id", id: "nope", d: Decision{Approve: true, By: "a"}, want: ErrNotFound},
		{name: "no operator", id: id, d: Decision{Approve: true}, want: ErrInvalidDecision},
		{name: "similar on deny", id: id, d: Decision{By: "a", Similar: ScopeExact}, want: ErrInvalidDecision},
		{name: "bad scope", id: id, d: Decision{Approve: true, By: "a", Similar: "everything"}, want: ErrInvalidDecision},
		{name: "domain scope on a path", id: id, d: Decision{Approve: true, By: "a", Similar: ScopeDomain}, want: ErrInvalidDecision},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			if _, err := p.Decide(ctx, tt.id, tt.d); !errors.Is(err, tt.want) {
				t.Fatalf("Decide = %v, want %v", err, tt.want)
			}
		})
	}
	// Still pending after the refused decisions.
	if e, _ := p.Get(ctx, id); e.Status != StatusPending {
		t.Fatalf("status = %s after invalid decisions", e.Status)
	}
	_, _ = p.Decide(ctx, id, Decision{By: "a"})
	<-done
	if _, err := p.Escalate(ctx, Request{}); !errors.Is(err, ErrInvalidRequest) {
		t.Fatalf("Escalate without call id = %v", err)
	}
}

// TestTimeoutExpires: nobody decides; the call gets a denied (expired)
// result, not an error, and the row records it.
func TestTimeoutExpires(t *testing.T) {
	db := pgtest.New(t, pgtest.Migrated())
	ctx := testCtx(t)
	p := newTestPG(t, db, Config{Timeout: 700 * time.Millisecond})
	start := time.Now()
	res, err := p.Escalate(ctx, req("c1"))
	if err != nil {
		t.Fatal(err)
	}
	if res.Approved || res.Status != StatusExpired || res.DecidedBy != "timeout" {
		t.Fatalf("result = %+v", res)
	}
	if took := time.Since(start); took < 600*time.Millisecond || took > 10*time.Second {
		t.Fatalf("took %v for a 700ms timeout", took)
	}
	e, err := p.Get(ctx, res.ID)
	if err != nil || e.Status != StatusExpired || e.DecidedAt == nil {
		t.Fatalf("row = %+v, %v", e, err)
	}
	if _, err := p.Decide(ctx, res.ID, Decision{Approve: true, By: "late"}); !errors.Is(err, ErrAlreadyDecided) {
		t.Fatalf("late approval = %v, want ErrAlreadyDecided", err)
	}
}

// TestApprovalOnOtherReplica: the call waits on gateway A; the operator's
// decision arrives through gateway B (its own pool and listener).
func TestApprovalOnOtherReplica(t *testing.T) {
	db := pgtest.New(t, pgtest.Migrated())
	ctx := testCtx(t)
	a := newTestPG(t, db, Config{PollInterval: time.Minute}) // only NOTIFY can wake it in time
	b, err := NewPG(pgtest.Connect(t, db), Config{}, nil, nil)
	if err != nil {
		t.Fatal(err)
	}
	defer b.Close()
	id, done := escalateAsync(t, a, ctx, req("c1"))
	time.Sleep(100 * time.Millisecond)
	decided := time.Now()
	if _, err := b.Decide(ctx, id, Decision{Approve: true, By: "op-on-b"}); err != nil {
		t.Fatal(err)
	}
	select {
	case o := <-done:
		if o.err != nil || !o.res.Approved || o.res.DecidedBy != "op-on-b" {
			t.Fatalf("outcome = %+v", o)
		}
		t.Logf("approve on B -> call on A resumed in %v", o.at.Sub(decided))
		if o.at.Sub(decided) > 5*time.Second {
			t.Fatalf("resumed after %v: not woken by NOTIFY", o.at.Sub(decided))
		}
	case <-time.After(20 * time.Second):
		t.Fatal("waiter on A was not woken by the approval on B")
	}
}

// TestPendingSurvivesRestart: gateway A dies while a call waits; the call
// fails with a clear error, the escalation stays pending; an operator
// approves it through gateway B; the retried call (same call id) on B
// re-attaches and resumes approved. A pending escalation whose deadline
// passed while no gateway ran is expired, not left pending.
func TestPendingSurvivesRestart(t *testing.T) {
	db := pgtest.New(t, pgtest.Migrated())
	ctx := testCtx(t)
	a, err := NewPG(db.Pool, Config{}, nil, nil)
	if err != nil {
		t.Fatal(err)
	}
	waitListening(t, a)
	id, done := escalateAsync(t, a, ctx, req("c1"))
	_ = a.Close() // the gateway stops
	o := <-done
	if !errors.Is(o.err, ErrShuttingDown) {
		t.Fatalf("waiting call on a stopped gateway = %+v, want ErrShuttingDown", o)
	}
	if e, _ := (&PG{pool: db.Pool}).Get(ctx, id); e.Status != StatusPending {
		t.Fatalf("escalation is %s after the restart, want pending", e.Status)
	}

	b := newTestPG(t, db, Config{})
	if _, err := b.Decide(ctx, id, Decision{Approve: true, By: "alice"}); err != nil {
		t.Fatal(err)
	}
	res, err := b.Escalate(ctx, req("c1")) // the hub re-attaches by call id
	if err != nil || !res.Approved || res.ID != id {
		t.Fatalf("re-attached call = %+v, %v", res, err)
	}

	// Expiry while no gateway ran.
	if _, err := db.Pool.Exec(ctx, `INSERT INTO escalations (id, call_id, session_id, kind, expires_at)
VALUES ('old', 'c-old', 's1', 'tool_call', now() - interval '1 minute')`); err != nil {
		t.Fatal(err)
	}
	res, err = b.Escalate(ctx, Request{CallID: "c-old", SessionID: "s1"})
	if err != nil || res.Approved || res.Status != StatusExpired {
		t.Fatalf("overdue escalation = %+v, %v; want expired", res, err)
	}
}

func TestSweeperExpiresOverdue(t *testing.T) {
	db := pgtest.New(t, pgtest.Migrated())
	ctx := testCtx(t)
	if _, err := db.Pool.Exec(ctx, `INSERT INTO escalations (id, call_id, session_id, kind, expires_at)
VALUES ('old', 'c-old', 's1', 'tool_call', now() - interval '1 minute')`); err != nil {
		t.Fatal(err)
	}
	p := newTestPG(t, db, Config{SweepInterval: 50 * time.Millisecond})
	deadline := time.Now().Add(20 * time.Second)
	for time.Now().Before(deadline) {
		if e, _ := p.Get(ctx, "old"); e.Status == StatusExpired {
			return
		}
		time.Sleep(50 * time.Millisecond)
	}
	t.Fatal("sweeper did not expire the overdue escalation")
}

// TestApproveSimilar: an approval with a scope covers later escalations of
// the same session, server and tool within it, and nothing else.
func TestApproveSimilar(t *testing.T) {
	tests := []struct {
		name     string
		first    Request
		scope    string
		next     Request
		wantAuto bool
	}{
		{name: "directory: file inside", first: req("a"), scope: ScopeDirectory,
			next: withResource(req("b"), "/w/src/pkg"), wantAuto: true},
		{name: "directory: same directory", first: req("a"), scope: ScopeDirectory,
			next: withResource(req("b"), "/w/src"), wantAuto: true},
		{name: "directory: prefix trick", first: req("a"), scope: ScopeDirectory,
			next: withResource(req("b"), "/w/src2"), wantAuto: false},
		{name: "directory: parent", first: req("a"), scope: ScopeDirectory,
			next: withResource(req("b"), "/w"), wantAuto: false},
		{name: "directory: traversal", first: req("a"), scope: ScopeDirectory,
			next: withResource(req("b"), "/w/src/../etc"), wantAuto: false},
		{name: "directory: other session", first: req("a"), scope: ScopeDirectory,
			next: withSession(req("b"), "s2"), wantAuto: false},
		{name: "directory: other tool", first: req("a"), scope: ScopeDirectory,
			next: withTool(req("b"), "write_file"), wantAuto: false},
		{name: "domain: same", first: egress("a", "api.example.com"), scope: ScopeDomain,
			next: egress("b", "API.example.com."), wantAuto: true},
		{name: "domain: subdomain is not the domain", first: egress("a", "example.com"), scope: ScopeDomain,
			next: egress("b", "evil.example.com"), wantAuto: false},
		{name: "exact: same args", first: req("a"), scope: ScopeExact,
			next: req("b"), wantAuto: true},
		{name: "exact: other args", first: req("a"), scope: ScopeExact,
			next: withArgs(req("b"), `{"path":"/w/src/b.txt"}`), wantAuto: false},
		{name: "no scope: this call only", first: req("a"), scope: "",
			next: req("b"), wantAuto: false},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			db := pgtest.New(t, pgtest.Migrated())
			ctx := testCtx(t)
			p := newTestPG(t, db, Config{Timeout: 2 * time.Second})
			id, done := escalateAsync(t, p, ctx, tt.first)
			if _, err := p.Decide(ctx, id, Decision{Approve: true, By: "alice", Similar: tt.scope}); err != nil {
				t.Fatal(err)
			}
			if o := <-done; !o.res.Approved {
				t.Fatalf("first call = %+v", o)
			}
			res, err := p.Escalate(ctx, tt.next)
			if err != nil {
				t.Fatal(err)
			}
			if res.Approved != tt.wantAuto {
				t.Fatalf("next call approved=%v (%+v), want %v", res.Approved, res, tt.wantAuto)
			}
			if tt.wantAuto && !strings.HasPrefix(res.DecidedBy, "similar:") {
				t.Fatalf("auto approval decided by %q", res.DecidedBy)
			}
			if !tt.wantAuto && res.Status != StatusExpired {
				t.Fatalf("next call status %s, want it to wait and expire", res.Status)
			}
		})
	}
}

func withResource(r Request, res string) Request { r.Resource = res; return r }
func withSession(r Request, s string) Request    { r.SessionID = s; return r }
func withTool(r Request, tool string) Request    { r.Tool = tool; return r }
func withArgs(r Request, a string) Request       { r.Args = json.RawMessage(a); return r }
func egress(call, host string) Request {
	return Request{CallID: call, SessionID: "s1", Kind: KindEgress, Resource: host, Reason: "unknown host"}
}

func TestSimilarCovers(t *testing.T) {
	tests := []struct {
		scope, value, resource, digest string
		want                           bool
	}{
		{scope: ScopeDirectory, value: "/w/src", resource: "/w/src/a/b", want: true},
		{scope: ScopeDirectory, value: "/w/src", resource: "/w/srcx", want: false},
		{scope: ScopeDirectory, value: "/", resource: "/etc", want: true},
		{scope: ScopeDirectory, value: "/w/src", resource: "w/src/a", want: false},
		{scope: ScopeDirectory, value: "/w/src", resource: "/w/src/./a", want: false},
		{scope: ScopeDirectory, value: "/w/src", resource: "", want: false},
		{scope: ScopeDomain, value: "x.com", resource: "X.COM", want: true},
		{scope: ScopeDomain, value: "x.com", resource: "", want: false},
		{scope: ScopeExact, value: "d1", digest: "d1", want: true},
		{scope: ScopeExact, value: "d1", digest: "d2", want: false},
		{scope: "bogus", value: "x", resource: "x", want: false},
	}
	for _, tt := range tests {
		t.Run(tt.scope+" "+tt.value+" "+tt.resource, func(t *testing.T) {
			if got := similarCovers(tt.scope, tt.value, tt.resource, tt.digest); got != tt.want {
				t.Fatalf("similarCovers = %v, want %v", got, tt.want)
			}
		})
	}
}

// TestWebhook: new escalations are announced as Slack-compatible JSON; a
// failing endpoint is counted and never blocks the escalation.
func TestWebhook(t *testing.T) {
	var mu sync.Mutex
	var bodies []string
	fail := false
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		b, _ := io.ReadAll(r.Body)
		mu.Lock()
		bodies = append(bodies, string(b))
		f := fail
		mu.Unlock()
		if f {
			http.Error(w, "nope", http.StatusInternalServerError)
		}
	}))
	defer srv.Close()
	db := pgtest.New(t, pgtest.Migrated())
	ctx := testCtx(t)
	p := newTestPG(t, db, Config{WebhookURL: srv.URL, Timeout: 500 * time.Millisecond})
	if _, err := p.Escalate(ctx, req("c1")); err != nil {
		t.Fatal(err)
	}
	mu.Lock()
	fail = true
	mu.Unlock()
	if _, err := p.Escalate(ctx, req("c2")); err != nil {
		t.Fatal(err)
	}
	deadline := time.Now().Add(10 * time.Second)
	for testutil.ToFloat64(p.m.webhookFailures.WithLabelValues("status")) < 1 && time.Now().Before(deadline) {
		time.Sleep(20 * time.Millisecond)
	}
	mu.Lock()
	defer mu.Unlock()
	if len(bodies) != 2 {
		t.Fatalf("webhook got %d posts, want 2", len(bodies))
	}
	var msg map[string]string
	if err := json.Unmarshal([]byte(bodies[0]), &msg); err != nil || !strings.Contains(msg["text"], "filesystem__delete_file") {
		t.Fatalf("webhook body = %s (%v)", bodies[0], err)
	}
	if strings.Contains(bodies[0], "secret-value") || strings.Contains(bodies[0], "/w/src/a.txt") {
		t.Fatalf("webhook leaks arguments: %s", bodies[0])
	}
	if got := testutil.ToFloat64(p.m.webhookFailures.WithLabelValues("status")); got != 1 {
		t.Fatalf("webhook status failures = %v, want 1", got)
	}
	if got := testutil.ToFloat64(p.m.webhookSent); got != 1 {
		t.Fatalf("webhook sent = %v, want 1", got)
	}
}

// TestListenerReconnects: the LISTEN connection is killed; a waiter is
// still woken by the decision (after the reconnect, every waiter re-reads).
func TestListenerReconnects(t *testing.T) {
	db := pgtest.New(t, pgtest.Migrated())
	ctx := testCtx(t)
	p := newTestPG(t, db, Config{PollInterval: time.Minute})
	id, done := escalateAsync(t, p, ctx, req("c1"))
	if _, err := db.Pool.Exec(ctx, `SELECT pg_terminate_backend(pid) FROM pg_stat_activity
WHERE datname = current_database() AND query ILIKE 'LISTEN%'`); err != nil {
		t.Fatal(err)
	}
	if _, err := p.Decide(ctx, id, Decision{Approve: true, By: "alice"}); err != nil {
		t.Fatal(err)
	}
	select {
	case o := <-done:
		if !o.res.Approved {
			t.Fatalf("outcome = %+v", o)
		}
	case <-time.After(30 * time.Second):
		t.Fatal("waiter not woken after the listener reconnected")
	}
}

func TestListFilters(t *testing.T) {
	db := pgtest.New(t, pgtest.Migrated())
	ctx := testCtx(t)
	p := newTestPG(t, db, Config{})
	id1, d1 := escalateAsync(t, p, ctx, req("c1"))
	_, _ = escalateAsync(t, p, ctx, withSession(req("c2"), "s2"))
	if _, err := p.Decide(ctx, id1, Decision{By: "a"}); err != nil {
		t.Fatal(err)
	}
	<-d1
	tests := []struct {
		name string
		f    ListFilter
		want int
	}{
		{name: "all", f: ListFilter{}, want: 2},
		{name: "pending", f: ListFilter{Status: StatusPending}, want: 1},
		{name: "denied", f: ListFilter{Status: StatusDenied}, want: 1},
		{name: "session", f: ListFilter{Session: "s2"}, want: 1},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			got, err := p.List(ctx, tt.f)
			if err != nil || len(got) != tt.want {
				t.Fatalf("List = %d rows, %v; want %d", len(got), err, tt.want)
			}
		})
	}
	if _, err := p.List(ctx, ListFilter{Status: "weird"}); err == nil {
		t.Fatal("bad status accepted")
	}
}

// BenchmarkApproveToResume measures the time from an operator's approve
// call returning to the waiting tool call resuming (the original polls
// every 500 ms).
//
//	go test -run '^$' -bench ApproveToResume -benchtime 50x ./internal/escalation/
func BenchmarkApproveToResume(b *testing.B) {
	db := pgtest.New(b, pgtest.Migrated())
	ctx := testCtx(b)
	p := newTestPG(b, db, Config{PollInterval: time.Minute})
	var total, worst time.Duration
	b.ReportAllocs()
	for i := 0; b.Loop(); i++ {
		id, done := escalateAsync(b, p, ctx, req("bench-"+time.Now().Format("150405.000000000")))
		time.Sleep(5 * time.Millisecond) // the waiter is subscribed and sleeping
		if _, err := p.Decide(ctx, id, Decision{Approve: true, By: "bench"}); err != nil {
			b.Fatal(err)
		}
		decided := time.Now()
		o := <-done
		if o.err != nil || !o.res.Approved {
			b.Fatalf("outcome %+v", o)
		}
		d := o.at.Sub(decided)
		total += d
		worst = max(worst, d)
	}
	b.ReportMetric(float64(total.Microseconds())/float64(b.N)/1000, "resume-ms")
	b.ReportMetric(float64(worst.Microseconds())/1000, "worst-ms")
}

// TestWaiterReadsNoArguments: what a waiting call reads on every poll and
// wake carries the escalation's state, not its arguments (a wake of many
// waiters with 4 MiB arguments each must not read them all at once); Get
// still returns them whole.
func TestWaiterReadsNoArguments(t *testing.T) {
	db := pgtest.New(t, pgtest.Migrated())
	p := newTestPG(t, db, Config{Timeout: time.Minute})
	ctx := testCtx(t)
	r := req("call-args")
	r.Args = json.RawMessage(`{"path":"/w/src/a.txt","content":"` + strings.Repeat("x", 1<<20) + `"}`)
	id, ch := escalateAsync(t, p, ctx, r)
	for name, read := range map[string]func() (Escalation, error){
		"by call id": func() (Escalation, error) { return p.getByCallID(ctx, r.CallID) },
		"with remaining": func() (Escalation, error) {
			e, _, err := p.getWithRemaining(ctx, id)
			return e, err
		},
	} {
		e, err := read()
		if err != nil {
			t.Fatalf("%s: %v", name, err)
		}
		if e.ID != id || e.Status != StatusPending || e.Args != nil {
			t.Fatalf("%s: id %q status %q, %d bytes of arguments", name, e.ID, e.Status, len(e.Args))
		}
	}
	full, err := p.Get(ctx, id)
	if err != nil || len(full.Args) < 1<<20 {
		t.Fatalf("Get: %d bytes of arguments, %v", len(full.Args), err)
	}
	if _, err := p.Decide(ctx, id, Decision{Approve: true, By: "alice"}); err != nil {
		t.Fatal(err)
	}
	if o := <-ch; o.err != nil || !o.res.Approved {
		t.Fatalf("waiter: %+v", o)
	}
}
