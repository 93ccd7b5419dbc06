package policy

import (
	"strings"
	"testing"
)

// TestArtifactsReadExactly: the policy artifacts are read the way the
// original (TypeScript) IronCurtain reads them — names exact, each once —
// so the policy the gateway enforces is the policy the file says to anyone
// else who reads it. encoding/json took "Rules" for "rules" and "Roles"
// for a condition's "roles", and let a later duplicate win (a rule whose
// "then" said allow and then deny was a deny). Each case is refused, or
// read as the original reads it (an unknown name in metadata ignored).
func TestArtifactsReadExactly(t *testing.T) {
	tests := []struct {
		name, policy, ann, lists string
		want                     string // substring of the load error
	}{
		{name: "Rules for rules", policy: `{"Rules": [{"name": "r", "if": {}, "then": "allow", "reason": "x"}]}`, want: "compiled-policy.json: rules: missing"},
		{name: "rules twice", policy: `{"rules": [], "rules": [{"name": "r", "if": {}, "then": "allow", "reason": "x"}]}`, want: "compiled-policy.json: rules: a name appears twice"},
		{name: "then twice", policy: `{"rules": [{"name": "r", "if": {}, "then": "allow", "then": "deny", "reason": "x"}]}`, want: "rules[0].then: a name appears twice"},
		{name: "Then for then", policy: `{"rules": [{"name": "r", "if": {}, "Then": "allow", "reason": "x"}]}`, want: "rules[0].then: missing"},
		{name: "Roles for roles", policy: ruleJSON(`{"Roles": ["read-path"]}`), want: `rules[0].if: unknown field "Roles"`},
		{name: "Within for within", policy: ruleJSON(`{"paths": {"roles": ["read-path"], "Within": "/x"}}`), want: `rules[0].if: unknown field "paths.Within"`},
		{name: "condition server twice", policy: ruleJSON(`{"server": ["a"], "server": ["b"]}`), want: "rules[0].if.server: a name appears twice"},
		{name: "trailing value", policy: okPolicy + `{"rules": []}`, want: "compiled-policy.json: line 1"},
		{name: "invalid UTF-8", policy: `{"rules": [{"name": "r", "if": {}, "then": "allow", "reason": "` + "\xff" + `"}]}`, want: "compiled-policy.json: line 1"},
		{name: "Servers for servers", policy: okPolicy, ann: `{"Servers": {"s": {"tools": []}}}`, want: "tool-annotations.json: servers: missing"},
		{name: "servers twice", policy: okPolicy, ann: `{"servers": {}, "servers": {"s": {"tools": []}}}`, want: "tool-annotations.json: servers: a name appears twice"},
		{name: "server twice", policy: okPolicy, ann: `{"servers": {"s": {"tools": []}, "s": {"tools": []}}}`, want: "tool-annotations.json: servers.s: a name appears twice"},
		{name: "ToolName for toolName", policy: okPolicy, ann: `{"servers": {"s": {"tools": [{"ToolName": "t", "serverName": "s", "args": {"a": ["none"]}}]}}}`, want: "toolName"},
		{name: "conditional Default", policy: okPolicy, ann: `{"servers": {"s": {"tools": [{"toolName": "t", "args": {"a": {"Default": ["none"]}}}]}}}`, want: `unknown field "Default"`},
		{name: "duplicate in an input schema", policy: okPolicy, ann: `{"servers": {"s": {"tools": [{"toolName": "t", "serverName": "s", "args": {"a": ["none"]}, "inputSchema": {"type": "object", "type": "string"}}]}}}`, want: "servers.s.tools[0].inputSchema.type: a name appears twice"},
		{name: "Lists for lists", policy: okPolicy, lists: `{"Lists": {}}`, want: "dynamic-lists.json: lists: missing"},
		{name: "list values twice", policy: okPolicy, lists: `{"lists": {"l": {"values": ["a"], "values": ["b"], "manualAdditions": [], "manualRemovals": []}}}`, want: "dynamic-lists.json: lists.l.values: a name appears twice"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			_, err := LoadDir(writeDir(t, tt.policy, tt.ann, tt.lists), Settings{})
			if err == nil || !strings.Contains(err.Error(), tt.want) {
				t.Fatalf("LoadDir = %v, want an error containing %q", err, tt.want)
			}
		})
	}
	// An unknown name in metadata is still ignored, as the original does.
	if _, err := LoadDir(writeDir(t, `{"rules": [{"name": "r", "if": {}, "then": "allow", "reason": "x", "note": "n"}], "compilerVersion": "1"}`,
		`{"servers": {"s": {"tools": [{"toolName": "t", "serverName": "s", "args": {"a": ["none"]}, "sideEffects": true}]}}, "note": 1}`, okLists), Settings{}); err != nil {
		t.Fatal(err)
	}
}
