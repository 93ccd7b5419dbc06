package policy

import (
	"context"
	"strings"
	"testing"
)

func wireEngine(t *testing.T, rules []CompiledRule, trusted bool) *Engine {
	t.Helper()
	sandbox := t.TempDir()
	push := ToolAnnotation{Server: "git", Tool: "push", Args: []ArgAnnotation{
		{Name: "path", Spec: ArgSpec{Default: []Role{"read-path"}}},
		{Name: "remote", Spec: ArgSpec{Default: []Role{RoleGitRemoteURL}}},
	}}
	s := Settings{Sandbox: sandbox, Annotations: []ToolAnnotation{push},
		DomainAllowlists: map[string][]string{"git": {"github.com"}}}
	if trusted {
		s.TrustedServers = []string{"git"}
	}
	e, err := New(&CompiledPolicy{Rules: rules}, nil, nil, s)
	if err != nil {
		t.Fatal(err)
	}
	return e
}

// TestEvaluateWirePush: the push invariants refuse first, on the updates
// as classified; then the compiled rules and the domain gate decide as for
// git/push to the URL; the record lists every update.
func TestEvaluateWirePush(t *testing.T) {
	allow := []CompiledRule{{Name: "allow-all", Then: Allow, Reason: "ok"}}
	escalate := []CompiledRule{{Name: "esc-push", If: RuleCondition{Server: []string{"git"}, Roles: []Role{RoleGitRemoteURL}, Domains: &DomainCondition{Roles: []Role{RoleGitRemoteURL}, Allowed: []string{"*"}}}, Then: Escalate, Reason: "ask"}}
	create := RefUpdate{Ref: "refs/heads/feature", Kind: UpdateCreate, Old: strings.Repeat("0", 40), New: strings.Repeat("a", 40)}
	for _, tc := range []struct {
		name    string
		rules   []CompiledRule
		trusted bool
		url     string
		updates []RefUpdate
		status  Status
		rule    string
		reason  string
	}{
		{name: "create allowed", rules: allow, url: "https://github.com/acme/app.git", updates: []RefUpdate{create}, status: Allow, rule: "allow-all"},
		{name: "escalated by rule", rules: escalate, url: "https://github.com/acme/app.git", updates: []RefUpdate{create}, status: Escalate, rule: "esc-push"},
		{name: "domain outside the allowlist escalates", rules: allow, url: "https://gitlab.com/acme/app.git", updates: []RefUpdate{create}, status: Escalate, rule: RuleDomainEscalate},
		{name: "force", rules: allow, url: "https://github.com/acme/app.git", updates: []RefUpdate{create, {Ref: "refs/heads/x", Kind: UpdateForce}}, status: Deny, rule: RuleGitPush, reason: "force push"},
		{name: "protected in upper case", rules: allow, url: "https://github.com/acme/app.git", updates: []RefUpdate{{Ref: "refs/heads/MAIN", Kind: UpdateFastForward}}, status: Deny, rule: RuleGitPush, reason: "protected branch"},
		{name: "remote-tracking ref", rules: allow, url: "https://github.com/acme/app.git", updates: []RefUpdate{{Ref: "refs/remotes/origin/x", Kind: UpdateCreate}}, status: Deny, rule: RuleGitPush, reason: "outside refs/heads/"},
		{name: "delete, even for a trusted server", rules: allow, trusted: true, url: "https://github.com/acme/app.git", updates: []RefUpdate{{Ref: "refs/heads/x", Kind: UpdateDelete}}, status: Deny, rule: RuleGitPush, reason: "deleting"},
		{name: "trusted server", rules: nil, trusted: true, url: "https://github.com/acme/app.git", updates: []RefUpdate{create}, status: Allow, rule: RuleTrustedServer},
		{name: "no update", rules: allow, url: "https://github.com/acme/app.git", status: Deny, rule: RuleGitPush},
		{name: "local url", rules: allow, url: "/srv/repo.git", updates: []RefUpdate{create}, status: Deny, rule: RuleInvalidArgument},
		{name: "no rule", rules: []CompiledRule{{Name: "other", If: RuleCondition{Server: []string{"fetch"}}, Then: Allow, Reason: "x"}}, url: "https://github.com/acme/app.git", updates: []RefUpdate{create}, status: Deny, rule: RuleDefaultDeny},
	} {
		t.Run(tc.name, func(t *testing.T) {
			e := wireEngine(t, tc.rules, tc.trusted)
			ev := e.EvaluateWirePush(context.Background(), WirePush{URL: tc.url, Updates: tc.updates})
			if ev.Decision.Status != tc.status || ev.Decision.Rule != tc.rule || !strings.Contains(ev.Decision.Reason, tc.reason) {
				t.Fatalf("decision %+v, want %v %s %q", ev.Decision, tc.status, tc.rule, tc.reason)
			}
			ups, _ := ev.Policy["ref_updates"].([]any)
			if len(ups) != len(tc.updates) || ev.Push != nil {
				t.Fatalf("record %v, push %v", ev.Policy, ev.Push)
			}
		})
	}
}

// TestWirePushContextDoesNotLeak: an ordinary git/push call without a path
// is still refused (the wire-push bypass of the workspace plan exists only
// inside EvaluateWirePush).
func TestWirePushContextDoesNotLeak(t *testing.T) {
	e := wireEngine(t, []CompiledRule{{Name: "allow-all", Then: Allow, Reason: "ok"}}, false)
	ev := e.Evaluate(context.Background(), Request{Server: "git", Tool: "push", Args: map[string]any{"remote": "https://github.com/acme/app.git"}})
	if ev.Decision.Status != Deny || ev.Decision.Rule != RuleGitPush {
		t.Fatalf("decision %+v", ev.Decision)
	}
}

func TestGitDoorAllowed(t *testing.T) {
	e := wireEngine(t, nil, false)
	for _, tc := range []struct {
		url string
		ok  bool
	}{
		{url: "https://github.com/acme/app.git", ok: true},
		{url: "https://GITHUB.com/acme/app.git", ok: true},
		{url: "https://gitlab.com/acme/app.git"},
		{url: "ssh://git@github.com/acme/app.git"},
		{url: "https://github.com.evil.example/acme/app.git"},
		{url: "file:///srv/app.git"},
	} {
		if _, ok := e.GitDoorAllowed(tc.url); ok != tc.ok {
			t.Errorf("GitDoorAllowed(%q) = %v, want %v", tc.url, ok, tc.ok)
		}
	}
}
