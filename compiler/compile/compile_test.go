package compile

import (
	"context"
	"encoding/json"
	"strings"
	"testing"

	"ironcurtain.dev/compiler/internal/fakemodel"
	"ironcurtain.dev/compiler/internal/testenv"
	"ironcurtain.dev/compiler/scenarios"
	"ironcurtain.dev/compiler/toolset"
	"ironcurtain.dev/gateway/policy"
)

func r(name string, then policy.Status, cond policy.RuleCondition) policy.CompiledRule {
	return policy.CompiledRule{Name: name, Description: "d", Principle: "p", If: cond, Then: then, Reason: "r"}
}

func TestValidate(t *testing.T) {
	news := policy.ListDefinition{Name: "news", Type: policy.MatchDomains, GenerationPrompt: "list news sites"}
	friends := policy.ListDefinition{Name: "friends", Type: policy.MatchEmails, GenerationPrompt: "list friends"}
	read := []policy.Role{policy.RoleReadPath}
	tests := []struct {
		name    string
		rules   []policy.CompiledRule
		defs    []policy.ListDefinition
		known   []policy.ListDefinition
		wantErr []string
	}{
		{name: "valid", rules: []policy.CompiledRule{
			r("fs-a", policy.Allow, policy.RuleCondition{Paths: &policy.PathCondition{Roles: read, Within: "~/Documents"}}),
			r("fetch-b", policy.Allow, policy.RuleCondition{Domains: &policy.DomainCondition{Roles: []policy.Role{policy.RoleFetchURL}, Allowed: []string{"@news", "*.example.com"}}}),
		}, defs: []policy.ListDefinition{news}},
		{name: "duplicate names", rules: []policy.CompiledRule{r("a", policy.Allow, policy.RuleCondition{}), r("a", policy.Escalate, policy.RuleCondition{})}, wantErr: []string{"used by an earlier rule"}},
		{name: "deny rule", rules: []policy.CompiledRule{r("a", policy.Deny, policy.RuleCondition{})}, wantErr: []string{"allow or escalate"}},
		{name: "structural imitation", rules: []policy.CompiledRule{r("deny-protected-path", policy.Escalate, policy.RuleCondition{})}, wantErr: []string{"structural checks"}},
		{name: "relative within", rules: []policy.CompiledRule{r("a", policy.Allow, policy.RuleCondition{Paths: &policy.PathCondition{Roles: read, Within: "Documents"}})}, wantErr: []string{"must be absolute"}},
		{name: "unclean within", rules: []policy.CompiledRule{r("a", policy.Allow, policy.RuleCondition{Paths: &policy.PathCondition{Roles: read, Within: "~/Documents/../.ssh"}})}, wantErr: []string{"not a clean path"}},
		{name: "root within", rules: []policy.CompiledRule{r("a", policy.Allow, policy.RuleCondition{Paths: &policy.PathCondition{Roles: read, Within: "/"}})}, wantErr: []string{"whole filesystem"}},
		{name: "url role in paths", rules: []policy.CompiledRule{r("a", policy.Allow, policy.RuleCondition{Paths: &policy.PathCondition{Roles: []policy.Role{policy.RoleFetchURL}, Within: "/x"}})}, wantErr: []string{"is a url role, not path"}},
		{name: "unknown role", rules: []policy.CompiledRule{r("a", policy.Allow, policy.RuleCondition{Roles: []policy.Role{"root-path"}})}, wantErr: []string{`unknown role "root-path"`}},
		{name: "undefined list", rules: []policy.CompiledRule{r("a", policy.Allow, policy.RuleCondition{Domains: &policy.DomainCondition{Roles: []policy.Role{policy.RoleFetchURL}, Allowed: []string{"@nope"}}})}, wantErr: []string{"@nope has no list definition"}},
		{name: "email list in domains", rules: []policy.CompiledRule{r("a", policy.Allow, policy.RuleCondition{Domains: &policy.DomainCondition{Roles: []policy.Role{policy.RoleFetchURL}, Allowed: []string{"@friends"}}})}, defs: []policy.ListDefinition{friends}, wantErr: []string{"only domains lists belong"}},
		{name: "domains list in lists", rules: []policy.CompiledRule{r("a", policy.Allow, policy.RuleCondition{Lists: []policy.ListCondition{{Roles: []policy.Role{policy.RoleEmailAddress}, Allowed: []string{"@news"}, MatchType: policy.MatchDomains}}})}, defs: []policy.ListDefinition{news}, wantErr: []string{"put it in domains.allowed"}},
		{name: "match type mismatch", rules: []policy.CompiledRule{r("a", policy.Allow, policy.RuleCondition{Lists: []policy.ListCondition{{Roles: []policy.Role{policy.RoleEmailAddress}, Allowed: []string{"@friends"}}}})}, defs: []policy.ListDefinition{friends}, wantErr: []string{"does not match @friends"}},
		{name: "bad domain pattern", rules: []policy.CompiledRule{r("a", policy.Allow, policy.RuleCondition{Domains: &policy.DomainCondition{Roles: []policy.Role{policy.RoleFetchURL}, Allowed: []string{"*."}}})}, wantErr: []string{"allowed[0]"}},
		{name: "unused list", rules: nil, defs: []policy.ListDefinition{news}, wantErr: []string{"not referenced"}},
		{name: "list redefined with another type", rules: []policy.CompiledRule{r("a", policy.Allow, policy.RuleCondition{Lists: []policy.ListCondition{{Roles: []policy.Role{policy.RoleEmailAddress}, Allowed: []string{"@news"}, MatchType: policy.MatchEmails}}})},
			defs: []policy.ListDefinition{{Name: "news", Type: policy.MatchEmails, GenerationPrompt: "x"}}, known: []policy.ListDefinition{news}, wantErr: []string{"already exists with type domains"}},
		{name: "known list usable", rules: []policy.CompiledRule{r("a", policy.Allow, policy.RuleCondition{Domains: &policy.DomainCondition{Roles: []policy.Role{policy.RoleFetchURL}, Allowed: []string{"@news"}}})}, known: []policy.ListDefinition{news}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			err := Validate(tt.rules, tt.defs, tt.known)
			if len(tt.wantErr) == 0 {
				if err != nil {
					t.Fatal(err)
				}
				return
			}
			if err == nil {
				t.Fatal("no error")
			}
			for _, w := range tt.wantErr {
				if !strings.Contains(err.Error(), w) {
					t.Errorf("error lacks %q:\n%v", w, err)
				}
			}
		})
	}
}

func FuzzCheckWithin(f *testing.F) {
	for _, s := range []string{"~", "~/Documents", "/etc", "/", "~/a/../b", "/a/./b", "//x", "~user/x", "/a\x00b", ""} {
		f.Add(s)
	}
	f.Fuzz(func(t *testing.T, w string) {
		if checkWithin(w) != nil {
			return
		}
		if w == "/" || strings.ContainsAny(w, "\x00\\") || strings.Contains(w, "/../") || strings.HasSuffix(w, "/..") {
			t.Fatalf("checkWithin accepted %q", w)
		}
		if !(w == "~" || strings.HasPrefix(w, "~/") || strings.HasPrefix(w, "/")) {
			t.Fatalf("checkWithin accepted relative %q", w)
		}
	})
}

func TestPatchApply(t *testing.T) {
	base := []policy.CompiledRule{r("a", policy.Allow, policy.RuleCondition{}), r("b", policy.Allow, policy.RuleCondition{}), r("c", policy.Allow, policy.RuleCondition{})}
	nr := func(name string) *policy.CompiledRule {
		x := r(name, policy.Escalate, policy.RuleCondition{})
		return &x
	}
	tests := []struct {
		name    string
		ops     []patchOp
		want    string
		wantErr string
	}{
		{name: "empty", ops: nil, want: "a b c"},
		{name: "add first", ops: []patchOp{{Op: "add", Rule: nr("z")}}, want: "z a b c"},
		{name: "add after", ops: []patchOp{{Op: "add", AfterRule: "b", Rule: nr("z")}}, want: "a b z c"},
		{name: "add after added", ops: []patchOp{{Op: "add", AfterRule: "c", Rule: nr("y")}, {Op: "add", AfterRule: "y", Rule: nr("z")}}, want: "a b c y z"},
		{name: "update", ops: []patchOp{{Op: "update", RuleName: "b", Rule: nr("b")}}, want: "a b c"},
		{name: "delete", ops: []patchOp{{Op: "delete", RuleName: "a"}}, want: "b c"},
		{name: "rename by update", ops: []patchOp{{Op: "update", RuleName: "b", Rule: nr("x")}}, wantErr: "delete and add to rename"},
		{name: "update deleted", ops: []patchOp{{Op: "delete", RuleName: "b"}, {Op: "update", RuleName: "b", Rule: nr("b")}}, wantErr: "operations[1]: cannot update"},
		{name: "add duplicate", ops: []patchOp{{Op: "add", Rule: nr("a")}}, wantErr: "exists"},
		{name: "add after missing", ops: []patchOp{{Op: "add", AfterRule: "q", Rule: nr("z")}}, wantErr: `after "q"`},
		{name: "delete missing", ops: []patchOp{{Op: "delete", RuleName: "q"}}, wantErr: `delete "q"`},
		{name: "unknown op", ops: []patchOp{{Op: "swap"}}, wantErr: `unknown op "swap"`},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			p := &patch{Operations: tt.ops}
			got, err := p.apply(base)
			if tt.wantErr != "" {
				if err == nil || !strings.Contains(err.Error(), tt.wantErr) {
					t.Fatalf("err = %v, want %q", err, tt.wantErr)
				}
				return
			}
			if err != nil {
				t.Fatal(err)
			}
			var names []string
			for _, x := range got {
				names = append(names, x.Name)
			}
			if strings.Join(names, " ") != tt.want {
				t.Errorf("rules = %v, want %s", names, tt.want)
			}
			if base[1].Then != policy.Allow || len(base) != 3 {
				t.Error("apply modified its input")
			}
		})
	}
}

// TestSessionFeedsBackEngineAndSchemaErrors: a reply naming a tool the
// server lacks, then a reply with a rule the engine refuses, are both sent
// back with the reason; the third reply is accepted and a repair patch then
// applies to it.
func TestSessionFeedsBackEngineAndSchemaErrors(t *testing.T) {
	ann := testenv.Annotations(t)
	ts := toolset.NewTools(ann)
	bad1 := `{"rules":[{"name":"fetch-a","description":"d","principle":"p","if":{"server":["fetch"],"tool":["curl"]},"then":"allow","reason":"r"}]}`
	bad2 := `{"rules":[{"name":"fetch-a","description":"d","principle":"p","if":{"server":["fetch"],"domains":{"roles":["fetch-url"],"allowed":["exa mple.com"]}},"then":"allow","reason":"r"}]}`
	good := `{"rules":[{"name":"fetch-a","description":"d","principle":"p","if":{"server":["fetch"],"domains":{"roles":["fetch-url"],"allowed":["example.com"]}},"then":"allow","reason":"r"}]}`
	patch := `{"reasoning":"add escalate","operations":[{"op":"add","afterRule":"fetch-a","rule":{"name":"fetch-b","description":"d","principle":"p","if":{"server":["fetch"]},"then":"escalate","reason":"r"}}]}`
	var feedback []string
	answers := []string{bad1, bad2, good, patch}
	srv := fakemodel.New(func(req fakemodel.Request) fakemodel.Answer {
		if strings.Contains(req.Last(), "failed validation") {
			feedback = append(feedback, req.Last())
		}
		a := answers[0]
		answers = answers[1:]
		return fakemodel.Answer{Text: a}
	})
	defer srv.Close()
	runner := testenv.Runner(t, srv, testenv.RunnerOptions{Concurrency: 1})
	s := NewSession(runner, Input{Server: "fetch", Constitution: "c", Tools: ts.Server("fetch"), Annotations: ann, Settings: testenv.Settings(),
		GroundTruth: []scenarios.Scenario{{Description: "g", Request: scenarios.Request{ServerName: "fetch", ToolName: "http_fetch", Arguments: map[string]any{"url": "https://x"}}, ExpectedDecision: scenarios.ExpectDeny}}})
	if !strings.Contains(s.System(), "## Ground truth") || !strings.Contains(s.System(), `"fetch" tool server`) {
		t.Error("system prompt lacks the ground truth or the server")
	}
	out, err := s.Compile(context.Background())
	if err != nil {
		t.Fatal(err)
	}
	if len(feedback) != 2 || !strings.Contains(feedback[0], `"curl" is not one of ["http_fetch"]`) || !strings.Contains(feedback[1], "allowed[0]") {
		t.Fatalf("feedback = %q", feedback)
	}
	if len(out.Rules) != 1 || out.Rules[0].Name != "fetch-a" {
		t.Fatalf("rules = %+v", out.Rules)
	}
	fail := scenarios.Result{Scenario: scenarios.Scenario{Description: "x", Request: scenarios.Request{ServerName: "fetch", ToolName: "http_fetch"}}, Decision: policy.Decision{Rule: "default-deny"}}
	repaired, err := s.Repair(context.Background(), out, []scenarios.Result{fail}, "missing escalate", 1)
	if err != nil {
		t.Fatal(err)
	}
	if len(repaired.Rules) != 2 || repaired.Rules[1].Name != "fetch-b" {
		t.Fatalf("repaired = %+v", repaired.Rules)
	}
	// The repair request continued the conversation.
	reqs := srv.Requests()
	last := reqs[len(reqs)-1]
	if len(last.Messages) != 3 || !strings.Contains(last.Last(), "## Repair 1") || !strings.Contains(last.Last(), "missing escalate") {
		t.Errorf("repair request: %d messages, last %q", len(last.Messages), last.Last())
	}
	var prev map[string]any
	if err := json.Unmarshal([]byte(last.Messages[1].Content), &prev); err != nil {
		t.Errorf("the assistant turn is not the accepted JSON: %v", err)
	}
}
