package compile

import (
	"fmt"

	"ironcurtain.dev/gateway/policy"
)

type patch struct {
	Reasoning       string                  `json:"reasoning"`
	Operations      []patchOp               `json:"operations"`
	ListDefinitions []policy.ListDefinition `json:"listDefinitions"`
}

type patchOp struct {
	Op        string               `json:"op"`
	RuleName  string               `json:"ruleName,omitempty"`
	AfterRule string               `json:"afterRule,omitempty"`
	Rule      *policy.CompiledRule `json:"rule,omitempty"`
}

// apply runs the operations in order on a copy of rules.
func (p *patch) apply(rules []policy.CompiledRule) ([]policy.CompiledRule, error) {
	out := append([]policy.CompiledRule(nil), rules...)
	find := func(name string) int {
		for i, r := range out {
			if r.Name == name {
				return i
			}
		}
		return -1
	}
	for i, op := range p.Operations {
		at := fmt.Sprintf("operations[%d]", i)
		switch op.Op {
		case "update":
			j := find(op.RuleName)
			switch {
			case j < 0:
				return nil, fmt.Errorf("%s: cannot update %q: no such rule (was it deleted earlier in the patch?)", at, op.RuleName)
			case op.Rule == nil:
				return nil, fmt.Errorf("%s: update needs a rule", at)
			case op.Rule.Name != op.RuleName:
				return nil, fmt.Errorf("%s: rule.name %q differs from ruleName %q; delete and add to rename", at, op.Rule.Name, op.RuleName)
			}
			out[j] = *op.Rule
		case "add":
			if op.Rule == nil {
				return nil, fmt.Errorf("%s: add needs a rule", at)
			}
			if find(op.Rule.Name) >= 0 {
				return nil, fmt.Errorf("%s: cannot add %q: a rule with that name exists (use update)", at, op.Rule.Name)
			}
			pos := 0
			if op.AfterRule != "" {
				j := find(op.AfterRule)
				if j < 0 {
					return nil, fmt.Errorf("%s: cannot add after %q: no such rule", at, op.AfterRule)
				}
				pos = j + 1
			}
			out = append(out[:pos], append([]policy.CompiledRule{*op.Rule}, out[pos:]...)...)
		case "delete":
			j := find(op.RuleName)
			if j < 0 {
				return nil, fmt.Errorf("%s: cannot delete %q: no such rule", at, op.RuleName)
			}
			out = append(out[:j], out[j+1:]...)
		default:
			return nil, fmt.Errorf("%s: unknown op %q", at, op.Op)
		}
	}
	return out, nil
}
