package external

import (
	"context"
	"strings"
	"testing"

	"ironcurtain.dev/gateway/internal/audit"
	"ironcurtain.dev/gateway/internal/doors/mcphub"
	"ironcurtain.dev/gateway/internal/servers"
	"ironcurtain.dev/gateway/internal/session"
	"ironcurtain.dev/gateway/policy"
)

type discardSink struct{}

func (discardSink) Record(context.Context, audit.Event) error { return nil }

type noAuth struct{}

func (noAuth) Authenticate(context.Context, string) (session.Session, error) {
	return session.Session{}, session.ErrUnknownToken
}

// TestHubExposesOnlyAnnotatedExternalTools runs the external server behind
// the hub with the real policy engine: only the tool that has an annotation
// in tool-annotations.json is listed and callable.
func TestHubExposesOnlyAnnotatedExternalTools(t *testing.T) {
	s, _, _ := startTest(t, nil)
	ann := &policy.Annotations{}
	for _, tool := range s.Tools() {
		if tool.Name == "echo" {
			ann.Add(pinnedAnnotation(t, "notes", tool, "text"))
		}
	}
	cp := &policy.CompiledPolicy{Rules: []policy.CompiledRule{{
		Name: "allow-notes-echo", If: policy.RuleCondition{Server: []string{"notes"}, Tool: []string{"echo"}},
		Then: policy.Allow, Reason: "echo is harmless",
	}}}
	eng, err := policy.New(cp, ann, nil, policy.Settings{Sandbox: t.TempDir()})
	if err != nil {
		t.Fatal(err)
	}
	hub, err := mcphub.New(mcphub.Config{}, mcphub.Deps{Servers: []servers.Server{s}, Policy: eng, Audit: discardSink{}, Auth: noAuth{}})
	if err != nil {
		t.Fatal(err)
	}
	if got := strings.Join(hub.Tools(), ","); got != "notes__echo" {
		t.Fatalf("exposed tools = %s", got)
	}
	tests := []struct {
		name      string
		tool      string
		args      map[string]any
		want      string
		wantError bool
	}{
		{name: "annotated tool runs", tool: "notes__echo", args: map[string]any{"text": "hi"}, want: "hi"},
		{name: "unannotated tool is refused", tool: "notes__env", args: map[string]any{"name": "HOME"}, want: "there is no such tool", wantError: true},
		{name: "unannotated crash is refused", tool: "notes__crash", args: map[string]any{}, want: "there is no such tool", wantError: true},
		{name: "unknown argument is refused by policy", tool: "notes__echo", args: map[string]any{"text": "hi", "extra": 1.0}, want: "refused notes__echo", wantError: true},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			res := hub.Call(context.Background(), mcphub.CallRequest{Session: session.Session{ID: "s"}, Tool: tt.tool, Args: tt.args})
			if res.IsError != tt.wantError || !strings.Contains(text(res), tt.want) {
				t.Fatalf("result = %+v, want %q", res, tt.want)
			}
		})
	}
}
