// Package toolset indexes the annotated tools the compiler works with: each
// tool's argument roles and parsed input schema, the checks a scenario's
// arguments must pass before they reach the engine, the resolution of
// conditional roles, and the text that describes the tools to the model.
package toolset

import (
	"encoding/json"
	"fmt"
	"sort"
	"strings"

	"github.com/google/jsonschema-go/jsonschema"

	"ironcurtain.dev/gateway/policy"
)

// Tool is an annotated tool with its parsed input schema, used to check the
// arguments of scenarios before they reach the engine.
type Tool struct {
	Annotation policy.ToolAnnotation
	// Props are the input schema's properties (nil when the schema is
	// missing or not an object schema).
	Props    map[string]*jsonschema.Schema
	Required []string
	resolved *jsonschema.Resolved
}

// NewTool parses the input schema of a. A schema jsonschema cannot resolve
// still yields its property names; only the value check is skipped.
func NewTool(a policy.ToolAnnotation) Tool {
	t := Tool{Annotation: a}
	if len(a.InputSchema) == 0 {
		return t
	}
	var s jsonschema.Schema
	if err := json.Unmarshal(a.InputSchema, &s); err != nil {
		return t
	}
	t.Props = s.Properties
	t.Required = s.Required
	if r, err := s.Resolve(nil); err == nil {
		t.resolved = r
	}
	return t
}

// Key is "server/tool".
func (t Tool) Key() string { return t.Annotation.Server + "/" + t.Annotation.Tool }

// ArgNames lists the arguments a call may carry: the annotated ones in
// annotation order, then schema properties the annotation lacks, sorted.
func (t Tool) ArgNames() []string {
	var out []string
	seen := map[string]bool{}
	for _, a := range t.Annotation.Args {
		out = append(out, a.Name)
		seen[a.Name] = true
	}
	var extra []string
	for name := range t.Props {
		if !seen[name] {
			extra = append(extra, name)
		}
	}
	sort.Strings(extra)
	return append(out, extra...)
}

// CheckArgs reports why args are not a valid call of t: unknown argument
// names (the engine denies those, so the scenario would test nothing),
// missing required arguments, or values the input schema rejects.
func (t Tool) CheckArgs(args map[string]any) error {
	known := map[string]bool{}
	for _, n := range t.ArgNames() {
		known[n] = true
	}
	var unknown []string
	for name := range args {
		if !known[name] {
			unknown = append(unknown, name)
		}
	}
	if len(unknown) > 0 {
		sort.Strings(unknown)
		return fmt.Errorf("%s has no argument %s (valid: %s)", t.Key(), strings.Join(quote(unknown), ", "), strings.Join(t.ArgNames(), ", "))
	}
	for _, r := range t.Required {
		if _, ok := args[r]; !ok {
			return fmt.Errorf("%s requires argument %q", t.Key(), r)
		}
	}
	if t.resolved != nil {
		if err := t.resolved.Validate(args); err != nil {
			return fmt.Errorf("%s arguments do not match its input schema: %w", t.Key(), err)
		}
	}
	return nil
}

func quote(s []string) []string {
	out := make([]string, len(s))
	for i, v := range s {
		out[i] = fmt.Sprintf("%q", v)
	}
	return out
}

// Tools indexes tools by "server/tool".
type Tools map[string]Tool

// NewTools indexes every annotation of ann.
func NewTools(ann *policy.Annotations) Tools {
	ts := Tools{}
	if ann == nil {
		return ts
	}
	for server, sa := range ann.Servers {
		for _, a := range sa.Tools {
			a.Server = server // the engine keys by the servers map key
			ts[server+"/"+a.Tool] = NewTool(a)
		}
	}
	return ts
}

// CheckCall validates a call of server's tool.
func (ts Tools) CheckCall(server, tool string, args map[string]any) error {
	t, ok := ts[server+"/"+tool]
	if !ok {
		return fmt.Errorf("unknown tool %s/%s", server, tool)
	}
	return t.CheckArgs(args)
}

// Server returns the tools of server sorted by name.
func (ts Tools) Server(server string) []Tool {
	var out []Tool
	for _, t := range ts {
		if t.Annotation.Server == server {
			out = append(out, t)
		}
	}
	sort.Slice(out, func(i, j int) bool { return out[i].Annotation.Tool < out[j].Annotation.Tool })
	return out
}

// Servers returns the server names, sorted.
func (ts Tools) Servers() []string {
	seen := map[string]bool{}
	var out []string
	for _, t := range ts {
		if !seen[t.Annotation.Server] {
			seen[t.Annotation.Server] = true
			out = append(out, t.Annotation.Server)
		}
	}
	sort.Strings(out)
	return out
}

// ResolveRoles returns the roles spec gives for args: the first when entry
// whose condition holds, else the default (the engine's own rule,
// policy.ArgSpec.Resolve).
func ResolveRoles(spec policy.ArgSpec, args map[string]any) []policy.Role {
	return spec.Resolve(args)
}

// FallsBackToDefault reports whether args make every conditional spec of
// the tool fall back to its default roles. Such a generated scenario tests
// the most restrictive mode instead of the one it describes; details say
// which discriminator was missing or unmatched.
func (t Tool) FallsBackToDefault(args map[string]any) (bool, string) {
	var conditional, fallbacks int
	var details []string
	for _, a := range t.Annotation.Args {
		if !a.Spec.Conditional() {
			continue
		}
		conditional++
		matched := false
		for _, w := range a.Spec.When {
			if w.Condition.Holds(args) {
				matched = true
				break
			}
		}
		if !matched {
			fallbacks++
			arg := a.Spec.When[0].Condition.Arg
			if v, ok := args[arg]; ok {
				b, _ := json.Marshal(v)
				details = append(details, fmt.Sprintf("%s: %s=%s matches no condition", a.Name, arg, b))
			} else {
				details = append(details, fmt.Sprintf("%s: %q is missing", a.Name, arg))
			}
		}
	}
	return conditional > 0 && fallbacks == conditional, strings.Join(details, "; ")
}
