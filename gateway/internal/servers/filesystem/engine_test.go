package filesystem

import (
	"context"
	"path/filepath"
	"testing"

	"ironcurtain.dev/gateway/internal/servers"
	"ironcurtain.dev/gateway/policy"
)

// TestWithThePolicyEngine loads the declared annotations into the real
// engine (which validates them) and runs calls the way the hub does:
// evaluate, then call with the transport arguments. The engine's
// canonical paths are exactly what the server accepts.
func TestWithThePolicyEngine(t *testing.T) {
	e := newEnv(t)
	var anns []policy.ToolAnnotation
	for _, tool := range e.srv.Tools() {
		anns = append(anns, tool.Annotation)
	}
	// Inside the sandbox the engine allows read and write roles
	// structurally; deletes and reads in the sibling directory escalate,
	// everything else is denied by default.
	rules := &policy.CompiledPolicy{Rules: []policy.CompiledRule{
		{Name: "escalate-deletes", If: policy.RuleCondition{Roles: []policy.Role{roleDelete}}, Then: policy.Escalate, Reason: "deletes need approval"},
		{Name: "escalate-sibling-reads", If: policy.RuleCondition{Roles: []policy.Role{roleRead},
			Paths: &policy.PathCondition{Roles: []policy.Role{roleRead}, Within: e.sandbox2}}, Then: policy.Escalate, Reason: "ask first"},
	}}
	eng, err := policy.New(rules, nil, nil, policy.Settings{Sandbox: e.sandbox, Annotations: anns})
	if err != nil {
		t.Fatalf("the engine refuses the filesystem annotations: %v", err)
	}
	mustWrite(t, e.in("a.txt"), "alpha\n")
	ctx := context.Background()
	call := func(tool string, args map[string]any) (policy.Evaluation, servers.Result) {
		t.Helper()
		ev := eng.Evaluate(ctx, policy.Request{Server: ServerName, Tool: tool, Args: args})
		if ev.Decision.Status == policy.Deny {
			return ev, servers.ToolError(ev.Decision.Reason)
		}
		res, err := e.srv.Call(servers.WithCallInfo(ctx, servers.CallInfo{PolicyArgs: ev.Policy}), tool, ev.Transport)
		if err != nil {
			t.Fatal(err)
		}
		return ev, res
	}
	cases := []struct {
		name   string
		tool   string
		args   map[string]any
		status policy.Status
		ok     bool
	}{
		{name: "read", tool: "read_text_file", args: map[string]any{"path": e.in("a.txt")}, status: policy.Allow, ok: true},
		{name: "relative path resolved by the engine", tool: "read_text_file", args: map[string]any{"path": "a.txt"}, status: policy.Allow, ok: true},
		{name: "dry-run edit is a read", tool: "edit_file", args: map[string]any{"path": e.in("a.txt"), "dryRun": true,
			"edits": []any{map[string]any{"oldText": "alpha", "newText": "beta"}}}, status: policy.Allow, ok: true},
		{name: "edit", tool: "edit_file", args: map[string]any{"path": e.in("a.txt"),
			"edits": []any{map[string]any{"oldText": "alpha", "newText": "beta"}}}, status: policy.Allow, ok: true},
		{name: "write", tool: "write_file", args: map[string]any{"path": e.in("b.txt"), "content": "b"}, status: policy.Allow, ok: true},
		// move_file's source is also a delete: it escalates, and runs once approved.
		{name: "move", tool: "move_file", args: map[string]any{"source": e.in("b.txt"), "destination": e.in("c.txt")}, status: policy.Escalate, ok: true},
		// An approved escalation outside the sandbox still fails in the
		// server: the sandbox is the server's hard boundary.
		{name: "escalated outside read", tool: "read_text_file", args: map[string]any{"path": filepath.Join(e.sandbox2, "secret")}, status: policy.Escalate},
		{name: "write outside", tool: "write_file", args: map[string]any{"path": filepath.Join(e.outside, "x"), "content": "b"}, status: policy.Deny},
		{name: "introspection", tool: "list_allowed_directories", args: map[string]any{}, status: policy.Allow, ok: true},
		{name: "outside is not allowed", tool: "read_text_file", args: map[string]any{"path": filepath.Join(e.outside, "secret")}, status: policy.Deny},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			ev, res := call(tc.tool, tc.args)
			if ev.Decision.Status != tc.status {
				t.Fatalf("decision %v (%s), want %v", ev.Decision.Status, ev.Decision.Reason, tc.status)
			}
			if res.IsError == tc.ok {
				t.Fatalf("IsError = %v: %s", res.IsError, text(res))
			}
		})
	}
	e.assertOutsideIntact(t)
}
