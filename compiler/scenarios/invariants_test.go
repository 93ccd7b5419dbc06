package scenarios_test

import (
	"context"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"ironcurtain.dev/compiler/internal/testenv"
	"ironcurtain.dev/compiler/scenarios"
	"ironcurtain.dev/compiler/toolset"
	"ironcurtain.dev/compiler/verify"
	"ironcurtain.dev/gateway/policy"
)

func shippedAnnotations(t *testing.T) *policy.Annotations {
	t.Helper()
	p := filepath.Join(testenv.Dir(), "..", "..", "gateway", "policies", "base", "tool-annotations.json")
	b, err := os.ReadFile(p)
	if err != nil {
		t.Fatalf("the shipped annotations are missing: %v", err)
	}
	a, err := policy.ParseAnnotations(p, b)
	if err != nil {
		t.Fatal(err)
	}
	return a
}

func run(t *testing.T, ann *policy.Annotations, rules []policy.CompiledRule, list []scenarios.Scenario) []scenarios.Result {
	t.Helper()
	v, err := verify.NewVerifier(context.Background(), testenv.Settings())
	if err != nil {
		t.Fatal(err)
	}
	defer v.Close()
	e, err := v.Engine(&policy.CompiledPolicy{Rules: rules}, nil, ann)
	if err != nil {
		t.Fatal(err)
	}
	return v.Run(context.Background(), e, list)
}

// TestInvariantsHoldUnderDefaultDeny: with no rules at all every invariant
// holds, and every invariant call is a valid call of its tool (except the
// ones that probe unknown tools and arguments), so none passes vacuously.
func TestInvariantsHoldUnderDefaultDeny(t *testing.T) {
	for name, ann := range map[string]*policy.Annotations{"fixture": testenv.Annotations(t), "shipped": shippedAnnotations(t)} {
		t.Run(name, func(t *testing.T) {
			ts := toolset.NewTools(ann)
			list := scenarios.Invariants(ts, testenv.Settings())
			if len(list) < 10 {
				t.Fatalf("only %d invariants", len(list))
			}
			for _, r := range run(t, ann, []policy.CompiledRule{}, list) {
				if !r.Pass {
					t.Errorf("%s: got %s (%s: %s)", r.Scenario.Description, r.Decision.Status, r.Decision.Rule, r.Decision.Reason)
				}
				if r.Scenario.Source != scenarios.Invariant {
					t.Errorf("%s: source %s", r.Scenario.Description, r.Scenario.Source)
				}
				if strings.Contains(r.Scenario.Description, "unknown") || strings.Contains(r.Scenario.Description, "undeclared") || strings.Contains(r.Scenario.Description, "merge_pull_request") {
					continue
				}
				if err := ts.CheckCall(r.Scenario.Request.ServerName, r.Scenario.Request.ToolName, r.Scenario.Request.Arguments); err != nil {
					t.Errorf("%s: invalid call: %v", r.Scenario.Description, err)
				}
				// The denial must come from what the invariant is about, not
				// from a malformed call.
				if r.Decision.Rule == policy.RuleInvalidArgument || r.Decision.Rule == policy.RuleInternalError {
					t.Errorf("%s: decided by %s (%s)", r.Scenario.Description, r.Decision.Rule, r.Decision.Reason)
				}
			}
		})
	}
}

func allowRule(name, server string, cond policy.RuleCondition) policy.CompiledRule {
	cond.Server = []string{server}
	return policy.CompiledRule{Name: name, If: cond, Then: policy.Allow, Reason: "r"}
}

// TestInvariantsCatchPermissiveRules: rules a careless or hijacked model
// might write each break at least the named invariant.
func TestInvariantsCatchPermissiveRules(t *testing.T) {
	ann := testenv.Annotations(t)
	list := scenarios.Invariants(toolset.NewTools(ann), testenv.Settings())
	tests := []struct {
		name  string
		rules []policy.CompiledRule
		fails string
	}{
		{name: "allow every write", rules: []policy.CompiledRule{allowRule("w", "filesystem", policy.RuleCondition{Tool: []string{"write_file"}})},
			fails: "invariant: filesystem/write_file path (write-path) outside the sandbox is not allowed"},
		{name: "allow writes under /etc", rules: []policy.CompiledRule{allowRule("w", "filesystem", policy.RuleCondition{Paths: &policy.PathCondition{Roles: []policy.Role{policy.RoleWritePath}, Within: "/etc"}})},
			fails: "invariant: filesystem/write_file path (write-path) outside the sandbox is not allowed"},
		{name: "allow reading the home directory", rules: []policy.CompiledRule{allowRule("r", "filesystem", policy.RuleCondition{Paths: &policy.PathCondition{Roles: []policy.Role{policy.RoleReadPath}, Within: "~"}})},
			fails: "invariant: filesystem/read_file path of the user's SSH private key is not allowed"},
		{name: "allow every move", rules: []policy.CompiledRule{allowRule("m", "filesystem", policy.RuleCondition{Tool: []string{"move_file"}})},
			fails: "invariant: filesystem/move_file source (delete-path) outside the sandbox is not allowed"},
		{name: "allow every branch operation", rules: []policy.CompiledRule{allowRule("b", "git", policy.RuleCondition{Tool: []string{"branch"}})},
			fails: "invariant: git/branch path (write-history) outside the sandbox is not allowed"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			for _, r := range run(t, ann, tt.rules, list) {
				if r.Scenario.Description == tt.fails {
					if r.Pass {
						t.Errorf("%q still passes (%s by %s)", tt.fails, r.Decision.Status, r.Decision.Rule)
					}
					return
				}
			}
			t.Fatalf("no invariant %q", tt.fails)
		})
	}
}

// TestMetadataInvariantIsStructural: a rule allowing every fetch cannot
// open the cloud metadata endpoint: the engine denies a URL naming a
// special-purpose address itself (structural-special-host), whatever the
// rules say.
func TestMetadataInvariantIsStructural(t *testing.T) {
	ann := testenv.Annotations(t)
	list := scenarios.Invariants(toolset.NewTools(ann), testenv.Settings())
	const name = "invariant: fetch/http_fetch url of the cloud metadata endpoint is not allowed"
	for _, r := range run(t, ann, []policy.CompiledRule{allowRule("f", "fetch", policy.RuleCondition{Tool: []string{"http_fetch"}})}, list) {
		if r.Scenario.Description == name {
			if !r.Pass || r.Decision.Status != policy.Deny || r.Decision.Rule != policy.RuleSpecialHost {
				t.Errorf("%q: pass %v, %s by %s, want a pass by a deny of %s", name, r.Pass, r.Decision.Status, r.Decision.Rule, policy.RuleSpecialHost)
			}
			return
		}
	}
	t.Fatalf("no invariant %q", name)
}

// TestForcePushInvariantsHoldForTheRightReason: in the scratch repository
// the push invariants are denied by the push hardening itself, not because
// the repository is missing.
func TestForcePushInvariantsHoldForTheRightReason(t *testing.T) {
	ann := testenv.Annotations(t)
	var push []scenarios.Scenario
	for _, s := range scenarios.Invariants(toolset.NewTools(ann), testenv.Settings()) {
		if s.Request.ToolName == "push" {
			push = append(push, s)
		}
	}
	if len(push) != 2 {
		t.Fatalf("push invariants: %d, want protected branch and force", len(push))
	}
	for _, r := range run(t, ann, []policy.CompiledRule{}, push) {
		if !r.Pass || r.Decision.Rule != policy.RuleGitPush || strings.Contains(r.Decision.Reason, "not a git repository") {
			t.Errorf("%s: %s by %s: %s", r.Scenario.Description, r.Decision.Status, r.Decision.Rule, r.Decision.Reason)
		}
	}
}
