package mcphub

import (
	"context"
	"strings"
	"sync"
	"testing"
	"time"

	sdk "github.com/modelcontextprotocol/go-sdk/mcp"

	"ironcurtain.dev/gateway/internal/audit"
	"ironcurtain.dev/gateway/internal/escalation"
	"ironcurtain.dev/gateway/internal/gate"
	"ironcurtain.dev/gateway/internal/servers"
	"ironcurtain.dev/gateway/internal/session"
	"ironcurtain.dev/gateway/policy"
)

var escalateDeletes = policy.Evaluation{
	Decision:  policy.Decision{Status: policy.Escalate, Rule: "escalate-deletes", Reason: "deleting needs a human"},
	Transport: map[string]any{"path": "/sandbox/a.txt"}, Policy: map[string]any{"path": "/sandbox/a.txt"},
}

// startCalls runs n calls of tool in the background and returns their
// results channel.
func startCalls(f *pipelineFixture, tool string, n int) <-chan servers.Result {
	out := make(chan servers.Result, n)
	for range n {
		go func() {
			out <- f.hub.Call(context.Background(), CallRequest{Session: session.Session{ID: "s"}, Tool: tool, Args: map[string]any{"path": "a.txt"}, Notify: f.notifier})
		}()
	}
	return out
}

func waitFor(t *testing.T, what string, cond func() bool) {
	t.Helper()
	deadline := time.Now().Add(10 * time.Second)
	for !cond() {
		if time.Now().After(deadline) {
			t.Fatalf("timed out waiting for %s", what)
		}
		time.Sleep(2 * time.Millisecond)
	}
}

// TestShutdownAnswersWaitingCalls: calls waiting for a human stop waiting at
// once when the hub shuts down (whether the hub or the escalator notices
// first); each records a refused outcome naming the still pending
// escalation and tells the agent to retry after an approval.
func TestShutdownAnswersWaitingCalls(t *testing.T) {
	tests := []struct {
		name string
		// escalatorCloses: the escalator ends the wait (PG.Close) before
		// the hub does.
		escalatorCloses bool
	}{
		{name: "the hub stops the wait"},
		{name: "the escalator closes first", escalatorCloses: true},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			f := newPipelineFixture(t, Config{ShutdownGrace: 5 * time.Second}, false)
			f.pol.evals["files__delete"] = escalateDeletes
			f.esc.wait = make(chan struct{}) // never closed: nobody decides
			f.esc.closing = make(chan struct{})
			const n = 3
			results := startCalls(f, "files__delete", n)
			waitFor(t, "the calls to wait for a human", func() bool { return len(f.esc.requests()) == n })

			begin := time.Now()
			if tt.escalatorCloses {
				close(f.esc.closing)
			}
			ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
			defer cancel()
			if err := f.hub.Shutdown(ctx); err != nil {
				t.Fatal(err)
			}
			took := time.Since(begin)
			t.Logf("shutdown with %d waiting calls took %v", n, took)
			if took > time.Second {
				t.Errorf("shutdown took %v; waiting calls must stop at once, not after the %v grace", took, f.hub.cfg.ShutdownGrace)
			}
			escIDs := map[string]bool{}
			for _, r := range f.esc.requests() {
				escIDs[r.ID] = true
			}
			for range n {
				res := <-results
				text := firstText(res, 1000)
				if !res.IsError || !strings.Contains(text, "files__delete did not run: the gateway restarted while this call waited for approval of escalation ") ||
					!strings.Contains(text, "retry the same call after an operator approves it") {
					t.Errorf("agent saw %q", text)
				}
			}
			if f.srv.callCount() != 0 {
				t.Fatal("an interrupted call reached the server")
			}
			outs := f.sink.outcomes()
			if len(outs) != n {
				t.Fatalf("%d outcomes, want %d", len(outs), n)
			}
			for _, o := range outs {
				var escID string
				for _, d := range f.sink.decisions() {
					if d.CallID == o.CallID {
						escID = d.EscalationID
					}
				}
				if o.Status != audit.OutcomeRefused || o.Error != "gateway shutting down; escalation "+escID+" is still pending" || !escIDs[escID] {
					t.Errorf("outcome %+v (escalation %s)", o, escID)
				}
			}
			if st := f.notifier.statuses(); st[len(st)-1] != gate.StatusInterrupted {
				t.Errorf("notices %v, want the last one %s", st, gate.StatusInterrupted)
			}
		})
	}
}

// TestShutdownGraceForRunningCalls: calls already running on a server get
// the grace; what still runs then is cancelled and recorded, and Shutdown
// returns promptly even when a server ignores the cancellation.
func TestShutdownGraceForRunningCalls(t *testing.T) {
	tests := []struct {
		name       string
		grace      time.Duration
		run        func(ctx context.Context, release <-chan struct{}) (servers.Result, error)
		wantStatus string
		wantText   string
		maxTook    time.Duration
	}{
		{name: "finishes within the grace", grace: 5 * time.Second,
			run: func(context.Context, <-chan struct{}) (servers.Result, error) {
				time.Sleep(100 * time.Millisecond)
				return servers.Text("done"), nil
			},
			wantStatus: audit.OutcomeOK, wantText: "done", maxTook: 2 * time.Second},
		{name: "cancelled after the grace", grace: 100 * time.Millisecond,
			run: func(ctx context.Context, _ <-chan struct{}) (servers.Result, error) {
				<-ctx.Done()
				return servers.Result{}, ctx.Err()
			},
			wantStatus: audit.OutcomeError, wantText: "files__write was interrupted because the gateway is restarting", maxTook: time.Second},
		{name: "server ignores the cancellation", grace: 100 * time.Millisecond,
			run: func(_ context.Context, release <-chan struct{}) (servers.Result, error) {
				<-release
				return servers.Text("late"), nil
			},
			wantStatus: audit.OutcomeError, wantText: "files__write was interrupted because the gateway is restarting", maxTook: time.Second},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			f := newPipelineFixture(t, Config{ShutdownGrace: tt.grace}, false)
			f.pol.evals["files__write"] = allow("allow-writes", map[string]any{"path": "/sandbox/a.txt"})
			release := make(chan struct{})
			defer close(release)
			f.srv.run = func(ctx context.Context, _ string, _ map[string]any) (servers.Result, error) {
				return tt.run(ctx, release)
			}
			results := startCalls(f, "files__write", 1)
			waitFor(t, "the call to start on the server", func() bool { return f.srv.callCount() == 1 })
			begin := time.Now()
			ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
			defer cancel()
			if err := f.hub.Shutdown(ctx); err != nil {
				t.Fatal(err)
			}
			if took := time.Since(begin); took > tt.maxTook {
				t.Errorf("shutdown took %v, want at most %v", took, tt.maxTook)
			}
			res := <-results
			if text := firstText(res, 1000); !strings.Contains(text, tt.wantText) {
				t.Errorf("agent saw %q, want %q", text, tt.wantText)
			}
			outs := f.sink.outcomes()
			if len(outs) != 1 || outs[0].Status != tt.wantStatus {
				t.Fatalf("outcomes %+v, want one %s", outs, tt.wantStatus)
			}
			if tt.wantStatus == audit.OutcomeError && !strings.Contains(outs[0].Error, "gateway shutting down") {
				t.Errorf("outcome error %q does not say why", outs[0].Error)
			}
		})
	}
}

// TestNoCallStartsAfterShutdown: once the hub shuts down, an allowed call
// is refused without reaching its server; decision and outcome are recorded.
func TestNoCallStartsAfterShutdown(t *testing.T) {
	f := newPipelineFixture(t, Config{ShutdownGrace: time.Millisecond}, false)
	f.pol.evals["files__read"] = allow("allow-reads", map[string]any{"path": "/sandbox/a.txt"})
	if err := f.hub.Shutdown(context.Background()); err != nil {
		t.Fatal(err)
	}
	res := f.hub.Call(context.Background(), CallRequest{Session: session.Session{ID: "s"}, Tool: "files__read"})
	if text := firstText(res, 500); !res.IsError || !strings.Contains(text, "files__read did not run: the gateway is restarting") {
		t.Fatalf("result %q", text)
	}
	if f.srv.callCount() != 0 {
		t.Fatal("a call started on a server after the shutdown")
	}
	if got := strings.Join(f.sink.trail(), ","); got != "decision:allow,outcome:refused" {
		t.Fatalf("trail %s", got)
	}
}

// TestShutdownOverHTTP: an MCP client waits on an escalated call when the
// gateway stops (hub and HTTP server shut down together, as serve does):
// the client gets the tool error, and both shutdowns finish promptly even
// though the client keeps its session open.
func TestShutdownOverHTTP(t *testing.T) {
	f := newHTTPFixture(t, Config{ShutdownGrace: 5 * time.Second})
	f.pol.evals["files__delete"] = escalateDeletes
	f.esc.wait = make(chan struct{})
	cs, err := connectSDK(t, f.url, tokenA, nil)
	if err != nil {
		t.Fatal(err)
	}
	defer cs.Close()
	done := make(chan *sdk.CallToolResult, 1)
	go func() {
		res, err := cs.CallTool(context.Background(), &sdk.CallToolParams{Name: "files__delete", Arguments: map[string]any{"path": "a.txt"}})
		if err != nil {
			t.Error(err)
		}
		done <- res
	}()
	waitFor(t, "the call to wait for a human", func() bool { return len(f.esc.requests()) == 1 })

	begin := time.Now()
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	var wg sync.WaitGroup
	errs := make([]error, 2)
	wg.Add(2)
	go func() { defer wg.Done(); errs[0] = f.hub.Shutdown(ctx) }()
	go func() { defer wg.Done(); errs[1] = f.ts.Config.Shutdown(ctx) }()
	wg.Wait()
	took := time.Since(begin)
	t.Logf("hub and HTTP server stopped in %v", took)
	for _, err := range errs {
		if err != nil {
			t.Fatal(err)
		}
	}
	if took > 2*time.Second {
		t.Errorf("stop took %v", took)
	}
	select {
	case res := <-done:
		if res == nil || !res.IsError || len(res.Content) == 0 {
			t.Fatalf("result %+v", res)
		}
		text := res.Content[0].(*sdk.TextContent).Text
		if !strings.Contains(text, "the gateway restarted while this call waited for approval of escalation "+f.esc.requests()[0].ID) {
			t.Fatalf("agent saw %q", text)
		}
	case <-time.After(5 * time.Second):
		t.Fatal("the client never got an answer")
	}
}

// TestRetryUsesIdenticalCallsEscalation: with a Reuser escalator the hub
// asks for an identical call's escalation before its write-ahead decision,
// names it in the decision, and attaches to it; without one (or when the
// lookup fails) it opens a new one. The exact call passed on is what the
// agent sent and what policy judged, unredacted.
func TestRetryUsesIdenticalCallsEscalation(t *testing.T) {
	tests := []struct {
		name       string
		reusable   string
		lookupErr  error
		escErr     error
		wantEscID  string
		wantAttach bool
		wantRun    bool
		wantText   string
		wantOut    string
	}{
		{name: "attaches to the earlier escalation", reusable: "esc-old", wantEscID: "esc-old", wantAttach: true, wantRun: true, wantOut: audit.OutcomeOK},
		{name: "none found: a new escalation", wantEscID: "id-2", wantRun: true, wantOut: audit.OutcomeOK},
		{name: "lookup fails: a new escalation", lookupErr: context.DeadlineExceeded, wantEscID: "id-2", wantRun: true, wantOut: audit.OutcomeOK},
		{name: "approval already used", reusable: "esc-old", escErr: escalation.ErrApprovalUsed, wantEscID: "esc-old", wantAttach: true,
			wantText: "refused files__delete: escalation esc-old was already used by another identical call", wantOut: audit.OutcomeRefused},
		{name: "decided before the attach", reusable: "esc-old", escErr: escalation.ErrApprovalStale, wantEscID: "esc-old", wantAttach: true,
			wantText: "refused files__delete: escalation esc-old was decided before this call could use it; retry the call to ask again", wantOut: audit.OutcomeRefused},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			f := newPipelineFixture(t, Config{}, false)
			f.pol.evals["files__delete"] = escalateDeletes
			f.esc.res = escalation.Result{Approved: true, Status: "approved", DecidedBy: "op"}
			f.esc.err = tt.escErr
			r := &fakeReuser{fakeEscalator: f.esc, id: tt.reusable, err: tt.lookupErr}
			f.rebuild(t, func(d *Deps) { d.Escalator = r })
			args := map[string]any{"path": "a.txt", "token": "ghp_0123456789abcdefghijklmnopqrstuvwxyzAB"}
			res := f.hub.Call(context.Background(), CallRequest{Session: session.Session{ID: "s"}, Tool: "files__delete", Args: args})
			if got := f.srv.callCount() == 1; got != tt.wantRun {
				t.Fatalf("ran = %v, want %v (result %q)", got, tt.wantRun, firstText(res, 500))
			}
			if tt.wantText != "" && !strings.Contains(firstText(res, 500), tt.wantText) {
				t.Errorf("agent saw %q, want %q", firstText(res, 500), tt.wantText)
			}
			if len(r.asked) != 1 {
				t.Fatalf("Reusable asked %d times", len(r.asked))
			}
			reqs := f.esc.requests()
			if len(reqs) != 1 || reqs[0].ID != tt.wantEscID || reqs[0].Attach != tt.wantAttach {
				t.Fatalf("escalation requests %+v, want id %s attach %v", reqs, tt.wantEscID, tt.wantAttach)
			}
			if !f.esc.durable {
				t.Error("the decision naming the escalation was not recorded before Escalate")
			}
			if d := f.sink.decisions()[0]; d.EscalationID != tt.wantEscID {
				t.Errorf("decision names escalation %s, want %s", d.EscalationID, tt.wantEscID)
			}
			if o := f.sink.outcomes(); len(o) != 1 || o[0].Status != tt.wantOut {
				t.Errorf("outcomes %+v, want one %s", o, tt.wantOut)
			}
			exact := string(r.asked[0].Exact)
			if exact != string(reqs[0].Exact) || !strings.Contains(exact, `"agent":{"path":"a.txt","token":"ghp_0123456789abcdefghijklmnopqrstuvwxyzAB"}`) ||
				!strings.Contains(exact, `"policy":{"path":"/sandbox/a.txt"}`) {
				t.Errorf("exact call %s", exact)
			}
			if strings.Contains(string(reqs[0].Args), "ghp_0123456789") {
				t.Errorf("redacted args carry the token: %s", reqs[0].Args)
			}
		})
	}
}
