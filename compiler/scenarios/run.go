package scenarios

import (
	"context"
	"encoding/json"
	"fmt"
	"strings"

	"ironcurtain.dev/gateway/policy"
)

// Result is a scenario run through the engine.
type Result struct {
	Scenario Scenario
	Decision policy.Decision
	Pass     bool
}

// Run evaluates every scenario with e, the production evaluator.
func Run(ctx context.Context, e *policy.Engine, list []Scenario) []Result {
	return Evaluator{Engine: e}.Run(ctx, list)
}

// Evaluator runs scenarios with an engine whose sandbox (Actual) stands in
// for the sandbox the scenarios are written against (Logical): string
// arguments equal to Logical or under it are moved under Actual before
// evaluation. Verification uses this to evaluate against a scratch git
// repository while scenarios and artifacts keep the deployment's paths.
type Evaluator struct {
	Engine          *policy.Engine
	Logical, Actual string
}

// Run evaluates every scenario.
func (ev Evaluator) Run(ctx context.Context, list []Scenario) []Result {
	out := make([]Result, len(list))
	for i, s := range list {
		req := s.Request.PolicyRequest()
		if ev.Logical != "" && ev.Actual != "" && ev.Logical != ev.Actual {
			req.Args, _ = ev.translate(req.Args).(map[string]any)
		}
		d := ev.Engine.Evaluate(ctx, req).Decision
		out[i] = Result{Scenario: s, Decision: d, Pass: s.ExpectedDecision.Met(d.Status)}
	}
	return out
}

func (ev Evaluator) translate(v any) any {
	switch x := v.(type) {
	case string:
		if x == ev.Logical {
			return ev.Actual
		}
		if rest, ok := strings.CutPrefix(x, strings.TrimSuffix(ev.Logical, "/")+"/"); ok {
			return strings.TrimSuffix(ev.Actual, "/") + "/" + rest
		}
		return x
	case []any:
		out := make([]any, len(x))
		for i, e := range x {
			out[i] = ev.translate(e)
		}
		return out
	case map[string]any:
		out := make(map[string]any, len(x))
		for k, e := range x {
			out[k] = ev.translate(e)
		}
		return out
	}
	return v
}

// Failures returns the failing results.
func Failures(rs []Result) []Result {
	var out []Result
	for _, r := range rs {
		if !r.Pass {
			out = append(out, r)
		}
	}
	return out
}

// Structural reports whether the decision came from a check in code rather
// than a compiled rule (the rule name starts with "structural-", or is
// "trusted-server").
func (r Result) Structural() bool {
	return strings.HasPrefix(r.Decision.Rule, "structural-") || r.Decision.Rule == policy.RuleTrustedServer
}

// FormatResults renders results for the judge: passes on one line, failures
// with the call, the expectation and the deciding rule.
func FormatResults(rs []Result) string {
	var b strings.Builder
	for i, r := range rs {
		if r.Pass {
			fmt.Fprintf(&b, "[%d] PASS: %s -> %s (rule: %s)\n", i+1, r.Scenario.Description, r.Decision.Status, r.Decision.Rule)
			continue
		}
		fmt.Fprintf(&b, "[%d] FAIL: %s\n", i+1, r.Scenario.Description)
		b.WriteString(formatCall(r))
	}
	return b.String()
}

// FormatFailures renders failing results for a repair prompt.
func FormatFailures(rs []Result) string {
	var b strings.Builder
	for i, r := range rs {
		fmt.Fprintf(&b, "[%d] %s\n", i+1, r.Scenario.Description)
		b.WriteString(formatCall(r))
	}
	return b.String()
}

func formatCall(r Result) string {
	args, _ := json.Marshal(r.Scenario.Request.Arguments)
	return fmt.Sprintf("    call: %s/%s %s\n    expected: %s, got: %s (rule: %s)\n    source: %s; reasoning: %s\n",
		r.Scenario.Request.ServerName, r.Scenario.Request.ToolName, args,
		r.Scenario.ExpectedDecision, r.Decision.Status, r.Decision.Rule, r.Scenario.Source, r.Scenario.Reasoning)
}
