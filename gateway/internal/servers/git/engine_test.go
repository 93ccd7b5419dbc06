package git

import (
	"context"
	"net/netip"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"ironcurtain.dev/gateway/gitremote"
	"ironcurtain.dev/gateway/internal/servers"
	"ironcurtain.dev/gateway/policy"
)

// newEngine builds the real policy engine over the server's declared
// annotations with a catch-all allow rule: structural checks (push
// hardening, remote resolution, domain allowlist) still apply.
func newEngine(t *testing.T, g *genv, allow []string) *policy.Engine {
	t.Helper()
	var anns []policy.ToolAnnotation
	for _, tool := range g.srv.Tools() {
		anns = append(anns, tool.Annotation)
	}
	rules := &policy.CompiledPolicy{Rules: []policy.CompiledRule{{Name: "allow-everything", Then: policy.Allow, Reason: "test"}}}
	// The test's git servers listen on loopback: the engine is told so as
	// a deployment tells it egress.unsafe_allow_addresses (else a URL
	// naming 127.0.0.1 is structural-special-host).
	e, err := policy.New(rules, nil, nil, policy.Settings{Sandbox: g.sandbox, Annotations: anns,
		DomainAllowlists:     map[string][]string{"git": allow},
		UnsafeAllowAddresses: []netip.Prefix{netip.MustParsePrefix("127.0.0.0/8")}}, policy.WithRemoteResolver(gitremote.New(gitremote.Options{})))
	if err != nil {
		t.Fatalf("the engine refuses the server's annotations: %v", err)
	}
	return e
}

// hubCall does what the hub does: evaluate, treat an escalation as
// approved by a human, then call the server with the transport arguments
// and the policy's view in CallInfo. between runs after the decision and
// before the call (a human taking time to approve).
func hubCall(t *testing.T, e *policy.Engine, g *genv, tool string, args map[string]any, between func()) (servers.Result, policy.Evaluation) {
	t.Helper()
	ctx := context.Background()
	ev := e.Evaluate(ctx, policy.Request{Server: "git", Tool: tool, Args: args})
	if ev.Decision.Status == policy.Deny {
		return servers.ToolError("denied by policy: " + ev.Decision.Reason), ev
	}
	if between != nil {
		between()
	}
	ci := servers.CallInfo{CallID: "c1", Approved: ev.Decision.Status == policy.Escalate, PolicyArgs: ev.Policy, Push: ev.Push}
	res, err := g.srv.Call(servers.WithCallInfo(ctx, ci), tool, ev.Transport)
	if err != nil {
		t.Fatalf("%s: Go error %v", tool, err)
	}
	return res, ev
}

// TestWithThePolicyEngine runs calls through the real engine the way the hub
// does, including the approval window: a remote re-pointed while a human
// looks at the escalation is refused.
func TestWithThePolicyEngine(t *testing.T) {
	e := newHTTPSEnv(t, nil)
	evil := e.h.serveBare(t, "evil.git", "")
	eng := newEngine(t, e.genv, []string{"github.com"}) // the test server's host escalates
	rawGit(t, e.repo, "switch", "-q", "-c", "feature")
	writeFile(t, filepath.Join(e.repo, "f.txt"), "f\n")
	rawGit(t, e.repo, "add", "f.txt")
	rawGit(t, e.repo, "commit", "-q", "-m", "feature")

	res, ev := hubCall(t, eng, e.genv, "push", map[string]any{"path": e.repo, "branch": "feature"}, nil)
	if ev.Decision.Status != policy.Escalate || ev.Push == nil {
		t.Fatalf("decision %+v", ev.Decision)
	}
	mustOK(t, res)
	if rawGit(t, e.bare, "rev-parse", "refs/heads/feature") != rawGit(t, e.repo, "rev-parse", "feature") {
		t.Fatal("push did not land")
	}

	writeFile(t, filepath.Join(e.repo, "f.txt"), "g\n")
	rawGit(t, e.repo, "commit", "-qam", "more")
	res, _ = hubCall(t, eng, e.genv, "push", map[string]any{"path": e.repo, "branch": "feature"}, func() {
		rawGit(t, e.repo, "remote", "set-url", "origin", e.h.url("evil.git"))
	})
	mustFail(t, res, "repository changed")
	if refs := rawGit(t, evil, "for-each-ref"); refs != "" {
		t.Fatalf("the re-pointed remote received objects: %s", refs)
	}
	rawGit(t, e.repo, "remote", "set-url", "origin", e.h.url("app.git"))

	res, _ = hubCall(t, eng, e.genv, "fetch", map[string]any{"path": e.repo}, func() {
		rawGit(t, e.repo, "remote", "set-url", "origin", e.h.url("evil.git"))
	})
	mustFail(t, res, "not what the policy approved")
	rawGit(t, e.repo, "remote", "set-url", "origin", e.h.url("app.git"))
	mustOK(t, first(hubCall(t, eng, e.genv, "fetch", map[string]any{"path": e.repo}, nil)))

	clone := filepath.Join(e.sandbox, "c")
	mustOK(t, first(hubCall(t, eng, e.genv, "clone", map[string]any{"url": e.h.url("app.git"), "path": clone}, nil)))
	if _, err := os.Stat(filepath.Join(clone, "README")); err != nil {
		t.Fatal("clone through the engine has no files")
	}

	// The engine's own structural checks stop a protected push before the
	// server sees it; the server refuses it on its own too (TestPushRefusals).
	res, ev = hubCall(t, eng, e.genv, "push", map[string]any{"path": e.repo, "branch": "feature:main"}, nil)
	if ev.Decision.Status != policy.Deny || !strings.Contains(text(res), "protected") {
		t.Fatalf("protected push: %+v %s", ev.Decision, text(res))
	}
	e.assertTokenNowhere(t)
}

func first(r servers.Result, _ policy.Evaluation) servers.Result { return r }

// TestAnnotationsLoadAndPinRoles: the engine accepts every annotation, and
// the roles that drive the shipped policy are pinned.
func TestAnnotationsLoadAndPinRoles(t *testing.T) {
	g := newGenv(t, nil)
	eng := newEngine(t, g, nil)
	repo := g.repo("r")
	decide := func(tool string, args map[string]any) []policy.Role {
		ann, ok := eng.Annotation("git", tool)
		if !ok {
			t.Fatalf("no annotation for %s", tool)
		}
		_ = ann
		var roles []policy.Role
		for _, a := range ann.Args {
			if a.Name != "path" {
				continue
			}
			spec := a.Spec
			roles = spec.Default
			for _, w := range spec.When {
				if holds(w.Condition, args) {
					roles = w.Roles
					break
				}
			}
		}
		return roles
	}
	cases := []struct {
		tool string
		args map[string]any
		want []policy.Role
	}{
		{tool: "status", args: at(repo), want: []policy.Role{rRead}},
		{tool: "commit", args: at(repo, "message", "m"), want: []policy.Role{rWrite}},
		{tool: "commit", args: at(repo, "message", "m", "amend", true), want: []policy.Role{rWrite, rWHist}},
		{tool: "branch", args: at(repo), want: []policy.Role{rRead}},
		{tool: "branch", args: at(repo, "operation", "delete"), want: []policy.Role{rDHist}},
		{tool: "reset", args: at(repo), want: []policy.Role{rWHist}},
		{tool: "reset", args: at(repo, "mode", "hard"), want: []policy.Role{rWHist, rDelete}},
		{tool: "tag", args: at(repo, "operation", "delete"), want: []policy.Role{rDHist}},
		{tool: "stash", args: at(repo, "operation", "clear"), want: []policy.Role{rDHist}},
		{tool: "rebase", args: at(repo), want: []policy.Role{rWHist}},
		{tool: "merge", args: at(repo), want: []policy.Role{rWHist}},
		{tool: "pull", args: at(repo, "rebase", true), want: []policy.Role{rWrite, rWHist}},
		{tool: "worktree", args: at(repo, "operation", "remove"), want: []policy.Role{rDelete}},
	}
	for _, tc := range cases {
		got := decide(tc.tool, tc.args)
		if len(got) != len(tc.want) {
			t.Fatalf("%s %v: roles %v, want %v", tc.tool, tc.args, got, tc.want)
		}
		for i := range got {
			if got[i] != tc.want[i] {
				t.Fatalf("%s %v: roles %v, want %v", tc.tool, tc.args, got, tc.want)
			}
		}
	}
	for _, tool := range []string{"push", "fetch", "pull", "clone", "remote"} {
		ann, _ := eng.Annotation("git", tool)
		found := false
		for _, a := range ann.Args {
			for _, r := range a.Spec.Default {
				found = found || r == rRemote
			}
		}
		if !found {
			t.Fatalf("%s has no git-remote-url argument", tool)
		}
	}
}

// holds evaluates the subset of conditions the annotations use.
func holds(c policy.ArgCondition, args map[string]any) bool {
	v, present := args[c.Arg]
	switch {
	case c.Is == "absent":
		return !present || v == nil
	case c.Is == "falsy":
		return !present || v == nil || v == false
	case c.Equals != nil:
		return v == c.Equals
	case len(c.In) > 0:
		for _, x := range c.In {
			if v == x {
				return true
			}
		}
	}
	return false
}
