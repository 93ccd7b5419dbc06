package pipeline

import (
	"context"
	"encoding/json"
	"strings"
	"sync/atomic"
	"testing"

	"ironcurtain.dev/compiler/internal/fakemodel"
	"ironcurtain.dev/compiler/internal/testenv"
	"ironcurtain.dev/compiler/scenarios"
)

func answer(t *testing.T, v any) fakemodel.Answer {
	t.Helper()
	b, err := json.Marshal(v)
	if err != nil {
		t.Fatal(err)
	}
	return fakemodel.Answer{Text: string(b)}
}

type obj = map[string]any

func rule(name, then string, cond obj) obj {
	return obj{"name": name, "description": name, "principle": "p", "if": cond, "then": then, "reason": "r"}
}

func fsScenarios(t *testing.T) fakemodel.Answer {
	return answer(t, obj{"scenarios": []obj{{
		"description": "Read a note in ~/Documents", "expectedDecision": "deny", "reasoning": "r",
		"request": obj{"serverName": "filesystem", "toolName": "read_file", "arguments": obj{"path": "/home/agent/Documents/n.txt"}},
	}}})
}

// judgeBlamingScenarios attributes every FAIL of the results it is shown to
// the scenario, claiming the policy is right to allow it.
func judgeBlamingScenarios(r fakemodel.Request) fakemodel.Answer {
	var attrs []obj
	for _, line := range strings.Split(r.Last(), "\n") {
		_, desc, ok := strings.Cut(line, "] FAIL: ")
		if !ok {
			continue
		}
		attrs = append(attrs, obj{"scenarioDescription": desc, "blame": obj{"kind": "scenario", "reasoning": "The constitution clearly allows this.", "correctedDecision": "allow", "correctedReasoning": "Allowed."}})
	}
	b, _ := json.Marshal(obj{"analysis": "The scenarios are too strict.", "pass": true, "failureAttributions": attrs, "additionalScenarios": []obj{}})
	return fakemodel.Answer{Text: string(b)}
}

// TestHijackedModelCannotCertifyWritesOutsideSandbox plays a model that
// compiles a rule allowing every write and then, as judge, blames the
// ground-truth scenarios that catch it. Handwritten and invariant scenarios
// are never rewritten, the repair loop stops after two rounds, and the policy
// is reported NOT verified.
func TestHijackedModelCannotCertifyWritesOutsideSandbox(t *testing.T) {
	script := &fakemodel.Script{Entries: []fakemodel.Entry{
		{Name: "compile", System: []string{`for the "filesystem" tool server`}, Last: []string{"Compile the constitution"},
			Answers: []fakemodel.Answer{answer(t, obj{"rules": []obj{rule("filesystem-allow-writes", "allow", obj{"server": []string{"filesystem"}, "tool": []string{"write_file"}})}})}},
		{Name: "repair", System: []string{`for the "filesystem" tool server`}, Last: []string{"## Repair"},
			Answers: []fakemodel.Answer{answer(t, obj{"reasoning": "The rules are fine.", "operations": []obj{}})}, Repeat: true},
		{Name: "scenarios", System: []string{"You write test scenarios"}, Answers: []fakemodel.Answer{fsScenarios(t)}},
	}}
	var judges atomic.Int64
	srv := fakemodel.New(func(r fakemodel.Request) fakemodel.Answer {
		if strings.Contains(r.System, "You verify that compiled policy rules") {
			judges.Add(1)
			return judgeBlamingScenarios(r)
		}
		return script.Respond(r)
	})
	defer srv.Close()
	cfg := goldenConfig(t)
	cfg.Servers = []string{"filesystem"}
	res, err := Run(context.Background(), testenv.Runner(t, srv, testenv.RunnerOptions{Concurrency: 1}), cfg)
	if err != nil {
		t.Fatal(err)
	}
	if res.Verified {
		t.Fatal("a policy allowing writes outside the sandbox was verified")
	}
	fs := res.Servers[0]
	if fs.Repairs != MaxRepairs {
		t.Errorf("repairs = %d, want %d", fs.Repairs, MaxRepairs)
	}
	if judges.Load() != 1+MaxRepairs {
		t.Errorf("judge rounds = %d, want %d", judges.Load(), 1+MaxRepairs)
	}
	if len(fs.Refused) == 0 {
		t.Error("no refused correction recorded")
	}
	if srv.Calls() != 2+2*MaxRepairs+1 {
		t.Errorf("model calls = %d, want %d (compile, scenarios, judge, then repair+judge per round)", srv.Calls(), 2+2*MaxRepairs+1)
	}
	// Ground truth is written unchanged, and still fails.
	failing := map[string]bool{}
	for _, f := range scenarios.Failures(res.Final) {
		failing[f.Scenario.Description] = true
	}
	for _, want := range []string{
		"invariant: filesystem/write_file path (write-path) outside the sandbox is not allowed",
		"Write file outside sandbox -- not allowed",
	} {
		if !failing[want] {
			t.Errorf("%q does not fail against the merged policy", want)
		}
	}
	for _, s := range res.Scenarios.Scenarios {
		if s.Source.GroundTruth() && s.ExpectedDecision == scenarios.ExpectAllow && strings.Contains(s.Description, "outside") {
			t.Errorf("ground truth rewritten: %+v", s)
		}
	}
}

// TestFailingServerIsDeniedNotFatal makes one server's compile fail on every
// attempt: the others still compile, the failed server gets no rules (so
// every call to it is denied by default), it is listed in skippedServers,
// and the run is not verified.
func TestFailingServerIsDeniedNotFatal(t *testing.T) {
	script := &fakemodel.Script{Entries: []fakemodel.Entry{
		{Name: "compile filesystem", System: []string{`for the "filesystem" tool server`}, Answers: []fakemodel.Answer{{Text: "I cannot do that."}}, Repeat: true},
		{Name: "compile git", System: []string{`for the "git" tool server`}, Last: []string{"Compile the constitution"},
			Answers: []fakemodel.Answer{answer(t, obj{"rules": []obj{rule("git-allow-list-branches", "allow", obj{"server": []string{"git"}, "tool": []string{"branch"}, "roles": []string{"read-path"}})}})}},
		{Name: "scenarios git", System: []string{"You write test scenarios", "- git/branch"}, Answers: []fakemodel.Answer{answer(t, obj{"scenarios": []obj{{
			"description": "List branches elsewhere", "expectedDecision": "allow", "reasoning": "r",
			"request": obj{"serverName": "git", "toolName": "branch", "arguments": obj{"path": "/home/agent/app", "operation": "list"}},
		}}})}},
		{Name: "judge git", System: []string{"You verify"}, Answers: []fakemodel.Answer{answer(t, obj{"analysis": "ok", "pass": true, "failureAttributions": []obj{}, "additionalScenarios": []obj{}})}},
	}}
	srv := fakemodel.New(script.Respond)
	defer srv.Close()
	cfg := goldenConfig(t)
	cfg.Servers = []string{"filesystem", "git"}
	res, err := Run(context.Background(), testenv.Runner(t, srv, testenv.RunnerOptions{}), cfg)
	if err != nil {
		t.Fatal(err)
	}
	if res.Verified {
		t.Fatal("verified although a server failed")
	}
	if len(res.Policy.SkippedServers) != 1 || res.Policy.SkippedServers[0].ServerName != "filesystem" {
		t.Fatalf("skippedServers = %+v", res.Policy.SkippedServers)
	}
	for _, r := range res.Policy.Rules {
		if strings.HasPrefix(r.Name, "filesystem") {
			t.Errorf("rule of the failed server in the policy: %s", r.Name)
		}
	}
	if len(res.Policy.Rules) != 1 {
		t.Errorf("rules = %d, want the git rule", len(res.Policy.Rules))
	}
	// Every ground-truth scenario still holds: the failed server is denied.
	for _, f := range scenarios.Failures(res.Final) {
		t.Errorf("FAIL %q: %s", f.Scenario.Description, f.Decision.Status)
	}
}
