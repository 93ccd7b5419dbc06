package policy

import (
	"context"
	"path/filepath"
	"testing"
)

func TestShadow(t *testing.T) {
	tr := newTree(t)
	shadowDir := writeDir(t, `{"rules": [{"name": "shadow-deny-all", "if": {}, "then": "deny", "reason": "candidate"}]}`, "", "")
	s := Settings{Home: tr.home, Sandbox: tr.sandbox, ShadowPolicyDir: shadowDir,
		AnnotationsFile: filepath.Join("testdata", "fixtures", "base", AnnotationsFile)}
	e, err := LoadDir(filepath.Join("testdata", "fixtures", "base"), s)
	if err != nil {
		t.Fatal(err)
	}
	ev := e.Evaluate(context.Background(), Request{Server: "fetch", Tool: "web_search", Args: map[string]any{"query": "x"}})
	if ev.Decision.Status != Allow || ev.Shadow == nil || ev.Shadow.Status != Deny || ev.Shadow.Rule != "shadow-deny-all" {
		t.Fatalf("decision %+v, shadow %+v", ev.Decision, ev.Shadow)
	}
	// The shadow directory is protected like the policy directory.
	ev = e.Evaluate(context.Background(), Request{Server: "filesystem", Tool: "read_text_file", Args: map[string]any{"path": shadowDir + "/compiled-policy.json"}})
	if ev.Decision.Rule != RuleProtectedPath {
		t.Fatalf("reading the shadow policy: %+v", ev.Decision)
	}
	plain := e.WithShadow(nil)
	if ev := plain.Evaluate(context.Background(), Request{Server: "fetch", Tool: "web_search", Args: map[string]any{"query": "x"}}); ev.Shadow != nil {
		t.Fatal("WithShadow(nil) still reports a shadow decision")
	}
	if e.Shadow() == nil {
		t.Fatal("WithShadow changed the original engine")
	}
}

func TestPushPlanEqualAndContext(t *testing.T) {
	u1, _ := ParseGitRemoteURL("git@github.com:acme/app.git")
	u2, _ := ParseGitRemoteURL("git@evil.example:acme/app.git")
	r1, _ := ParsePushRefspec("feature", "")
	r2, _ := ParsePushRefspec("feature:topic", "")
	base := PushPlan{URLs: []GitRemote{u1}, Refspecs: []PushRefspec{r1}}
	tests := []struct {
		name string
		q    PushPlan
		want bool
	}{
		{name: "same", q: PushPlan{URLs: []GitRemote{u1}, Refspecs: []PushRefspec{r1}}, want: true},
		{name: "other URL", q: PushPlan{URLs: []GitRemote{u2}, Refspecs: []PushRefspec{r1}}, want: false},
		{name: "extra URL", q: PushPlan{URLs: []GitRemote{u1, u2}, Refspecs: []PushRefspec{r1}}, want: false},
		{name: "other destination", q: PushPlan{URLs: []GitRemote{u1}, Refspecs: []PushRefspec{r2}}, want: false},
		{name: "tags", q: PushPlan{URLs: []GitRemote{u1}, Refspecs: []PushRefspec{r1}, Tags: true}, want: false},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			if got := base.Equal(tt.q); got != tt.want {
				t.Fatalf("Equal = %v, want %v", got, tt.want)
			}
		})
	}
	ctx := WithPushPlan(context.Background(), &base)
	if p, ok := PushPlanFromContext(ctx); !ok || !p.Equal(base) {
		t.Fatal("plan not carried by the context")
	}
	if _, ok := PushPlanFromContext(context.Background()); ok {
		t.Fatal("plan found in an empty context")
	}
}
