// Package compile turns a constitution into the ordered rules of one tool
// server: the compile step asks the model for the rule set, the repair step
// asks it for a minimal patch (update, add, delete) that fixes the failures
// verification found. Every reply is schema-checked, semantically validated
// and loaded into the real policy engine before it is accepted; whatever is
// wrong is sent back to the model.
package compile

import (
	"context"
	"fmt"
	"strings"

	"ironcurtain.dev/compiler"
	"ironcurtain.dev/compiler/scenarios"
	"ironcurtain.dev/compiler/structured"
	"ironcurtain.dev/compiler/toolset"
	"ironcurtain.dev/gateway/policy"
)

// Input is what compiling one server needs.
type Input struct {
	Server       string
	Constitution string
	// Tools are the server's tools, sorted.
	Tools []toolset.Tool
	// Annotations are all annotations; candidate rules are loaded into an
	// engine with them to catch anything the engine would refuse.
	Annotations *policy.Annotations
	// Settings are the verification settings (sandbox, protected paths, home).
	Settings policy.Settings
	// GroundTruth are the handwritten and invariant scenarios of the server.
	GroundTruth []scenarios.Scenario
}

// Output is a server's rule set.
type Output struct {
	Rules []policy.CompiledRule
	Lists []policy.ListDefinition
}

// Session is the multi-turn conversation that compiles and repairs one
// server's rules; the model sees its earlier answers and what failed.
type Session struct {
	in     Input
	runner *structured.Runner
	system string
	tools  []string
	convo  []compiler.Message
}

// NewSession prepares the conversation for in.
func NewSession(r *structured.Runner, in Input) *Session {
	tools := make([]string, len(in.Tools))
	for i, t := range in.Tools {
		tools[i] = t.Annotation.Tool
	}
	return &Session{in: in, runner: r, system: SystemPrompt(in), tools: tools}
}

// System returns the session's system prompt.
func (s *Session) System() string { return s.system }

type output struct {
	Rules           []policy.CompiledRule   `json:"rules"`
	ListDefinitions []policy.ListDefinition `json:"listDefinitions"`
}

// Compile asks for the server's rules.
func (s *Session) Compile(ctx context.Context) (Output, error) {
	res, err := structured.Generate(ctx, s.runner, structured.Request{
		Step:   "compile/" + s.in.Server,
		System: s.system,
		User:   fmt.Sprintf("Compile the constitution into rules for the %q server, following the instructions above.", s.in.Server),
		Schema: outputSchema(s.in.Server, s.tools),
	}, func(o *output) error { return s.check(o.Rules, o.ListDefinitions, nil) })
	if err != nil {
		return Output{}, fmt.Errorf("compiling rules for %s: %w", s.in.Server, err)
	}
	s.convo = res.Conversation
	return Output{Rules: nonNil(res.Value.Rules), Lists: res.Value.ListDefinitions}, nil
}

// Repair asks for a patch of cur that fixes failures; analysis is the
// judge's explanation.
func (s *Session) Repair(ctx context.Context, cur Output, failures []scenarios.Result, analysis string, attempt int) (Output, error) {
	names := make([]string, len(cur.Rules))
	for i, r := range cur.Rules {
		names[i] = r.Name
	}
	var merged []policy.CompiledRule
	var newLists []policy.ListDefinition
	check := func(p *patch) error {
		rules, err := p.apply(cur.Rules)
		if err != nil {
			return err
		}
		if err := s.check(rules, p.ListDefinitions, cur.Lists); err != nil {
			return fmt.Errorf("the patched rule set is invalid:\n%w", err)
		}
		merged, newLists = rules, p.ListDefinitions
		return nil
	}
	res, err := structured.Generate(ctx, s.runner, structured.Request{
		Step:    fmt.Sprintf("repair/%s/%d", s.in.Server, attempt),
		System:  s.system,
		History: s.convo,
		User:    repairPrompt(cur, failures, analysis, attempt),
		Schema:  patchSchema(s.in.Server, s.tools, names),
	}, check)
	if err != nil {
		return Output{}, fmt.Errorf("repairing rules for %s: %w", s.in.Server, err)
	}
	// check ran last on the accepted reply (or the cached one): merged and
	// newLists hold its result.
	s.convo = res.Conversation
	return Output{Rules: nonNil(merged), Lists: append(append([]policy.ListDefinition(nil), cur.Lists...), newLists...)}, nil
}

// check validates a candidate rule set and loads it into the engine.
func (s *Session) check(rules []policy.CompiledRule, defs, known []policy.ListDefinition) error {
	if err := Validate(rules, defs, known); err != nil {
		return err
	}
	all := append(append([]policy.ListDefinition(nil), known...), defs...)
	if _, err := policy.New(&policy.CompiledPolicy{Rules: nonNil(rules), ListDefinitions: all}, s.in.Annotations, EmptyLists(all), s.in.Settings); err != nil {
		return fmt.Errorf("the policy engine refuses the rules: %w", err)
	}
	return nil
}

// EmptyLists returns a dynamic-lists value with an empty entry per
// definition, so candidate rules referencing them load.
func EmptyLists(defs []policy.ListDefinition) *policy.DynamicLists {
	l := &policy.DynamicLists{Lists: map[string]policy.ResolvedList{}}
	for _, d := range defs {
		l.Lists[d.Name] = policy.ResolvedList{Values: []string{}, ManualAdditions: []string{}, ManualRemovals: []string{}}
	}
	return l
}

func nonNil(r []policy.CompiledRule) []policy.CompiledRule {
	if r == nil {
		return []policy.CompiledRule{}
	}
	return r
}

func repairPrompt(cur Output, failures []scenarios.Result, analysis string, attempt int) string {
	var b strings.Builder
	fmt.Fprintf(&b, "## Repair %d\n\nThe rules were run through the real engine and these scenarios failed.\n\n### Current rules\n\n%s\n### Failed scenarios\n\n%s",
		attempt, FormatRules(cur.Rules), scenarios.FormatFailures(failures))
	if strings.TrimSpace(analysis) != "" {
		fmt.Fprintf(&b, "\n### Judge's analysis\n\n%s\n", strings.TrimSpace(analysis))
	}
	if len(cur.Lists) > 0 {
		b.WriteString("\n### Defined lists (keep their names; you may define new ones)\n\n")
		for _, d := range cur.Lists {
			fmt.Fprintf(&b, "- @%s (%s)\n", d.Name, d.Type)
		}
	}
	b.WriteString(`
### What to do

Reply with a PATCH: the smallest list of operations that makes every failed scenario pass without breaking the others.
- {"op": "update", "ruleName": N, "rule": {...}} replaces rule N (keep its name).
- {"op": "add", "afterRule": N, "rule": {...}} inserts a rule after N (first when afterRule is omitted).
- {"op": "delete", "ruleName": N} removes rule N.
Operations apply in order. Handwritten and invariant scenarios are ground truth: change the rules, not the expectation.`)
	return b.String()
}
