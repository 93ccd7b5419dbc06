package mcphub

import (
	"context"
	"fmt"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/client_golang/prometheus/testutil"

	"ironcurtain.dev/gateway/internal/audit"
	"ironcurtain.dev/gateway/internal/escalation"
	"ironcurtain.dev/gateway/internal/gate"
	"ironcurtain.dev/gateway/internal/loopguard"
	"ironcurtain.dev/gateway/internal/metrics"
	"ironcurtain.dev/gateway/internal/servers"
	"ironcurtain.dev/gateway/internal/session"
	"ironcurtain.dev/gateway/policy"
)

type fakeClock struct {
	mu sync.Mutex
	t  time.Time
}

func (c *fakeClock) now() time.Time { c.mu.Lock(); defer c.mu.Unlock(); return c.t }
func (c *fakeClock) add(d time.Duration) {
	c.mu.Lock()
	c.t = c.t.Add(d)
	c.mu.Unlock()
}

// TestLoopBreakerPausesALoopingSession plays an agent stuck in a loop: it
// keeps trying writes that policy denies. The call after the fifth denial
// pauses the session behind one escalation; while it is pending the
// session's other calls are refused at once (another session is not
// affected); an approval lets the session go on (the pausing call itself
// does not run); when it loops again and the operator denies, its calls are
// refused for the cooldown, then run again. Every step is recorded.
func TestLoopBreakerPausesALoopingSession(t *testing.T) {
	f := newPipelineFixture(t, Config{}, false)
	f.pol.evals["files__write"] = policy.Evaluation{Decision: policy.Decision{Status: policy.Deny, Rule: "deny-writes", Reason: "writing is not allowed"}}
	f.pol.evals["files__read"] = allow("allow-reads", map[string]any{"path": "/sandbox/a"})
	clock := &fakeClock{t: time.Date(2026, 11, 26, 10, 0, 0, 0, time.UTC)}
	reg := prometheus.NewRegistry()
	lm, err := metrics.NewLoopBreaker(reg)
	if err != nil {
		t.Fatal(err)
	}
	g, err := loopguard.New(loopguard.Config{ConsecutiveDenials: 5, Cooldown: time.Minute}, lm)
	if err != nil {
		t.Fatal(err)
	}
	f.rebuild(t, func(d *Deps) { d.LoopGuard, d.Now = g, clock.now })
	stuck := session.Session{ID: "stuck", Name: "stuck"}
	other := session.Session{ID: "other", Name: "other"}
	call := func(s session.Session, tool string, args map[string]any) servers.Result {
		return f.hub.Call(context.Background(), CallRequest{Session: s, Tool: tool, Args: args, Notify: f.notifier})
	}
	loop := func(n int) {
		for i := 0; i < n; i++ {
			clock.add(2 * time.Second)
			res := call(stuck, "files__write", map[string]any{"path": fmt.Sprintf("/etc/passwd-%d", i)})
			if !res.IsError || !strings.Contains(loopText(res), "writing is not allowed") {
				t.Fatalf("denied write %d = %+v", i, res)
			}
		}
	}

	// Round 1: five denials, then the sixth call pauses the session.
	loop(5)
	f.esc.wait = make(chan struct{})
	f.esc.res = escalation.Result{Approved: true, Status: gate.StatusApproved, DecidedBy: "alice"}
	tripped := make(chan servers.Result, 1)
	clock.add(2 * time.Second)
	go func() { tripped <- call(stuck, "files__write", map[string]any{"path": "/etc/passwd-5"}) }()
	deadline := time.Now().Add(10 * time.Second)
	for len(f.esc.requests()) == 0 {
		if time.Now().After(deadline) {
			t.Fatal("no escalation for the looping session")
		}
		time.Sleep(time.Millisecond)
	}
	req := f.esc.requests()[0]
	if req.Rule != gate.RuleLoopBreaker || req.SessionID != "stuck" || req.Kind != escalation.KindToolCall ||
		!strings.Contains(req.Reason, "the agent seems stuck: 5 denied calls in a row in 8s") || len(req.Exact) != 0 ||
		// Unique arguments: no "approve similar" entry can cover a pause.
		!strings.Contains(string(req.Args), `"loop_breaker_pause":"`+req.ID+`"`) || !strings.Contains(string(req.Args), `"paused_call":{"path":"/etc/passwd-5"}`) {
		t.Fatalf("escalation request = %+v", req)
	}
	// While it is pending: the session's calls are refused at once, with a
	// record; another session's run.
	before := f.srv.callCount()
	res := call(stuck, "files__read", map[string]any{"path": "a"})
	if !res.IsError || !strings.Contains(loopText(res), "paused until an operator decides escalation "+req.ID) {
		t.Fatalf("call while paused = %+v", res)
	}
	if res := call(other, "files__read", map[string]any{"path": "a"}); res.IsError {
		t.Fatalf("another session's call = %+v", res)
	}
	if got := f.srv.callCount(); got != before+1 {
		t.Fatalf("server calls = %d, want %d (only the other session's)", got, before+1)
	}
	close(f.esc.wait)
	res = <-tripped
	if !res.IsError || !strings.Contains(loopText(res), "did not run") || !strings.Contains(loopText(res), "an operator let it go on") {
		t.Fatalf("pausing call after approval = %+v", res)
	}
	if !f.esc.durable {
		t.Fatal("the pause's decision was not recorded before the escalation")
	}
	var pauseDec *audit.ToolCallDecision
	for _, d := range f.sink.decisions() {
		if d.EscalationID == req.ID {
			pauseDec = d
		}
	}
	if pauseDec == nil || pauseDec.Decision != "escalate" || pauseDec.Rule != gate.RuleLoopBreaker || pauseDec.CallID != req.CallID || pauseDec.Detail != "limit denials" {
		t.Fatalf("pause decision = %+v", pauseDec)
	}
	// The session goes on.
	if res := call(stuck, "files__read", map[string]any{"path": "a"}); res.IsError {
		t.Fatalf("call after approval = %+v", res)
	}

	// Round 2: it loops again; the operator denies: cooldown.
	f.esc.wait = nil
	f.esc.res = escalation.Result{Approved: false, Status: gate.StatusDenied, DecidedBy: "alice"}
	loop(5)
	clock.add(2 * time.Second)
	res = call(stuck, "files__write", map[string]any{"path": "/etc/passwd-5"})
	if !res.IsError || !strings.Contains(loopText(res), "an operator stopped them until 2026-11-26T10:01:") {
		t.Fatalf("pausing call after denial = %+v", res)
	}
	clock.add(30 * time.Second)
	res = call(stuck, "files__read", map[string]any{"path": "a"})
	if !res.IsError || !strings.Contains(loopText(res), "an operator stopped this session's tool calls until") {
		t.Fatalf("call in cooldown = %+v", res)
	}
	clock.add(31 * time.Second)
	if res := call(stuck, "files__read", map[string]any{"path": "a"}); res.IsError {
		t.Fatalf("call after the cooldown = %+v", res)
	}

	// Records: every refused call has a loop-breaker deny decision and a
	// denied outcome; the pausing calls an escalate decision.
	var escalates, refusals int
	for _, d := range f.sink.decisions() {
		if d.Rule != gate.RuleLoopBreaker {
			continue
		}
		switch d.Decision {
		case "escalate":
			escalates++
		case "deny":
			refusals++
		}
	}
	if escalates != 2 || refusals != 2 {
		t.Fatalf("loop-breaker decisions: %d escalate, %d deny; want 2 and 2\n%v", escalates, refusals, f.sink.trail())
	}
	outcomes := map[string]string{}
	for _, o := range f.sink.outcomes() {
		outcomes[o.CallID] = o.Status
	}
	for _, d := range f.sink.decisions() {
		if _, ok := outcomes[d.CallID]; !ok {
			t.Errorf("decision %s (%s) has no outcome", d.CallID, d.Rule)
		}
	}
	want := `
# HELP ironcurtain_loop_breaker_trips_total Sessions paused behind an escalation because they crossed a limit (rate, identical, denials).
# TYPE ironcurtain_loop_breaker_trips_total counter
ironcurtain_loop_breaker_trips_total{limit="denials"} 2
ironcurtain_loop_breaker_trips_total{limit="identical"} 0
ironcurtain_loop_breaker_trips_total{limit="rate"} 0
# HELP ironcurtain_loop_breaker_refused_calls_total Calls refused because their session was paused (waiting for an operator), cooling down (an operator denied the pause), or its shared state could not be read (unavailable).
# TYPE ironcurtain_loop_breaker_refused_calls_total counter
ironcurtain_loop_breaker_refused_calls_total{state="cooldown"} 1
ironcurtain_loop_breaker_refused_calls_total{state="paused"} 1
ironcurtain_loop_breaker_refused_calls_total{state="unavailable"} 0
# HELP ironcurtain_loop_breaker_resolved_total Pauses ended, by result (approved: the session goes on; denied: its calls are refused for the cooldown).
# TYPE ironcurtain_loop_breaker_resolved_total counter
ironcurtain_loop_breaker_resolved_total{result="approved"} 1
ironcurtain_loop_breaker_resolved_total{result="denied"} 1
`
	if err := testutil.GatherAndCompare(reg, strings.NewReader(want)); err != nil {
		t.Fatal(err)
	}
}

// TestLoopBreakerIdenticalCallsThroughADoor: identical calls through
// another door (the git and GitHub doors use gate.Gate.Do) count too.
func TestLoopBreakerIdenticalCallsThroughADoor(t *testing.T) {
	f := newLoopFixture(t, true, loopguard.Config{IdenticalCalls: 3}) // escalation.Deny: the pause is refused
	sess := session.Session{ID: "s"}
	ran := 0
	for i := 0; i < 3; i++ {
		r := f.hub.Gate().Do(context.Background(), gate.Call{Session: sess, Tool: "files__read", Args: map[string]any{"path": "a"},
			Run: func(context.Context) (servers.Result, error) { ran++; return servers.Text("ok"), nil }})
		if r.Result.IsError {
			t.Fatalf("door call %d = %+v", i, r.Result)
		}
	}
	r := f.hub.Gate().Do(context.Background(), gate.Call{Session: sess, Tool: "files__read", Args: map[string]any{"path": "a"},
		Run: func(context.Context) (servers.Result, error) { ran++; return servers.Text("ok"), nil }})
	if !r.Result.IsError || r.Ran || r.Decision.Rule != gate.RuleLoopBreaker || !strings.Contains(loopText(r.Result), "4 identical calls to files__read") {
		t.Fatalf("fourth identical door call = %+v", r)
	}
	if ran != 3 {
		t.Fatalf("ran %d times, want 3", ran)
	}
}

func loopText(r servers.Result) string {
	var b strings.Builder
	for _, c := range r.Content {
		b.WriteString(c.Text)
	}
	return b.String()
}

// newLoopFixture is a pipeline fixture (deny: escalations are refused) that
// allows reads of /sandbox/a, with a loop breaker of cfg.
func newLoopFixture(t *testing.T, deny bool, cfg loopguard.Config) *pipelineFixture {
	t.Helper()
	f := newPipelineFixture(t, Config{}, deny)
	f.pol.evals["files__read"] = allow("allow-reads", map[string]any{"path": "/sandbox/a"})
	g, err := loopguard.New(cfg, nil)
	if err != nil {
		t.Fatal(err)
	}
	f.rebuild(t, func(d *Deps) { d.LoopGuard = g })
	return f
}

// TestLoopBreakerAuditDown: when the pause's record cannot be written, the
// pausing call is refused like any call without its record, no escalation
// is opened, and the session is not stopped for a pause nobody saw.
func TestLoopBreakerAuditDown(t *testing.T) {
	f := newLoopFixture(t, false, loopguard.Config{IdenticalCalls: 2})
	sess := session.Session{ID: "s"}
	args := map[string]any{"path": "a"}
	for i := 0; i < 2; i++ {
		if res := f.hub.Call(context.Background(), CallRequest{Session: sess, Tool: "files__read", Args: args}); res.IsError {
			t.Fatalf("call %d = %+v", i, res)
		}
	}
	f.sink.mu.Lock()
	f.sink.failWhen = func(e audit.Event) bool {
		d, ok := e.(*audit.ToolCallDecision)
		return ok && d.Rule == gate.RuleLoopBreaker
	}
	f.sink.mu.Unlock()
	res := f.hub.Call(context.Background(), CallRequest{Session: sess, Tool: "files__read", Args: args})
	if !res.IsError || !strings.Contains(loopText(res), "could not record the call") {
		t.Fatalf("pausing call with the audit log down = %+v", res)
	}
	if n := len(f.esc.requests()); n != 0 {
		t.Fatalf("%d escalations opened for an unrecorded pause", n)
	}
	if res := f.hub.Call(context.Background(), CallRequest{Session: sess, Tool: "files__read", Args: map[string]any{"path": "b"}}); res.IsError {
		t.Fatalf("next call = %+v, want it to run (the pause was abandoned)", res)
	}
}

// TestLoopBreakerPauseInterruptedByShutdown: the pausing call stops waiting
// when the gateway shuts down, says so, and is recorded as refused.
func TestLoopBreakerPauseInterruptedByShutdown(t *testing.T) {
	f := newLoopFixture(t, false, loopguard.Config{IdenticalCalls: 2})
	f.esc.wait = make(chan struct{}) // nobody answers
	sess := session.Session{ID: "s"}
	args := map[string]any{"path": "a"}
	for i := 0; i < 2; i++ {
		f.hub.Call(context.Background(), CallRequest{Session: sess, Tool: "files__read", Args: args})
	}
	done := make(chan servers.Result, 1)
	go func() {
		done <- f.hub.Call(context.Background(), CallRequest{Session: sess, Tool: "files__read", Args: args})
	}()
	deadline := time.Now().Add(10 * time.Second)
	for len(f.esc.requests()) == 0 {
		if time.Now().After(deadline) {
			t.Fatal("no pause")
		}
		time.Sleep(time.Millisecond)
	}
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	go func() { _ = f.hub.Shutdown(ctx) }()
	select {
	case res := <-done:
		if !res.IsError || !strings.Contains(loopText(res), "the gateway restarted while an operator was asked") {
			t.Fatalf("interrupted pause = %+v", res)
		}
	case <-time.After(10 * time.Second):
		t.Fatal("the pausing call still waits after Shutdown")
	}
	outs := f.sink.outcomes()
	if last := outs[len(outs)-1]; last.Status != audit.OutcomeRefused || !strings.Contains(last.Error, "gateway shutting down") {
		t.Fatalf("outcome = %+v", last)
	}
}

// TestLoopBreakerCountsUnknownTools: calls to tools that do not exist (a
// model inventing a tool) are denials in a row too.
func TestLoopBreakerCountsUnknownTools(t *testing.T) {
	f := newLoopFixture(t, true, loopguard.Config{ConsecutiveDenials: 3})
	sess := session.Session{ID: "s"}
	f.hub.Call(context.Background(), CallRequest{Session: sess, Tool: "files__read", Args: map[string]any{"path": "a"}})
	for i := 0; i < 3; i++ {
		f.hub.Call(context.Background(), CallRequest{Session: sess, Tool: "files__made_up", Args: map[string]any{}})
	}
	res := f.hub.Call(context.Background(), CallRequest{Session: sess, Tool: "files__read", Args: map[string]any{"path": "b"}})
	if !res.IsError || !strings.Contains(loopText(res), "3 denied calls in a row") {
		t.Fatalf("call after three unknown-tool calls = %+v", res)
	}
}

// downStore is a loop-breaker store whose database is unreachable.
type downStore struct{}

func (downStore) Update(context.Context, string, time.Time, *[32]byte, func(*loopguard.State, *loopguard.Counter)) error {
	return fmt.Errorf("loading loop-breaker state: %w", context.DeadlineExceeded)
}

// TestLoopBreakerStoreDown: with the shared loop-breaker state unreadable
// (its database is the audit log's), the call does not run and the agent
// hears the same cause as when a decision cannot be recorded.
func TestLoopBreakerStoreDown(t *testing.T) {
	f := newPipelineFixture(t, Config{}, false)
	f.pol.evals["files__read"] = allow("allow-reads", map[string]any{"path": "/sandbox/a"})
	g, err := loopguard.NewShared(loopguard.Config{IdenticalCalls: 2}, nil, downStore{})
	if err != nil {
		t.Fatal(err)
	}
	f.rebuild(t, func(d *Deps) { d.LoopGuard = g })
	res := f.hub.Call(context.Background(), CallRequest{Session: session.Session{ID: "s"}, Tool: "files__read", Args: map[string]any{"path": "a"}})
	if !res.IsError {
		t.Fatalf("call with the loop-breaker state unreadable ran: %+v", res)
	}
	for _, want := range []string{"audit log", "did not run", "retry"} {
		if !strings.Contains(loopText(res), want) {
			t.Errorf("refusal %q lacks %q", loopText(res), want)
		}
	}
	if n := len(f.srv.calls); n != 0 {
		t.Fatalf("the tool ran %d times", n)
	}
}
