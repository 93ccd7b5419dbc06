// Package annotate classifies the arguments of external MCP servers' tools
// into roles of the policy's argument-role registry (annotate-tools). The
// prompt is built from the registry's descriptions and annotation guidance;
// the answer is checked against the registry and each tool's input schema
// (every argument annotated, no invented ones, conditional roles a subset of
// the default, conditions on real sibling arguments) before it is accepted.
package annotate

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"sort"
	"strings"

	"github.com/google/jsonschema-go/jsonschema"
	"golang.org/x/sync/errgroup"

	"ironcurtain.dev/compiler/artifact"
	s "ironcurtain.dev/compiler/structured"
	"ironcurtain.dev/gateway/policy"
)

// DefaultBatchSize is the number of tools per prompt.
const DefaultBatchSize = 25

// ToolSchema is a tool as its server lists it.
type ToolSchema struct {
	Name        string
	Description string
	InputSchema json.RawMessage
}

// properties returns the names of the input schema's properties, sorted,
// and whether the schema could be read.
func (t ToolSchema) properties() ([]string, error) {
	if len(bytes.TrimSpace(t.InputSchema)) == 0 {
		return nil, nil
	}
	var sch struct {
		Properties map[string]json.RawMessage `json:"properties"`
	}
	if err := json.Unmarshal(t.InputSchema, &sch); err != nil {
		return nil, fmt.Errorf("tool %s: reading input schema: %w", t.Name, err)
	}
	names := make([]string, 0, len(sch.Properties))
	for n := range sch.Properties {
		names = append(names, n)
	}
	sort.Strings(names)
	return names, nil
}

// AllowedRoles are the roles offered for server: the registry's roles for a
// server it knows, every role for one it does not (an external server of
// any kind may take paths or URLs; a role only ever adds checks).
func AllowedRoles(server string) []policy.RoleDefinition {
	known := false
	for _, d := range policy.Roles() {
		for _, s := range d.Servers {
			if s == server {
				known = true
			}
		}
	}
	if known {
		return policy.RolesForServer(server)
	}
	return policy.Roles()
}

// InputHash identifies a server's tool list and the prompt text; an
// unchanged hash means the existing annotations can be kept.
func InputHash(server string, tools []ToolSchema, batchSize int) string {
	parts := []string{"annotate", server}
	for _, b := range batches(tools, batchSize) {
		parts = append(parts, Prompt(server, b))
	}
	return artifact.InputHash(parts...)
}

func batches(tools []ToolSchema, size int) [][]ToolSchema {
	if size <= 0 {
		size = DefaultBatchSize
	}
	sorted := append([]ToolSchema(nil), tools...)
	sort.Slice(sorted, func(i, j int) bool { return sorted[i].Name < sorted[j].Name })
	var out [][]ToolSchema
	for i := 0; i < len(sorted); i += size {
		out = append(out, sorted[i:min(i+size, len(sorted))])
	}
	return out
}

// Prompt is the annotation instruction for one batch of a server's tools.
func Prompt(server string, tools []ToolSchema) string {
	var b strings.Builder
	fmt.Fprintf(&b, `Classify the arguments of the tools of the %q MCP server for a security policy engine. The engine canonicalises and checks every argument by its roles: a path role is confined to the sandbox and protected files, a URL role to allowed domains, and so on. An argument you label "none" is not checked at all, so label anything that names a file, directory, URL, repository, account or recipient.

For every tool give:
- "toolName": exactly as listed;
- "comment": one sentence on what the tool does;
- "args": one entry for EVERY property of the input schema (no more, no fewer), mapping the argument name to an array of roles.

Roles:
`, server)
	for _, d := range AllowedRoles(server) {
		fmt.Fprintf(&b, "- %q: %s. %s\n", d.Role, d.Description, d.AnnotationGuidance)
	}
	b.WriteString(`
An argument may have several roles: the source of a move is ["read-path", "delete-path"]. "none" stands alone.

When a mode argument (operation, mode, action, dryRun, ...) changes what a tool does, give the affected argument conditional roles instead of the union:
{"default": [all roles of every mode], "when": [{"condition": {"arg": "operation", "equals": "list"}, "roles": ["read-path"]}, {"condition": {"arg": "operation", "in": ["create", "delete"]}, "roles": ["read-path", "write-path"]}]}
The default is the most restrictive set, each "when" set is a subset of it, a condition names another argument of the same tool and uses exactly one of "equals", "in" or "is" ("present", "absent", "truthy", "falsy").

Tools:
`)
	for _, t := range tools {
		fmt.Fprintf(&b, "\n### %s\n", t.Name)
		if d := strings.TrimSpace(t.Description); d != "" {
			fmt.Fprintf(&b, "Description: %s\n", d)
		}
		schema := t.InputSchema
		if len(bytes.TrimSpace(schema)) == 0 {
			schema = json.RawMessage(`{"type":"object"}`)
		}
		fmt.Fprintf(&b, "Input schema: %s\n", schema)
	}
	return b.String()
}

type reply struct {
	Annotations []policy.ToolAnnotation `json:"annotations"`
}

// Annotate classifies every tool of server, one prompt per batch, batches
// concurrently, and returns the annotations sorted by tool name.
func Annotate(ctx context.Context, r *s.Runner, server string, tools []ToolSchema, batchSize int) ([]policy.ToolAnnotation, error) {
	bs := batches(tools, batchSize)
	results := make([][]policy.ToolAnnotation, len(bs))
	g, gctx := errgroup.WithContext(ctx)
	for i, batch := range bs {
		g.Go(func() error {
			step := "annotate/" + server
			if len(bs) > 1 {
				step = fmt.Sprintf("%s/%d", step, i+1)
			}
			list, err := annotateBatch(gctx, r, server, batch, step)
			results[i] = list
			return err
		})
	}
	if err := g.Wait(); err != nil {
		return nil, fmt.Errorf("annotating %s: %w", server, err)
	}
	var out []policy.ToolAnnotation
	for _, l := range results {
		out = append(out, l...)
	}
	sort.Slice(out, func(i, j int) bool { return out[i].Tool < out[j].Tool })
	return out, nil
}

func annotateBatch(ctx context.Context, r *s.Runner, server string, batch []ToolSchema, step string) ([]policy.ToolAnnotation, error) {
	names := make([]string, len(batch))
	byName := map[string]ToolSchema{}
	for i, t := range batch {
		names[i] = t.Name
		byName[t.Name] = t
	}
	var roles []string
	allowed := map[policy.Role]bool{}
	for _, d := range AllowedRoles(server) {
		roles = append(roles, string(d.Role))
		allowed[d.Role] = true
	}
	// A schema must be a tree: every use gets its own copy.
	roleArray := func() *jsonschema.Schema { return s.MinItems(s.Array(s.Enum(roles...)), 1) }
	spec := s.AnyOf(roleArray(), s.Object(map[string]*jsonschema.Schema{
		"default": roleArray(),
		"when": s.MinItems(s.Array(s.Object(map[string]*jsonschema.Schema{
			"condition": s.Object(map[string]*jsonschema.Schema{
				"arg":    s.String("another argument of the same tool"),
				"equals": s.Scalar(),
				"in":     s.MinItems(s.Array(s.Scalar()), 1),
				"is":     s.Enum("present", "absent", "truthy", "falsy"),
			}, "arg"),
			"roles": roleArray(),
		}, "condition", "roles")), 1),
	}, "default", "when"))
	schema := s.Object(map[string]*jsonschema.Schema{
		"annotations": s.Array(s.Object(map[string]*jsonschema.Schema{
			"toolName": s.Enum(names...),
			"comment":  s.String("one sentence"),
			"args":     s.Map(spec),
		}, "toolName", "comment", "args")),
	}, "annotations")

	check := func(v *reply) error { return checkBatch(v.Annotations, byName, allowed) }
	res, err := s.Generate(ctx, r, s.Request{
		Step:   step,
		System: "You annotate MCP tools for a security policy engine. Precision matters: a wrong role either blocks legitimate calls or leaves an argument unchecked.",
		User:   Prompt(server, batch),
		Schema: schema,
	}, check)
	if err != nil {
		return nil, err
	}
	out := res.Value.Annotations
	for i := range out {
		out[i].Server = server
		out[i].InputSchema = compactSchema(byName[out[i].Tool].InputSchema)
	}
	return out, nil
}

func compactSchema(raw json.RawMessage) json.RawMessage {
	if len(bytes.TrimSpace(raw)) == 0 {
		return json.RawMessage(`{"type":"object"}`)
	}
	var v any
	if err := json.Unmarshal(raw, &v); err != nil {
		return raw
	}
	b, err := json.Marshal(v) // map keys sorted: stable output
	if err != nil {
		return raw
	}
	return b
}

// checkBatch verifies the annotations against the registry and the schemas.
func checkBatch(list []policy.ToolAnnotation, byName map[string]ToolSchema, allowed map[policy.Role]bool) error {
	var errs []string
	bad := func(format string, a ...any) { errs = append(errs, fmt.Sprintf(format, a...)) }
	seen := map[string]bool{}
	for i, a := range list {
		at := fmt.Sprintf("annotations[%d] (%s)", i, a.Tool)
		if seen[a.Tool] {
			bad("%s: the tool is annotated twice", at)
			continue
		}
		seen[a.Tool] = true
		t, ok := byName[a.Tool]
		if !ok {
			bad("%s: no such tool in this batch", at)
			continue
		}
		props, err := t.properties()
		if err != nil {
			bad("%s: %v", at, err)
			continue
		}
		declared := map[string]bool{}
		for _, p := range props {
			declared[p] = true
		}
		annotated := map[string]bool{}
		for _, arg := range a.Args {
			annotated[arg.Name] = true
			if !declared[arg.Name] {
				bad("%s: args.%s is not a property of the input schema", at, arg.Name)
			}
			checkSpec(at+": args."+arg.Name, arg.Spec, allowed, bad)
			for _, w := range arg.Spec.When {
				if w.Condition.Arg == arg.Name || !declared[w.Condition.Arg] {
					bad("%s: args.%s: the condition names %q, which is not another argument of the tool", at, arg.Name, w.Condition.Arg)
				}
			}
		}
		for _, p := range props {
			if !annotated[p] {
				bad("%s: args.%s is missing; annotate every property (use [\"none\"] when it names nothing)", at, p)
			}
		}
	}
	for name := range byName {
		if !seen[name] {
			bad("tool %s is not annotated", name)
		}
	}
	if len(errs) > 0 {
		sort.Strings(errs)
		return fmt.Errorf("fix these annotations:\n%s", strings.Join(errs, "\n"))
	}
	return nil
}

func checkSpec(at string, spec policy.ArgSpec, allowed map[policy.Role]bool, bad func(string, ...any)) {
	checkRoles := func(where string, roles []policy.Role) {
		for _, r := range roles {
			if !allowed[r] {
				bad("%s%s: role %q is not offered for this server", at, where, r)
			}
			if r == policy.RoleNone && len(roles) > 1 {
				bad("%s%s: \"none\" cannot be combined with other roles", at, where)
			}
		}
	}
	checkRoles("", spec.Default)
	def := map[policy.Role]bool{}
	for _, r := range spec.Default {
		def[r] = true
	}
	for i, w := range spec.When {
		where := fmt.Sprintf(".when[%d]", i)
		checkRoles(where, w.Roles)
		for _, r := range w.Roles {
			if !def[r] {
				bad("%s%s: role %q is not in the default roles; conditions may only narrow", at, where, r)
			}
		}
	}
}
