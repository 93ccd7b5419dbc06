package diff

import (
	"bytes"
	"strings"
	"testing"

	"ironcurtain.dev/gateway/policy"
)

func rules(spec ...string) *policy.CompiledPolicy {
	p := &policy.CompiledPolicy{}
	for _, s := range spec {
		name, then, _ := strings.Cut(s, ":")
		st := policy.Allow
		if then == "escalate" {
			st = policy.Escalate
		}
		p.Rules = append(p.Rules, policy.CompiledRule{Name: name, If: policy.RuleCondition{Server: []string{"s"}}, Then: st, Reason: "r"})
	}
	return p
}

func TestRules(t *testing.T) {
	tests := []struct {
		name     string
		old, new *policy.CompiledPolicy
		want     string // kind:name, in report order
	}{
		{name: "identical", old: rules("a", "b"), new: rules("a", "b"), want: ""},
		{name: "added and removed", old: rules("a", "b"), new: rules("a", "c"), want: "removed:b added:c"},
		{name: "changed", old: rules("a", "b"), new: rules("a", "b:escalate"), want: "changed:b"},
		{name: "one move", old: rules("a", "b", "c", "d"), new: rules("a", "c", "d", "b"), want: "moved:b"},
		{name: "swap", old: rules("a", "b"), new: rules("b", "a"), want: "moved:a"},
		{name: "changed and moved", old: rules("a", "b"), new: rules("b:escalate", "a"), want: "changed:b moved:a"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			var got []string
			for _, c := range Rules(tt.old, tt.new) {
				got = append(got, c.Kind+":"+c.Name)
			}
			if strings.Join(got, " ") != tt.want {
				t.Errorf("changes = %v, want %s", got, tt.want)
			}
		})
	}
}

func TestLists(t *testing.T) {
	l := func(vals ...string) policy.ResolvedList {
		return policy.ResolvedList{Values: vals, ManualAdditions: []string{}, ManualRemovals: []string{}}
	}
	old := &policy.DynamicLists{Lists: map[string]policy.ResolvedList{"a": l("x", "y"), "b": l("z"), "c": l("q")}}
	nw := &policy.DynamicLists{Lists: map[string]policy.ResolvedList{"a": l("y", "w"), "c": l("q"), "d": l("n")}}
	got := Lists(old, nw)
	var s []string
	for _, c := range got {
		s = append(s, c.Kind+":"+c.Name+"+"+strings.Join(c.Added, ",")+"-"+strings.Join(c.Removed, ","))
	}
	if strings.Join(s, " ") != "changed:a+w-x removed:b+-z added:d+n-" {
		t.Errorf("lists = %v", s)
	}
	if len(Lists(nil, nil)) != 0 {
		t.Error("no files, no changes")
	}
}

func TestWrite(t *testing.T) {
	var b bytes.Buffer
	r := Report{Rules: Rules(rules("a", "b"), rules("b:escalate", "c"))}
	if err := r.Write(&b); err != nil {
		t.Fatal(err)
	}
	for _, want := range []string{"rules: 1 added, 1 removed, 1 changed, 0 moved", "- a (#1)", "+ c (#2)", "~ b (#2 -> #1)", "then: allow", "-> escalate"} {
		if !strings.Contains(b.String(), want) {
			t.Errorf("report lacks %q:\n%s", want, b.String())
		}
	}
	if r.Empty() || !(Report{}).Empty() {
		t.Error("Empty is wrong")
	}
}
