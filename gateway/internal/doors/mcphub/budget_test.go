package mcphub

import (
	"context"
	"errors"
	"fmt"
	"strings"
	"sync"
	"testing"

	"ironcurtain.dev/gateway/internal/gate"
	"ironcurtain.dev/gateway/internal/servers"
	"ironcurtain.dev/gateway/internal/session"
	"ironcurtain.dev/gateway/policy"
)

// chargingAuth counts tool calls like the minted-session store.
type chargingAuth struct {
	fakeAuth
	mu      sync.Mutex
	used    map[string]int64
	limit   int64
	failure error
}

func (a *chargingAuth) ChargeToolCall(_ context.Context, id string) (int64, int64, error) {
	a.mu.Lock()
	defer a.mu.Unlock()
	if a.failure != nil {
		return 0, 0, a.failure
	}
	if a.used[id] >= a.limit {
		return a.used[id], a.limit, fmt.Errorf("session %s: %w", id, session.ErrBudgetSpent)
	}
	a.used[id]++
	return a.used[id], a.limit, nil
}

func budgetHub(t *testing.T, auth session.Authenticator) (*Hub, *fakeServer, *memSink, *fakePolicy) {
	t.Helper()
	pol := &fakePolicy{evals: map[string]policy.Evaluation{}, annotated: map[string]bool{"files__read": true}}
	pol.evals["files__read"] = allow("allow-reads", map[string]any{"path": "/sandbox/a"})
	srv := newFakeServer("files", "read")
	sink := &memSink{}
	h, err := New(Config{}, Deps{Servers: []servers.Server{srv}, Policy: pol, Audit: sink, Auth: auth, NewID: seqIDs()})
	if err != nil {
		t.Fatal(err)
	}
	return h, srv, sink, pol
}

// TestToolCallBudget: a minted session's tool-call budget refuses the call
// after the last allowed one, on the hub's pipeline (so on every door),
// with a recorded deny naming the rule; policy denials count too; a
// session without a budget, or another session, is not affected.
func TestToolCallBudget(t *testing.T) {
	auth := &chargingAuth{used: map[string]int64{}, limit: 2}
	h, srv, sink, _ := budgetHub(t, auth)
	ctx := context.Background()
	limited := session.Session{ID: "sess_a", Budget: &session.Budget{MaxToolCalls: 2}}
	for i := range 2 {
		if res := h.Call(ctx, CallRequest{Session: limited, Tool: "files__read", Args: map[string]any{"path": "a"}}); res.IsError {
			t.Fatalf("call %d refused: %v", i+1, res)
		}
	}
	res := h.Call(ctx, CallRequest{Session: limited, Tool: "files__read", Args: map[string]any{"path": "a"}})
	if !res.IsError || !strings.Contains(firstText(res, 500), "tool-call budget is spent (2 of 2") {
		t.Fatalf("third call = %+v", res)
	}
	if srv.callCount() != 2 {
		t.Fatalf("server ran %d calls, want 2", srv.callCount())
	}
	decs := sink.decisions()
	last := decs[len(decs)-1]
	if last.Decision != "deny" || last.Rule != gate.RuleSessionBudget || last.SessionID != "sess_a" {
		t.Fatalf("recorded %+v", last)
	}
	// Other sessions: a static one (no budget) and a minted one without a tool-call budget.
	for _, s := range []session.Session{{ID: "agent"}, {ID: "sess_b", Budget: &session.Budget{MaxTokens: 10}}} {
		if res := h.Call(ctx, CallRequest{Session: s, Tool: "files__read", Args: map[string]any{}}); res.IsError {
			t.Fatalf("%s refused: %+v", s.ID, res)
		}
	}
	if auth.used["agent"] != 0 || auth.used["sess_b"] != 0 {
		t.Fatalf("sessions without a tool-call budget were charged: %v", auth.used)
	}
}

// TestToolCallBudgetOnDoors: a call through another door (git HTTP, the
// GitHub relay: gate.Gate.Do) is counted and refused the same way.
func TestToolCallBudgetOnDoors(t *testing.T) {
	auth := &chargingAuth{used: map[string]int64{}, limit: 1}
	h, _, sink, _ := budgetHub(t, auth)
	limited := session.Session{ID: "sess_a", Budget: &session.Budget{MaxToolCalls: 1}}
	runs := 0
	door := gate.Call{Session: limited, Tool: "files__read", Args: map[string]any{"path": "a"},
		Run: func(context.Context) (servers.Result, error) { runs++; return servers.Text("ok"), nil }}
	if r := h.Gate().Do(context.Background(), door); !r.Ran || r.Result.IsError {
		t.Fatalf("first door call: %+v", r)
	}
	r := h.Gate().Do(context.Background(), door)
	if r.Ran || !r.Result.IsError || r.Decision.Rule != gate.RuleSessionBudget || runs != 1 {
		t.Fatalf("second door call: %+v (runs %d)", r, runs)
	}
	if d := sink.decisions(); d[len(d)-1].Rule != gate.RuleSessionBudget {
		t.Fatalf("recorded %+v", d[len(d)-1])
	}
}

// TestToolCallBudgetFailsClosed: a budget that cannot be checked refuses
// the call (store down; nothing that counts calls).
func TestToolCallBudgetFailsClosed(t *testing.T) {
	limited := session.Session{ID: "sess_a", Budget: &session.Budget{MaxToolCalls: 5}}
	for name, auth := range map[string]session.Authenticator{
		"store down":        &chargingAuth{used: map[string]int64{}, limit: 5, failure: errors.New("connection refused")},
		"no counter":        fakeAuth{},
		"chain, no counter": session.Chain{fakeAuth{}},
	} {
		t.Run(name, func(t *testing.T) {
			h, srv, sink, _ := budgetHub(t, auth)
			res := h.Call(context.Background(), CallRequest{Session: limited, Tool: "files__read", Args: map[string]any{}})
			if !res.IsError || srv.callCount() != 0 {
				t.Fatalf("ran or allowed: %+v (server calls %d)", res, srv.callCount())
			}
			if txt := firstText(res, 500); strings.Contains(txt, "connection refused") {
				t.Fatalf("detail reached the agent: %s", txt)
			}
			if d := sink.decisions(); len(d) != 1 || d[0].Rule != gate.RuleSessionBudget || d[0].Decision != "deny" {
				t.Fatalf("recorded %+v", d)
			}
		})
	}
}
