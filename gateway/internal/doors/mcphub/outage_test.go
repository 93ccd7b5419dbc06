package mcphub

import (
	"context"
	"log/slog"
	"strings"
	"testing"
	"time"

	"ironcurtain.dev/gateway/internal/audit"
	"ironcurtain.dev/gateway/internal/servers"
	"ironcurtain.dev/gateway/internal/session"
	"ironcurtain.dev/gateway/policy"
)

// stallSink records decisions at once and holds every outcome until
// release is closed: a database that is paused after the decision commit.
type stallSink struct {
	memSink
	release chan struct{}
}

func (s *stallSink) Record(ctx context.Context, e audit.Event) error {
	if _, ok := e.(*audit.ToolCallOutcome); ok {
		<-s.release
	}
	return s.memSink.Record(ctx, e)
}

// newWriteHub is a hub of cfg over srv whose policy allows files__write,
// recording to sink.
func newWriteHub(t *testing.T, cfg Config, srv *fakeServer, sink audit.Sink) *Hub {
	t.Helper()
	pol := &fakePolicy{evals: map[string]policy.Evaluation{"files__write": allow("w", nil)}, annotated: map[string]bool{"files__write": true}}
	h, err := New(cfg, Deps{Servers: []servers.Server{srv}, Policy: pol, Audit: sink, Auth: fakeAuth{}, NewID: seqIDs()})
	if err != nil {
		t.Fatal(err)
	}
	return h
}

// callWrite calls files__write on h in the background; the channel gets
// its result.
func callWrite(h *Hub) <-chan servers.Result {
	got := make(chan servers.Result, 1)
	go func() {
		got <- h.Call(context.Background(), CallRequest{Session: session.Session{ID: "s"}, Tool: "files__write"})
	}()
	return got
}

// TestFinishedCallNotHeldByStalledOutcome: once the tool has run, the agent
// gets its result even though the outcome write hangs; the outcome is
// recorded when the sink comes back, and the hub's shutdown waits for it.
func TestFinishedCallNotHeldByStalledOutcome(t *testing.T) {
	sink := &stallSink{release: make(chan struct{})}
	srv := newFakeServer("files", "write")
	srv.run = func(context.Context, string, map[string]any) (servers.Result, error) {
		return servers.Text("wrote 12 bytes"), nil
	}
	const wait = 200 * time.Millisecond
	h := newWriteHub(t, Config{OutcomeWait: wait}, srv, sink)
	start := time.Now()
	got := callWrite(h)
	var res servers.Result
	select {
	case res = <-got:
	case <-time.After(5 * time.Second):
		close(sink.release)
		t.Fatal("the call's answer waited for the stalled outcome write")
	}
	if took := time.Since(start); took > wait+time.Second {
		t.Errorf("answer took %v, want about OutcomeWait (%v)", took, wait)
	}
	if res.IsError || len(res.Content) == 0 || res.Content[0].Text != "wrote 12 bytes" {
		t.Fatalf("result = %+v, want the tool's result", res)
	}
	if srv.callCount() != 1 {
		t.Fatalf("tool ran %d times", srv.callCount())
	}
	if n := h.Gate().InFlight(); n != 1 {
		t.Fatalf("%d writes in the pipeline, want the pending outcome counted", n)
	}
	if len(sink.outcomes()) != 0 {
		t.Fatal("outcome recorded although the sink is stalled")
	}
	// Shutdown waits for the outcome write.
	shut := make(chan error, 1)
	go func() {
		ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
		defer cancel()
		shut <- h.Shutdown(ctx)
	}()
	select {
	case err := <-shut:
		t.Fatalf("Shutdown returned (%v) before the outcome was recorded", err)
	case <-time.After(100 * time.Millisecond):
	}
	close(sink.release)
	if err := <-shut; err != nil {
		t.Fatal(err)
	}
	outs := sink.outcomes()
	if len(outs) != 1 || outs[0].Status != audit.OutcomeOK || outs[0].ResultBytes == 0 {
		t.Fatalf("outcomes after the sink came back: %+v", outs)
	}
}

// TestAuditOutageLogIsSummarised: 2,000 calls refused because the audit
// store is down write a few summary lines, not two per call; every call is
// refused and nothing runs.
func TestAuditOutageLogIsSummarised(t *testing.T) {
	sink := &memSink{failWhen: func(audit.Event) bool { return true }}
	srv := newFakeServer("files", "read")
	pol := &fakePolicy{evals: map[string]policy.Evaluation{"files__read": allow("r", nil)}, annotated: map[string]bool{"files__read": true}}
	var logBuf syncBuffer
	h, err := New(Config{}, Deps{
		Servers: []servers.Server{srv}, Policy: pol, Audit: sink, Auth: fakeAuth{}, NewID: seqIDs(),
		Logger: slog.New(slog.NewJSONHandler(&logBuf, nil)),
	})
	if err != nil {
		t.Fatal(err)
	}
	const calls = 2000
	for range calls {
		res := h.Call(context.Background(), CallRequest{Session: session.Session{ID: "s"}, Tool: "files__read"})
		if !res.IsError || !strings.Contains(res.Content[0].Text, "could not record the call") {
			t.Fatalf("call not refused: %+v", res)
		}
	}
	if srv.callCount() != 0 {
		t.Fatalf("%d calls ran without a recorded decision", srv.callCount())
	}
	lines := strings.Split(strings.TrimSpace(logBuf.String()), "\n")
	if len(lines) > 4 {
		t.Fatalf("%d log lines for %d refused calls, want a summary (≤ 4):\n%s", len(lines), calls, strings.Join(lines[:8], "\n"))
	}
	if !strings.Contains(logBuf.String(), `"msg":"audit writes failing"`) {
		t.Fatalf("the outage was not logged:\n%s", logBuf.String())
	}
}

// slowDecisionSink commits decision records only once release is closed
// (a paused database whose commit lands late); Record stops waiting when
// its context ends, as the Postgres sink does.
type slowDecisionSink struct {
	memSink
	release chan struct{}
}

func (s *slowDecisionSink) Record(ctx context.Context, e audit.Event) error {
	if _, ok := e.(*audit.ToolCallDecision); ok {
		committed := make(chan struct{})
		go func() { // the commit lands when the database is back
			<-s.release
			_ = s.memSink.Record(context.Background(), e)
			close(committed)
		}()
		select {
		case <-committed:
			return nil
		case <-ctx.Done(): // as the Postgres sink: the caller stops waiting
			return ctx.Err()
		}
	}
	return s.memSink.Record(ctx, e)
}

// TestStalledDecisionRefusesInTime: with the database paused, a call is
// refused once Config.DecisionWait has passed, while the agent still waits
// for the answer; it does not run when the decision commits later. Before,
// the call waited as long as the database did and ran after the agent had
// given up (and retried).
func TestStalledDecisionRefusesInTime(t *testing.T) {
	sink := &slowDecisionSink{release: make(chan struct{})}
	srv := newFakeServer("files", "write")
	const wait = 200 * time.Millisecond
	h := newWriteHub(t, Config{DecisionWait: wait}, srv, sink)
	got := callWrite(h)
	var res servers.Result
	select {
	case res = <-got:
	case <-time.After(5 * time.Second):
		close(sink.release)
		<-got
		t.Fatal("the call waited for the stalled decision record beyond DecisionWait")
	}
	close(sink.release)
	if !res.IsError || !strings.Contains(res.Content[0].Text, "did not run") {
		t.Fatalf("result = %+v, want a refusal", res)
	}
	time.Sleep(50 * time.Millisecond)
	if srv.callCount() != 0 {
		t.Fatal("the tool ran on a decision the gateway could not confirm in time")
	}
}
