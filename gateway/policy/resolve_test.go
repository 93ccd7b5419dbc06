package policy

import (
	"encoding/json"
	"strings"
	"testing"
)

func TestArgSpecResolve(t *testing.T) {
	spec := ArgSpec{
		Default: []Role{"read-path", "write-history", "delete-history"},
		When: []ConditionalRoles{
			{Condition: ArgCondition{Arg: "operation", Equals: "list"}, Roles: []Role{"read-path"}},
			{Condition: ArgCondition{Arg: "operation", In: []any{"create", "rename"}}, Roles: []Role{"read-path", "write-history"}},
			{Condition: ArgCondition{Arg: "force", Is: "truthy"}, Roles: []Role{"read-path", "delete-history"}},
			{Condition: ArgCondition{Arg: "depth", Equals: 2.0}, Roles: []Role{"write-history"}},
		},
	}
	tests := []struct {
		name string
		args map[string]any
		want string
	}{
		{name: "equals", args: map[string]any{"operation": "list"}, want: "read-path"},
		{name: "first matching clause wins", args: map[string]any{"operation": "list", "force": true}, want: "read-path"},
		{name: "in", args: map[string]any{"operation": "rename"}, want: "read-path,write-history"},
		{name: "truthy", args: map[string]any{"operation": "delete", "force": "yes"}, want: "read-path,delete-history"},
		{name: "falsy flag falls to default", args: map[string]any{"operation": "delete", "force": 0.0}, want: "read-path,write-history,delete-history"},
		{name: "missing discriminator", args: map[string]any{}, want: "read-path,write-history,delete-history"},
		{name: "nil args", args: nil, want: "read-path,write-history,delete-history"},
		{name: "no conversion between string and array", args: map[string]any{"operation": []any{"list"}}, want: "read-path,write-history,delete-history"},
		{name: "no conversion between string and number", args: map[string]any{"depth": "2"}, want: "read-path,write-history,delete-history"},
		{name: "numbers compare by value across types", args: map[string]any{"depth": json.Number("2")}, want: "write-history"},
		{name: "int", args: map[string]any{"depth": 2}, want: "write-history"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			got := spec.Resolve(tt.args)
			s := make([]string, len(got))
			for i, r := range got {
				s[i] = string(r)
			}
			if strings.Join(s, ",") != tt.want {
				t.Fatalf("Resolve = %v, want %s", s, tt.want)
			}
		})
	}
	if got := Static("read-path").Resolve(map[string]any{"x": 1.0}); len(got) != 1 || got[0] != "read-path" {
		t.Fatalf("static spec resolves to %v", got)
	}
}

func TestArgConditionHoldsIs(t *testing.T) {
	tests := []struct {
		name string
		is   string
		args map[string]any
		want bool
	}{
		{name: "present", is: "present", args: map[string]any{"x": 0.0}, want: true},
		{name: "present but null", is: "present", args: map[string]any{"x": nil}, want: false},
		{name: "absent", is: "absent", args: map[string]any{}, want: true},
		{name: "absent when null", is: "absent", args: map[string]any{"x": nil}, want: true},
		{name: "not absent when empty", is: "absent", args: map[string]any{"x": ""}, want: false},
		{name: "truthy string", is: "truthy", args: map[string]any{"x": "a"}, want: true},
		{name: "zero is falsy", is: "truthy", args: map[string]any{"x": 0.0}, want: false},
		{name: "empty array is truthy", is: "truthy", args: map[string]any{"x": []any{}}, want: true},
		{name: "empty string is falsy", is: "falsy", args: map[string]any{"x": ""}, want: true},
		{name: "missing is falsy", is: "falsy", args: map[string]any{}, want: true},
		{name: "unknown is never holds", is: "bogus", args: map[string]any{"x": true}, want: false},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			if got := (ArgCondition{Arg: "x", Is: tt.is}).Holds(tt.args); got != tt.want {
				t.Fatalf("Holds = %v, want %v", got, tt.want)
			}
		})
	}
}
