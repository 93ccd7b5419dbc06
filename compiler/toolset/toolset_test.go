package toolset

import (
	"encoding/json"
	"strings"
	"testing"

	"ironcurtain.dev/gateway/policy"
)

func tool(t *testing.T, js string) Tool {
	t.Helper()
	var a policy.ToolAnnotation
	if err := json.Unmarshal([]byte(js), &a); err != nil {
		t.Fatal(err)
	}
	return NewTool(a)
}

const branchTool = `{"toolName":"branch","serverName":"git","args":{
 "path":{"default":["read-path","write-history","delete-history"],"when":[
  {"condition":{"arg":"operation","equals":"list"},"roles":["read-path"]},
  {"condition":{"arg":"operation","in":["create","rename"]},"roles":["read-path","write-history"]},
  {"condition":{"arg":"force","is":"truthy"},"roles":["read-path","delete-history"]}]},
 "operation":["none"],"force":["none"],"name":["branch-name"]},
 "inputSchema":{"type":"object","properties":{"path":{"type":"string"},"operation":{"type":"string","enum":["list","create","rename","delete"]},"force":{"type":"boolean"},"name":{"type":"string"}},"required":["path","operation"]}}`

func TestCheckArgs(t *testing.T) {
	br := tool(t, branchTool)
	bare := tool(t, `{"toolName":"t","serverName":"s","args":{"a":["none"]}}`)
	tests := []struct {
		name    string
		tool    Tool
		args    map[string]any
		wantErr string
	}{
		{name: "valid", tool: br, args: map[string]any{"path": "/w", "operation": "list"}},
		{name: "unknown argument", tool: br, args: map[string]any{"path": "/w", "operation": "list", "pth": "x"}, wantErr: `no argument "pth"`},
		{name: "missing required", tool: br, args: map[string]any{"path": "/w"}, wantErr: `requires argument "operation"`},
		{name: "enum violated", tool: br, args: map[string]any{"path": "/w", "operation": "nuke"}, wantErr: "input schema"},
		{name: "wrong type", tool: br, args: map[string]any{"path": 7.0, "operation": "list"}, wantErr: "input schema"},
		{name: "annotation without schema", tool: bare, args: map[string]any{"a": "x"}},
		{name: "annotation without schema, unknown", tool: bare, args: map[string]any{"b": "x"}, wantErr: `no argument "b"`},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			err := tt.tool.CheckArgs(tt.args)
			if tt.wantErr == "" && err != nil || tt.wantErr != "" && (err == nil || !strings.Contains(err.Error(), tt.wantErr)) {
				t.Fatalf("err = %v, want %q", err, tt.wantErr)
			}
		})
	}
}

func TestResolveRoles(t *testing.T) {
	spec, _ := tool(t, branchTool).Annotation.Arg("path")
	tests := []struct {
		name string
		args map[string]any
		want string
	}{
		{name: "equals", args: map[string]any{"operation": "list"}, want: "read-path"},
		{name: "in", args: map[string]any{"operation": "rename"}, want: "read-path,write-history"},
		{name: "truthy", args: map[string]any{"operation": "delete", "force": true}, want: "read-path,delete-history"},
		{name: "falsy flag falls to default", args: map[string]any{"operation": "delete", "force": false}, want: "read-path,write-history,delete-history"},
		{name: "missing discriminator", args: map[string]any{}, want: "read-path,write-history,delete-history"},
		{name: "type mismatch is not equal", args: map[string]any{"operation": []any{"list"}}, want: "read-path,write-history,delete-history"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			got := ResolveRoles(spec, tt.args)
			s := make([]string, len(got))
			for i, r := range got {
				s[i] = string(r)
			}
			if strings.Join(s, ",") != tt.want {
				t.Errorf("roles = %v, want %s", s, tt.want)
			}
		})
	}
}

func TestHoldsIsConditions(t *testing.T) {
	tests := []struct {
		is   string
		args map[string]any
		want bool
	}{
		{is: "present", args: map[string]any{"x": 0.0}, want: true},
		{is: "present", args: map[string]any{"x": nil}, want: false},
		{is: "absent", args: map[string]any{}, want: true},
		{is: "absent", args: map[string]any{"x": ""}, want: false},
		{is: "truthy", args: map[string]any{"x": "a"}, want: true},
		{is: "truthy", args: map[string]any{"x": 0.0}, want: false},
		{is: "truthy", args: map[string]any{"x": []any{}}, want: true},
		{is: "falsy", args: map[string]any{"x": ""}, want: true},
		{is: "falsy", args: map[string]any{}, want: true},
		{is: "bogus", args: map[string]any{"x": true}, want: false},
	}
	for _, tt := range tests {
		if got := (policy.ArgCondition{Arg: "x", Is: tt.is}).Holds(tt.args); got != tt.want {
			t.Errorf("%s %v = %v, want %v", tt.is, tt.args, got, tt.want)
		}
	}
	if !(policy.ArgCondition{Arg: "n", Equals: 2.0}).Holds(map[string]any{"n": json.Number("2")}) {
		t.Error("numbers of different Go types must compare by value")
	}
}

func TestFallsBackToDefault(t *testing.T) {
	br := tool(t, branchTool)
	if fb, why := br.FallsBackToDefault(map[string]any{"path": "/w", "operation": "delete"}); !fb || !strings.Contains(why, `operation="delete"`) {
		t.Errorf("delete without force: fallback %v (%s)", fb, why)
	}
	if fb, _ := br.FallsBackToDefault(map[string]any{"path": "/w", "operation": "list"}); fb {
		t.Error("list matches a clause")
	}
	plain := tool(t, `{"toolName":"t","serverName":"s","args":{"a":["read-path"]}}`)
	if fb, _ := plain.FallsBackToDefault(map[string]any{}); fb {
		t.Error("a tool without conditional specs never falls back")
	}
}

func TestDescribe(t *testing.T) {
	out := Describe([]Tool{tool(t, branchTool)})
	for _, want := range []string{
		"- git/branch",
		`when operation="list" -> [read-path]`,
		`when operation in ["create","rename"] -> [read-path, write-history]`,
		"when force is truthy",
		`operation (string one of ["list","create","rename","delete"], required)`,
		"name: [branch-name] (always)",
	} {
		if !strings.Contains(out, want) {
			t.Errorf("Describe lacks %q:\n%s", want, out)
		}
	}
}
