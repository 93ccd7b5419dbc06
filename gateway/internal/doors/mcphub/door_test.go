package mcphub

import (
	"context"
	"errors"
	"strings"
	"testing"

	"ironcurtain.dev/gateway/internal/audit"
	"ironcurtain.dev/gateway/internal/escalation"
	"ironcurtain.dev/gateway/internal/gate"
	"ironcurtain.dev/gateway/internal/servers"
	"ironcurtain.dev/gateway/internal/session"
	"ironcurtain.dev/gateway/policy"
)

// wirePolicy is fakePolicy that also decides wire pushes.
type wirePolicy struct {
	*fakePolicy
	ev policy.Evaluation
}

func (p *wirePolicy) EvaluateWirePush(context.Context, policy.WirePush) policy.Evaluation {
	return p.ev
}

// TestDoor: a call through another door goes through the one pipeline: the
// same decisions, records and escalations, with the door's Run in place of
// the server; every path that does not run refuses and is recorded.
func TestDoor(t *testing.T) {
	sess := session.Session{ID: "s1"}
	for _, tc := range []struct {
		name      string
		setup     func(f *pipelineFixture)
		call      func(ran *bool) gate.Call
		wantRan   bool
		wantDec   string
		wantOut   string
		wantText  string
		wantServe bool
	}{
		{
			name: "allowed runs the door's action, not the server",
			setup: func(f *pipelineFixture) {
				f.pol.evals["files__read"] = allow("allow-reads", map[string]any{"path": "/x"})
			},
			call: func(ran *bool) gate.Call {
				return gate.Call{Session: sess, Tool: "files__read", Args: map[string]any{"path": "/x"}, Record: map[string]any{"door": "test"},
					Run: func(context.Context) (servers.Result, error) { *ran = true; return servers.Text("done"), nil }}
			},
			wantRan: true, wantDec: "allow", wantOut: audit.OutcomeOK, wantText: "done",
		},
		{
			name: "denied by policy does not run",
			call: func(ran *bool) gate.Call {
				return gate.Call{Session: sess, Tool: "files__read", Args: map[string]any{"path": "/x"},
					Run: func(context.Context) (servers.Result, error) { *ran = true; return servers.Text("done"), nil }}
			},
			wantDec: "deny", wantOut: audit.OutcomeDenied, wantText: "refused",
		},
		{
			name: "the door's own refusal is recorded and nothing runs",
			call: func(ran *bool) gate.Call {
				return gate.Call{Session: sess, Tool: "files__read", Record: map[string]any{"why": "bad pack"},
					Refused: &policy.Decision{Status: policy.Deny, Rule: "door-rule", Reason: "the pack fails fsck"},
					Run:     func(context.Context) (servers.Result, error) { *ran = true; return servers.Text("done"), nil }}
			},
			wantDec: "deny", wantOut: audit.OutcomeDenied, wantText: "the pack fails fsck",
		},
		{
			name: "a refusal that is not a denial still denies",
			call: func(ran *bool) gate.Call {
				return gate.Call{Session: sess, Tool: "files__read",
					Refused: &policy.Decision{Status: policy.Allow, Rule: "oops"},
					Run:     func(context.Context) (servers.Result, error) { *ran = true; return servers.Text("done"), nil }}
			},
			wantDec: "deny", wantOut: audit.OutcomeDenied,
		},
		{
			name:    "nothing to run denies",
			setup:   func(f *pipelineFixture) { f.pol.evals["files__read"] = allow("allow-reads", nil) },
			call:    func(*bool) gate.Call { return gate.Call{Session: sess, Tool: "files__read"} },
			wantDec: "deny", wantOut: audit.OutcomeDenied,
		},
		{
			name: "a wire push with a policy that cannot decide one denies",
			call: func(ran *bool) gate.Call {
				return gate.Call{Session: sess, Tool: "files__write", Push: &policy.WirePush{URL: "https://github.com/a/b.git"},
					Run: func(context.Context) (servers.Result, error) { *ran = true; return servers.Text("done"), nil }}
			},
			wantDec: "deny", wantOut: audit.OutcomeDenied,
		},
		{
			name:  "a failing action is an error outcome",
			setup: func(f *pipelineFixture) { f.pol.evals["files__read"] = allow("allow-reads", nil) },
			call: func(ran *bool) gate.Call {
				return gate.Call{Session: sess, Tool: "files__read",
					Run: func(context.Context) (servers.Result, error) {
						*ran = true
						return servers.Result{}, errors.New("boom")
					}}
			},
			wantRan: true, wantDec: "allow", wantOut: audit.OutcomeError, wantText: "failed inside the gateway",
		},
		{
			name: "an unknown tool is refused",
			call: func(ran *bool) gate.Call {
				return gate.Call{Session: sess, Tool: "nope__x", Run: func(context.Context) (servers.Result, error) { *ran = true; return servers.Result{}, nil }}
			},
			wantDec: "deny", wantOut: audit.OutcomeDenied, wantText: "no such tool",
		},
	} {
		t.Run(tc.name, func(t *testing.T) {
			f := newPipelineFixture(t, Config{}, false)
			if tc.setup != nil {
				tc.setup(f)
			}
			ran := false
			res := f.hub.Gate().Do(context.Background(), tc.call(&ran))
			if ran != tc.wantRan || res.Ran != tc.wantRan {
				t.Fatalf("ran %v (result says %v), want %v", ran, res.Ran, tc.wantRan)
			}
			if f.srv.callCount() != 0 {
				t.Fatal("the server was called")
			}
			ds, os := f.sink.decisions(), f.sink.outcomes()
			if len(ds) != 1 || ds[0].Decision != tc.wantDec || len(os) != 1 || os[0].Status != tc.wantOut {
				t.Fatalf("records: %d decisions %+v, %d outcomes %+v", len(ds), ds, len(os), os)
			}
			if tc.wantText != "" && !strings.Contains(firstText(res.Result, 500), tc.wantText) {
				t.Fatalf("result %q lacks %q", firstText(res.Result, 500), tc.wantText)
			}
		})
	}
}

// TestDoorWirePush: a wire push is decided by the policy's
// EvaluateWirePush, recorded with what the door adds, and escalated like
// any call (the notifier hears of it).
func TestDoorWirePush(t *testing.T) {
	f := newPipelineFixture(t, Config{}, false)
	f.esc.res = escalation.Result{Approved: true, Status: gate.StatusApproved}
	updates := map[string]any{"ref_updates": []any{"refs/heads/x"}}
	wp := &wirePolicy{fakePolicy: f.pol, ev: policy.Evaluation{Decision: policy.Decision{Status: policy.Escalate, Rule: "esc", Reason: "ask"}, Policy: updates}}
	var err error
	f.hub, err = New(Config{}, Deps{Servers: []servers.Server{f.srv}, Policy: wp, Escalator: f.esc, Audit: f.sink, Auth: fakeAuth{}, NewID: seqIDs()})
	if err != nil {
		t.Fatal(err)
	}
	ran := false
	res := f.hub.Gate().Do(context.Background(), gate.Call{Session: session.Session{ID: "s1"}, Tool: "files__write",
		Push: &policy.WirePush{URL: "https://github.com/a/b.git"}, Record: map[string]any{"door": "git-http"}, Notify: f.notifier,
		Run: func(context.Context) (servers.Result, error) { ran = true; return servers.Text("pushed"), nil }})
	if !ran || !res.Ran || res.Decision.Status != policy.Escalate {
		t.Fatalf("ran %v, result %+v", ran, res)
	}
	d := f.sink.decisions()[0]
	if d.Decision != "escalate" || d.EscalationID == "" || !strings.Contains(string(d.Args), "refs/heads/x") || !strings.Contains(string(d.Args), "git-http") {
		t.Fatalf("decision %+v %s", d, d.Args)
	}
	if st := f.notifier.statuses(); len(st) != 2 || st[0] != gate.StatusPending || st[1] != gate.StatusApproved {
		t.Fatalf("notices %v", st)
	}
	if !f.esc.durable {
		t.Fatal("the escalation was created before its decision was recorded")
	}
}
