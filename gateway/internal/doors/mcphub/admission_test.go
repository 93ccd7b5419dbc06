package mcphub

import (
	"context"
	"errors"
	"net/http"
	"strings"
	"testing"
	"time"

	"github.com/prometheus/client_golang/prometheus/testutil"

	"ironcurtain.dev/gateway/internal/servers"
	"ironcurtain.dev/gateway/internal/session"
	"ironcurtain.dev/gateway/policy"
)

func TestInflightCap(t *testing.T) {
	f := newInflight(2, 1)
	ctx := context.Background()
	r1, err1 := f.acquire(ctx, "a")
	r2, err2 := f.acquire(ctx, "a")
	if err1 != nil || err2 != nil {
		t.Fatal(err1, err2)
	}
	// Another session is not affected.
	rb, err := f.acquire(ctx, "b")
	if err != nil {
		t.Fatal(err)
	}
	rb()
	got := make(chan error, 1)
	go func() {
		r, err := f.acquire(ctx, "a") // queued
		if err == nil {
			r()
		}
		got <- err
	}()
	waitFor(t, "admission state", func() bool { _, q := f.inFlight("a"); return q == 1 })
	if _, err := f.acquire(ctx, "a"); !errors.Is(err, errBusy) {
		t.Fatalf("a full queue: %v, want errBusy", err)
	}
	cctx, cancel := context.WithCancel(ctx)
	cancel()
	if _, err := f.acquire(cctx, "b"); err != nil {
		t.Fatalf("b has free slots: %v", err) // a free slot is taken even with a done context
	}
	r1()
	if err := <-got; err != nil {
		t.Fatalf("the queued request: %v", err)
	}
	r2()
	r1() // a second release is a no-op
	if n, q := f.inFlight("a"); n != 0 || q != 0 {
		t.Fatalf("after release: %d running, %d queued", n, q)
	}
}

func TestInflightCancelWhileQueued(t *testing.T) {
	f := newInflight(1, 4)
	r, _ := f.acquire(context.Background(), "a")
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan error)
	go func() { _, err := f.acquire(ctx, "a"); done <- err }()
	waitFor(t, "admission state", func() bool { _, q := f.inFlight("a"); return q == 1 })
	cancel()
	if err := <-done; !errors.Is(err, context.Canceled) {
		t.Fatalf("err = %v", err)
	}
	r()
	if n, q := f.inFlight("a"); n != 0 || q != 0 {
		t.Fatalf("a cancelled waiter leaked: %d running, %d queued", n, q)
	}
}

// TestPerSessionCallsInFlight: one agent session cannot hold more than its
// cap of requests; its extra ones wait, then are refused; another agent
// session is served at once.
func TestPerSessionCallsInFlight(t *testing.T) {
	f := newHTTPFixture(t, Config{MaxCallsInFlight: 2, MaxQueuedCalls: 1})
	f.pol.evals["files__read"] = allow("r", nil)
	release := make(chan struct{})
	f.srv.run = func(ctx context.Context, _ string, _ map[string]any) (servers.Result, error) {
		select {
		case <-release:
		case <-ctx.Done():
		}
		return servers.Text("ok"), nil
	}
	resp, _ := rawPost(t, f.url, "Bearer "+tokenA, "", initBody)
	sidA := resp.Header.Get("Mcp-Session-Id")
	resp, _ = rawPost(t, f.url, "Bearer "+tokenB, "", initBody)
	sidB := resp.Header.Get("Mcp-Session-Id")
	call := `{"jsonrpc":"2.0","id":2,"method":"tools/call","params":{"name":"files__read","arguments":{}}}`
	statuses := make(chan int, 3)
	for range 3 {
		go func() {
			resp, _ := rawPost(t, f.url, "Bearer "+tokenA, sidA, call)
			statuses <- resp.StatusCode
		}()
	}
	waitFor(t, "admission state", func() bool { n, q := f.hub.inflight.inFlight("agent-a"); return n == 2 && q == 1 })
	resp, body := rawPost(t, f.url, "Bearer "+tokenA, sidA, call)
	if resp.StatusCode != http.StatusTooManyRequests || !strings.Contains(body, "requests in flight") {
		t.Fatalf("past the queue: %d %s", resp.StatusCode, body)
	}
	// Agent B is not slowed by A's queue (its call waits only on the server).
	doneB := make(chan int, 1)
	go func() {
		resp, _ := rawPost(t, f.url, "Bearer "+tokenB, sidB, call)
		doneB <- resp.StatusCode
	}()
	waitFor(t, "admission state", func() bool { n, _ := f.hub.inflight.inFlight("agent-b"); return n == 1 && f.srv.callCount() == 3 })
	close(release)
	for range 3 {
		if s := <-statuses; s != http.StatusOK {
			t.Errorf("a queued call answered %d", s)
		}
	}
	if s := <-doneB; s != http.StatusOK {
		t.Errorf("agent B: %d", s)
	}
	if n := f.srv.callCount(); n != 4 {
		t.Errorf("server calls = %d, want 4", n)
	}
	if got := testutil.ToFloat64(counter(t, f.reg, "ironcurtain_mcp_refused_requests_total", map[string]string{"reason": refusedBusy})); got != 1 {
		t.Errorf("busy refusals = %v", got)
	}
}

// TestMCPSessionCaps is issue 24 item 13: sessions are capped per agent
// token and in total, with a clear error; a closed one frees its place.
func TestMCPSessionCaps(t *testing.T) {
	f := newHTTPFixture(t, Config{MaxSessionsPerToken: 2, MaxSessions: 3})
	open := func(tok string) (string, int, string) {
		resp, body := rawPost(t, f.url, "Bearer "+tok, "", initBody)
		return resp.Header.Get("Mcp-Session-Id"), resp.StatusCode, body
	}
	a1, s1, _ := open(tokenA)
	_, s2, _ := open(tokenA)
	if s1 != http.StatusOK || s2 != http.StatusOK {
		t.Fatalf("first two: %d %d", s1, s2)
	}
	if sid, st, body := open(tokenA); st != http.StatusTooManyRequests || sid != "" || !strings.Contains(body, "this agent token has too many open MCP sessions") {
		t.Fatalf("third of A: %d %q %s", st, sid, body)
	}
	if _, st, _ := open(tokenB); st != http.StatusOK {
		t.Fatalf("first of B: %d", st)
	}
	if _, st, body := open(tokenB); st != http.StatusTooManyRequests || !strings.Contains(body, "the gateway has too many open MCP sessions") {
		t.Fatalf("past the total: %d %s", st, body)
	}
	if got := sessionsGauge(t, f); got != 3 {
		t.Errorf("sessions gauge = %v, want 3", got)
	}
	// An initialize inside a session opens another one: it counts too.
	resp, body := rawPost(t, f.url, "Bearer "+tokenA, a1, initBody)
	if resp.StatusCode != http.StatusTooManyRequests || !strings.Contains(body, "too many open MCP sessions") {
		t.Fatalf("initialize with a session id past the cap: %d %s", resp.StatusCode, body)
	}
	// Closing a session frees its place.
	req, _ := http.NewRequest(http.MethodDelete, f.url, nil)
	req.Header.Set("Authorization", "Bearer "+tokenA)
	req.Header.Set("Mcp-Session-Id", a1)
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	resp.Body.Close()
	if _, st, body := open(tokenA); st != http.StatusOK {
		t.Fatalf("after a DELETE: %d %s", st, body)
	}
	// A refused initialize leaves nothing counted.
	if total, mine := f.hub.owners.count("agent-a"); total != 3 || mine != 2 {
		t.Errorf("counted %d sessions, %d of A; want 3 and 2", total, mine)
	}
}

// TestIdleMCPSessionsExpire: a session with no request for the idle TTL
// ends (its id answers 404), one with a request in flight does not.
func TestIdleMCPSessionsExpire(t *testing.T) {
	f := newHTTPFixture(t, Config{SessionIdleTTL: time.Minute})
	f.pol.evals["files__read"] = allow("r", nil)
	resp, _ := rawPost(t, f.url, "Bearer "+tokenA, "", initBody)
	idle := resp.Header.Get("Mcp-Session-Id")
	resp, _ = rawPost(t, f.url, "Bearer "+tokenA, "", initBody)
	busy := resp.Header.Get("Mcp-Session-Id")
	if idle == "" || busy == "" {
		t.Fatal("no session")
	}
	endBusy := f.hub.owners.use(busy, time.Now)
	if n := f.hub.sweepIdle(time.Now().Add(30 * time.Second)); n != 0 {
		t.Fatalf("swept %d sessions before the TTL", n)
	}
	if n := f.hub.sweepIdle(time.Now().Add(2 * time.Minute)); n != 1 {
		t.Fatalf("swept %d sessions, want the idle one", n)
	}
	call := `{"jsonrpc":"2.0","id":2,"method":"tools/call","params":{"name":"files__read","arguments":{}}}`
	if resp, body := rawPost(t, f.url, "Bearer "+tokenA, idle, call); resp.StatusCode != http.StatusNotFound {
		t.Fatalf("the expired session answered %d %s", resp.StatusCode, body)
	}
	endBusy()
	if resp, body := rawPost(t, f.url, "Bearer "+tokenA, busy, call); resp.StatusCode != http.StatusOK {
		t.Fatalf("the busy session answered %d %s", resp.StatusCode, body)
	}
	if got := sessionsGauge(t, f); got != 1 {
		t.Errorf("sessions gauge = %v, want 1", got)
	}
	if n := f.hub.sweepIdle(time.Now().Add(2 * time.Minute)); n != 1 {
		t.Fatalf("the session idle since its last call was not swept (%d)", n)
	}
	if total, _ := f.hub.owners.count("agent-a"); total != 0 {
		t.Errorf("%d sessions left", total)
	}
}

func sessionsGauge(t *testing.T, f *httpFixture) float64 {
	t.Helper()
	mfs, err := f.reg.Gather()
	if err != nil {
		t.Fatal(err)
	}
	for _, mf := range mfs {
		if mf.GetName() == "ironcurtain_mcp_sessions" {
			return mf.GetMetric()[0].GetGauge().GetValue()
		}
	}
	t.Fatal("no ironcurtain_mcp_sessions gauge")
	return 0
}

// TestDecisionWaitsForAFairSlot: a call whose decision cannot get a slot
// before its context ends is refused and recorded; the policy never runs
// and the server is never called.
func TestDecisionWaitsForAFairSlot(t *testing.T) {
	f := newPipelineFixture(t, Config{FairSlots: 1}, false)
	f.pol.evals["files__read"] = allow("r", nil)
	hold, err := f.hub.fair.enter(context.Background(), "someone-else")
	if err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithTimeout(context.Background(), 50*time.Millisecond)
	defer cancel()
	res := f.hub.Call(ctx, CallRequest{Session: session.Session{ID: "s1"}, Tool: "files__read", Args: map[string]any{"path": "/a"}})
	if !res.IsError || !strings.Contains(res.Content[0].Text, "cancelled before policy decided") {
		t.Fatalf("result %+v", res)
	}
	if len(f.pol.requests) != 0 || f.srv.callCount() != 0 {
		t.Fatal("the policy or the server ran")
	}
	if d := f.sink.decisions(); len(d) != 1 || d[0].Decision != "deny" || d[0].Rule != policy.RuleInternalError {
		t.Fatalf("recorded %+v", d)
	}
	hold()
	// With the slot free the next call is decided.
	res = f.hub.Call(context.Background(), CallRequest{Session: session.Session{ID: "s1"}, Tool: "files__read", Args: map[string]any{"path": "/a"}})
	if res.IsError || f.srv.callCount() != 1 {
		t.Fatalf("after the slot was freed: %+v", res)
	}
}
