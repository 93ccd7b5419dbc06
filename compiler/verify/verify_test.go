package verify

import (
	"context"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"ironcurtain.dev/compiler/internal/fakemodel"
	"ironcurtain.dev/compiler/internal/testenv"
	"ironcurtain.dev/compiler/scenarios"
	"ironcurtain.dev/compiler/toolset"
	"ironcurtain.dev/gateway/policy"
)

func results() []scenarios.Result {
	mk := func(desc string, pass bool) scenarios.Result {
		return scenarios.Result{Scenario: scenarios.Scenario{Description: desc, ExpectedDecision: scenarios.ExpectAllow,
			Request: scenarios.Request{ServerName: "fetch", ToolName: "http_fetch", Arguments: map[string]any{"url": "https://a.example"}}},
			Decision: policy.Decision{Status: policy.Deny, Rule: "default-deny"}, Pass: pass}
	}
	return []scenarios.Result{mk("ok one", true), mk("broken one", false), mk("broken two", false)}
}

// TestJudgeRequiresEveryFailureAttributed: a verdict that leaves a failure
// unattributed or proposes an invalid probe goes back to the model.
func TestJudgeRequiresEveryFailureAttributed(t *testing.T) {
	first := `{"analysis":"a","pass":false,"failureAttributions":[{"scenarioDescription":"broken one","blame":{"kind":"rule","reasoning":"r"}}],
 "additionalScenarios":[{"description":"p","request":{"serverName":"fetch","toolName":"http_fetch","arguments":{"uri":"x"}},"expectedDecision":"deny","reasoning":"r"}]}`
	second := `{"analysis":"b","pass":false,"failureAttributions":[
 {"scenarioDescription":"broken one","blame":{"kind":"rule","reasoning":"r"}},
 {"scenarioDescription":"broken two","blame":{"kind":"scenario","reasoning":"r","correctedDecision":"deny","correctedReasoning":"cr"}}],
 "additionalScenarios":[{"description":"probe","request":{"serverName":"fetch","toolName":"http_fetch","arguments":{"url":"https://b.example"}},"expectedDecision":"escalate","reasoning":"r"}]}`
	var feedback string
	srv := fakemodel.New(func(r fakemodel.Request) fakemodel.Answer {
		if strings.Contains(r.Last(), "failed validation") {
			feedback = r.Last()
			return fakemodel.Answer{Text: second}
		}
		return fakemodel.Answer{Text: first}
	})
	defer srv.Close()
	ts := toolset.NewTools(testenv.Annotations(t))
	j := NewJudge(testenv.Runner(t, srv, testenv.RunnerOptions{}), Input{Server: "fetch", Constitution: "c", Tools: ts.Server("fetch"), Settings: testenv.Settings()}, "initial")
	v, err := j.Round(context.Background(), results())
	if err != nil {
		t.Fatal(err)
	}
	for _, want := range []string{`the failure "broken two" has no entry`, `has no argument "uri"`} {
		if !strings.Contains(feedback, want) {
			t.Errorf("feedback lacks %q:\n%s", want, feedback)
		}
	}
	if v.Blames["broken two"].CorrectedDecision != scenarios.ExpectDeny || v.Blames["broken one"].Kind != BlameRule {
		t.Errorf("blames = %+v", v.Blames)
	}
	if len(v.Probes) != 1 || v.Probes[0].Source != scenarios.Generated {
		t.Errorf("probes = %+v", v.Probes)
	}
	reqs := srv.Requests()
	if !strings.Contains(reqs[0].System, "You verify that compiled policy rules") || !strings.Contains(reqs[0].Last(), "[2] FAIL: broken one") {
		t.Errorf("first request: %q", reqs[0].Last())
	}
}

func TestVerifierScratchSandbox(t *testing.T) {
	v, err := NewVerifier(context.Background(), testenv.Settings())
	if err != nil {
		t.Fatal(err)
	}
	dir := v.scratch
	if _, err := os.Stat(filepath.Join(dir, ".git", "HEAD")); err != nil {
		t.Fatalf("scratch sandbox is not a repository: %v", err)
	}
	if v.Settings().Sandbox != "/workspace" {
		t.Errorf("deployment sandbox = %q", v.Settings().Sandbox)
	}
	ann := testenv.Annotations(t)
	e, err := v.EngineFromArtifacts(&policy.CompiledPolicy{Rules: []policy.CompiledRule{}}, nil, ann)
	if err != nil {
		t.Fatal(err)
	}
	res := v.Run(context.Background(), e, []scenarios.Scenario{{
		Description: "read in the sandbox", ExpectedDecision: scenarios.ExpectAllow,
		Request: scenarios.Request{ServerName: "filesystem", ToolName: "read_file", Arguments: map[string]any{"path": "/workspace/a.txt"}},
	}})
	if !res[0].Pass || res[0].Decision.Rule != policy.RuleSandboxAllow {
		t.Errorf("sandbox read: %+v", res[0].Decision)
	}
	if err := v.Close(); err != nil {
		t.Fatal(err)
	}
	if _, err := os.Stat(dir); !os.IsNotExist(err) {
		t.Errorf("scratch sandbox left behind: %v", err)
	}
	if _, err := v.EngineFromArtifacts(&policy.CompiledPolicy{}, nil, nil); err == nil {
		t.Error("no annotations must be an error")
	}
}

// TestVerifierRebasesSandboxRules: a rule naming the deployment's sandbox
// applies to the scenarios aimed at the sandbox, which run in the scratch
// directory.
func TestVerifierRebasesSandboxRules(t *testing.T) {
	v, err := NewVerifier(context.Background(), testenv.Settings())
	if err != nil {
		t.Fatal(err)
	}
	defer v.Close()
	pol := &policy.CompiledPolicy{Rules: []policy.CompiledRule{{
		Name: "filesystem-escalate-delete-in-sandbox", Then: policy.Escalate, Reason: "r",
		If: policy.RuleCondition{Server: []string{"filesystem"}, Paths: &policy.PathCondition{Roles: []policy.Role{policy.RoleDeletePath}, Within: "/workspace"}},
	}, {
		Name: "filesystem-allow-write-in-sandbox", Then: policy.Allow, Reason: "r",
		If: policy.RuleCondition{Server: []string{"filesystem"}, Roles: []policy.Role{policy.RoleReadPath}, Paths: &policy.PathCondition{Roles: []policy.Role{policy.RoleReadPath}, Within: "/workspace"}},
	}}}
	e, err := v.EngineFromArtifacts(pol, nil, testenv.Annotations(t))
	if err != nil {
		t.Fatal(err)
	}
	res := v.Run(context.Background(), e, []scenarios.Scenario{{
		Description: "move inside the sandbox", ExpectedDecision: scenarios.ExpectEscalate,
		Request: scenarios.Request{ServerName: "filesystem", ToolName: "move_file", Arguments: map[string]any{"source": "/workspace/a", "destination": "/workspace/b"}},
	}})
	if !res[0].Pass {
		t.Errorf("in-sandbox move: %s by %s, want escalate by the rebased rule", res[0].Decision.Status, res[0].Decision.Rule)
	}
	if pol.Rules[0].If.Paths.Within != "/workspace" {
		t.Error("the verifier modified the policy")
	}
}
