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
	out := make([]Result, len(list))
	for i, s := range list {
		ev := e.Evaluate(ctx, s.Request.PolicyRequest())
		out[i] = Result{Scenario: s, Decision: ev.Decision, Pass: s.ExpectedDecision.Met(ev.Decision.Status)}
	}
	return out
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
