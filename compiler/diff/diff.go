// Package diff compares two compiled policies: the rules added, removed,
// changed and moved (order matters: first match wins), the dynamic lists'
// effective values, and, given scenarios, the decisions the real engine
// makes differently under the new policy.
package diff

import (
	"context"
	"encoding/json"
	"fmt"
	"io"
	"sort"
	"strings"

	"ironcurtain.dev/compiler/scenarios"
	"ironcurtain.dev/gateway/policy"
)

// Change kinds.
const (
	Added   = "added"
	Removed = "removed"
	Changed = "changed"
	Moved   = "moved"
)

// RuleChange is one difference between the rule lists.
type RuleChange struct {
	Kind     string
	Name     string
	Old, New *policy.CompiledRule
	// OldIndex and NewIndex are 1-based positions (0 when absent).
	OldIndex, NewIndex int
}

// ListChange is a difference in one list's effective values.
type ListChange struct {
	Kind           string
	Name           string
	Added, Removed []string
}

// DecisionChange is a scenario the two policies decide differently.
type DecisionChange struct {
	Scenario scenarios.Scenario
	Old, New policy.Decision
}

// Report is the whole comparison.
type Report struct {
	Rules     []RuleChange
	Lists     []ListChange
	Decisions []DecisionChange
	// Scenarios is how many scenarios were evaluated.
	Scenarios int
}

// Empty reports whether nothing differs.
func (r Report) Empty() bool { return len(r.Rules) == 0 && len(r.Lists) == 0 && len(r.Decisions) == 0 }

// Rules compares the rule lists by name: a rule whose content differs is
// changed; a rule present in both whose relative order differs (outside the
// longest common ordering) is moved.
func Rules(oldP, newP *policy.CompiledPolicy) []RuleChange {
	oldIdx, newIdx := index(oldP), index(newP)
	var out []RuleChange
	for i := range oldP.Rules {
		r := &oldP.Rules[i]
		if _, ok := newIdx[r.Name]; !ok {
			out = append(out, RuleChange{Kind: Removed, Name: r.Name, Old: r, OldIndex: i + 1})
		}
	}
	var commonOld, commonNew []string
	for _, r := range oldP.Rules {
		if _, ok := newIdx[r.Name]; ok {
			commonOld = append(commonOld, r.Name)
		}
	}
	for _, r := range newP.Rules {
		if _, ok := oldIdx[r.Name]; ok {
			commonNew = append(commonNew, r.Name)
		}
	}
	stable := lcs(commonOld, commonNew)
	for i := range newP.Rules {
		r := &newP.Rules[i]
		j, ok := oldIdx[r.Name]
		if !ok {
			out = append(out, RuleChange{Kind: Added, Name: r.Name, New: r, NewIndex: i + 1})
			continue
		}
		o := &oldP.Rules[j]
		c := RuleChange{Name: r.Name, Old: o, New: r, OldIndex: j + 1, NewIndex: i + 1}
		switch {
		case canonical(o) != canonical(r):
			c.Kind = Changed
		case !stable[r.Name]:
			c.Kind = Moved
		default:
			continue
		}
		out = append(out, c)
	}
	return out
}

func index(p *policy.CompiledPolicy) map[string]int {
	m := make(map[string]int, len(p.Rules))
	for i, r := range p.Rules {
		if _, dup := m[r.Name]; !dup {
			m[r.Name] = i
		}
	}
	return m
}

func canonical(r *policy.CompiledRule) string {
	b, _ := json.Marshal(r)
	return string(b)
}

// lcs returns the names on a longest common subsequence of a and b.
func lcs(a, b []string) map[string]bool {
	n, m := len(a), len(b)
	dp := make([][]int, n+1)
	for i := range dp {
		dp[i] = make([]int, m+1)
	}
	for i := n - 1; i >= 0; i-- {
		for j := m - 1; j >= 0; j-- {
			if a[i] == b[j] {
				dp[i][j] = dp[i+1][j+1] + 1
			} else {
				dp[i][j] = max(dp[i+1][j], dp[i][j+1])
			}
		}
	}
	out := map[string]bool{}
	for i, j := 0, 0; i < n && j < m; {
		switch {
		case a[i] == b[j]:
			out[a[i]] = true
			i++
			j++
		case dp[i+1][j] >= dp[i][j+1]:
			i++
		default:
			j++
		}
	}
	return out
}

// Lists compares the effective values of the lists (nil means no file).
func Lists(oldL, newL *policy.DynamicLists) []ListChange {
	get := func(l *policy.DynamicLists) map[string]policy.ResolvedList {
		if l == nil {
			return nil
		}
		return l.Lists
	}
	o, n := get(oldL), get(newL)
	names := map[string]bool{}
	for k := range o {
		names[k] = true
	}
	for k := range n {
		names[k] = true
	}
	sorted := make([]string, 0, len(names))
	for k := range names {
		sorted = append(sorted, k)
	}
	sort.Strings(sorted)
	var out []ListChange
	for _, name := range sorted {
		ol, inOld := o[name]
		nl, inNew := n[name]
		c := ListChange{Name: name}
		switch {
		case !inOld:
			c.Kind, c.Added = Added, nl.Effective()
		case !inNew:
			c.Kind, c.Removed = Removed, ol.Effective()
		default:
			c.Kind = Changed
			c.Added, c.Removed = setDiff(nl.Effective(), ol.Effective()), setDiff(ol.Effective(), nl.Effective())
			if len(c.Added) == 0 && len(c.Removed) == 0 {
				continue
			}
		}
		out = append(out, c)
	}
	return out
}

func setDiff(a, b []string) []string {
	in := map[string]bool{}
	for _, v := range b {
		in[v] = true
	}
	var out []string
	for _, v := range a {
		if !in[v] {
			out = append(out, v)
		}
	}
	return out
}

// Runner evaluates scenarios with an engine (verify.Verifier, or
// scenarios.Evaluator for an engine used as is).
type Runner interface {
	Run(ctx context.Context, e *policy.Engine, list []scenarios.Scenario) []scenarios.Result
}

// Decisions evaluates every scenario under both engines and returns those
// whose status or deciding rule differs.
func Decisions(ctx context.Context, r Runner, oldE, newE *policy.Engine, list []scenarios.Scenario) []DecisionChange {
	oldR, newR := r.Run(ctx, oldE, list), r.Run(ctx, newE, list)
	var out []DecisionChange
	for i, s := range list {
		o, n := oldR[i].Decision, newR[i].Decision
		if o.Status != n.Status || o.Rule != n.Rule {
			out = append(out, DecisionChange{Scenario: s, Old: o, New: n})
		}
	}
	return out
}

// Write prints the report for a human.
func (r Report) Write(w io.Writer) error {
	var b strings.Builder
	counts := map[string]int{}
	for _, c := range r.Rules {
		counts[c.Kind]++
	}
	fmt.Fprintf(&b, "rules: %d added, %d removed, %d changed, %d moved\n", counts[Added], counts[Removed], counts[Changed], counts[Moved])
	for _, c := range r.Rules {
		switch c.Kind {
		case Added:
			fmt.Fprintf(&b, "+ %s (#%d): %s\n", c.Name, c.NewIndex, summary(c.New))
		case Removed:
			fmt.Fprintf(&b, "- %s (#%d): %s\n", c.Name, c.OldIndex, summary(c.Old))
		case Changed:
			fmt.Fprintf(&b, "~ %s (#%d -> #%d)\n", c.Name, c.OldIndex, c.NewIndex)
			writeFieldDiff(&b, c.Old, c.New)
		case Moved:
			fmt.Fprintf(&b, "> %s moved #%d -> #%d\n", c.Name, c.OldIndex, c.NewIndex)
		}
	}
	if len(r.Lists) > 0 {
		fmt.Fprintf(&b, "lists: %d changed\n", len(r.Lists))
		for _, c := range r.Lists {
			fmt.Fprintf(&b, "  @%s (%s): +%d -%d", c.Name, c.Kind, len(c.Added), len(c.Removed))
			if len(c.Added) > 0 {
				fmt.Fprintf(&b, " added %s", strings.Join(c.Added, ", "))
			}
			if len(c.Removed) > 0 {
				fmt.Fprintf(&b, " removed %s", strings.Join(c.Removed, ", "))
			}
			b.WriteByte('\n')
		}
	}
	if r.Scenarios > 0 {
		fmt.Fprintf(&b, "decisions: %d of %d scenarios change\n", len(r.Decisions), r.Scenarios)
		for _, d := range r.Decisions {
			args, _ := json.Marshal(d.Scenario.Request.Arguments)
			fmt.Fprintf(&b, "  %s\n    %s/%s %s\n    %s (%s) -> %s (%s)\n", d.Scenario.Description, d.Scenario.Request.ServerName, d.Scenario.Request.ToolName, args,
				d.Old.Status, d.Old.Rule, d.New.Status, d.New.Rule)
		}
	}
	_, err := io.WriteString(w, b.String())
	return err
}

func summary(r *policy.CompiledRule) string {
	cond, _ := json.Marshal(r.If)
	return fmt.Sprintf("if %s then %s", cond, r.Then)
}

func writeFieldDiff(b *strings.Builder, o, n *policy.CompiledRule) {
	field := func(name, ov, nv string) {
		if ov != nv {
			fmt.Fprintf(b, "    %s: %s\n    %s  -> %s\n", name, ov, strings.Repeat(" ", len(name)), nv)
		}
	}
	oc, _ := json.Marshal(o.If)
	nc, _ := json.Marshal(n.If)
	field("if", string(oc), string(nc))
	field("then", o.Then.String(), n.Then.String())
	field("reason", o.Reason, n.Reason)
	field("description", o.Description, n.Description)
	field("principle", o.Principle, n.Principle)
}
