package policy

import (
	"context"
	"testing"
)

// TestUnknownArgumentAgreesWithEvaluate: UnknownArgument names an argument
// exactly when Evaluate refuses the call as structural-unknown-argument.
func TestUnknownArgumentAgreesWithEvaluate(t *testing.T) {
	allow := []CompiledRule{{Name: "allow-all", Then: Allow, Reason: "ok"}}
	for _, tc := range []struct {
		name    string
		trusted bool
		tool    string
		args    map[string]any
		want    string // "" none
	}{
		{name: "known only", tool: "push", args: map[string]any{"path": "."}},
		{name: "one unknown", tool: "push", args: map[string]any{"path": ".", "x": map[string]any{"k": 1}}, want: "x"},
		{name: "the smallest unknown", tool: "push", args: map[string]any{"zz": 1, "b": 2, "path": "."}, want: "b"},
		{name: "case variant is unknown", tool: "push", args: map[string]any{"Path": "."}, want: "Path"},
		{name: "trusted server", trusted: true, tool: "push", args: map[string]any{"x": 1}},
		{name: "unknown tool", tool: "nope", args: map[string]any{"x": 1}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			e := wireEngine(t, allow, tc.trusted)
			got, ok := e.UnknownArgument("git", tc.tool, tc.args)
			if got != tc.want || ok != (tc.want != "") {
				t.Fatalf("UnknownArgument = %q %v, want %q", got, ok, tc.want)
			}
			ev := e.Evaluate(context.Background(), Request{Server: "git", Tool: tc.tool, Args: tc.args})
			if (ev.Decision.Rule == RuleUnknownArgument) != ok {
				t.Fatalf("Evaluate decided %s (%s); UnknownArgument %v", ev.Decision.Rule, ev.Decision.Reason, ok)
			}
		})
	}
}
