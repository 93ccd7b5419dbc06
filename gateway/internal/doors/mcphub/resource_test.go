package mcphub

import (
	"context"
	"testing"

	"ironcurtain.dev/gateway/internal/escalation"
	"ironcurtain.dev/gateway/internal/gate"
	"ironcurtain.dev/gateway/internal/servers"
	"ironcurtain.dev/gateway/internal/session"
	"ironcurtain.dev/gateway/policy"
)

var moveFile = policy.ToolAnnotation{Server: "files", Tool: "move_file", Args: []policy.ArgAnnotation{
	{Name: "source", Spec: policy.ArgSpec{Default: []policy.Role{policy.RoleReadPath, policy.RoleDeletePath}}},
	{Name: "destination", Spec: policy.ArgSpec{Default: []policy.Role{policy.RoleWritePath}}},
}}

// annotatedPolicy is fakePolicy with real annotations.
type annotatedPolicy struct {
	*fakePolicy
	anns map[string]policy.ToolAnnotation
}

func (p annotatedPolicy) Annotation(server, tool string) (policy.ToolAnnotation, bool) {
	a, ok := p.anns[server+gate.Separator+tool]
	return a, ok
}

// TestEscalationResourceNamesEveryPath: a move_file escalation tells the
// operator both paths (the console's RESOURCE column was empty for every
// tool call).
func TestEscalationResourceNamesEveryPath(t *testing.T) {
	pol := annotatedPolicy{
		fakePolicy: &fakePolicy{evals: map[string]policy.Evaluation{"files__move": {
			Decision: policy.Decision{Status: policy.Escalate, Rule: "ask-moves", Reason: "moves need a human"},
			Policy:   map[string]any{"source": "/w/a.txt", "destination": "/w/b.txt"},
		}}, annotated: map[string]bool{}},
		anns: map[string]policy.ToolAnnotation{"files__move": moveFile},
	}
	sink := &memSink{}
	esc := &fakeEscalator{t: t, sink: sink, res: escalation.Result{Status: gate.StatusDenied}}
	srv := newFakeServer("files", "move")
	hub, err := New(Config{}, Deps{Servers: []servers.Server{srv}, Policy: pol, Escalator: esc, Audit: sink,
		Auth: fakeAuth{}, NewID: seqIDs()})
	if err != nil {
		t.Fatal(err)
	}
	hub.Call(context.Background(), CallRequest{Session: session.Session{ID: "s1"}, Tool: "files__move",
		Args: map[string]any{"source": "a.txt", "destination": "b.txt"}})
	if len(esc.reqs) != 1 {
		t.Fatalf("escalations: %d, want 1 (trail %v)", len(esc.reqs), sink.trail())
	}
	want := `source (read-path+delete-path): "/w/a.txt"; destination (write-path): "/w/b.txt"`
	if got := esc.reqs[0].Resource; got != want {
		t.Fatalf("escalation resource = %q, want %q", got, want)
	}
	if srv.callCount() != 0 {
		t.Fatal("a denied escalation ran the tool")
	}
}
