package toolargs

import (
	"context"
	"encoding/json"
	"fmt"
	"maps"

	"ironcurtain.dev/gateway/internal/servers"
	"ironcurtain.dev/gateway/policy"
)

// Tool declares one tool of a server whose handlers are methods of S
// (Run is a method expression such as (*Server).status).
type Tool[S any] struct {
	Name    string
	Desc    string // description shown to the agent
	Comment string // comment of the policy annotation
	Args    []Arg
	Run     func(s S, ctx context.Context, a *Args) (servers.Result, error)
}

// Set is a server's tool list with the handlers bound to the server. It is
// safe for concurrent use.
type Set struct {
	server string
	tools  []servers.Tool
	byName map[string]entry
	fail   func(tool string, err error) servers.Result
}

type entry struct {
	args []Arg
	run  func(ctx context.Context, a *Args) (servers.Result, error)
}

// NewSet binds tools to recv. server is the server's name (the annotation's
// server and the prefix of call errors); fail turns a refusal or a handler
// failure into the agent-safe result (and logs its detail). It panics on a
// declaration that cannot be encoded (static data).
func NewSet[S any](server string, recv S, tools []Tool[S], fail func(tool string, err error) servers.Result) *Set {
	s := &Set{
		server: server,
		tools:  make([]servers.Tool, 0, len(tools)),
		byName: make(map[string]entry, len(tools)),
		fail:   fail,
	}
	for _, t := range tools {
		s.tools = append(s.tools, describe(server, t.Name, t.Desc, t.Comment, t.Args))
		run := t.Run
		s.byName[t.Name] = entry{args: t.Args, run: func(ctx context.Context, a *Args) (servers.Result, error) {
			return run(recv, ctx, a)
		}}
	}
	return s
}

// Tools returns a copy of the tool list with schemas and annotations.
func (s *Set) Tools() []servers.Tool {
	out := make([]servers.Tool, len(s.tools))
	copy(out, s.tools)
	return out
}

// Call runs one tool. Unknown tools, refused arguments and handler failures
// come back as results (through fail for the last two); the returned error
// is reserved for the context being cancelled.
func (s *Set) Call(ctx context.Context, tool string, raw map[string]any) (servers.Result, error) {
	e, ok := s.byName[tool]
	if !ok {
		return servers.ToolError(fmt.Sprintf("unknown tool %q", Clip(tool))), nil
	}
	if err := ctx.Err(); err != nil {
		return servers.Result{}, fmt.Errorf("calling %s %s: %w", s.server, tool, err)
	}
	a, err := Parse(e.args, raw)
	if err != nil {
		return s.fail(tool, err), nil
	}
	res, err := e.run(ctx, a)
	if err != nil {
		if ctxErr := ctx.Err(); ctxErr != nil {
			return servers.Result{}, fmt.Errorf("calling %s %s: %w", s.server, tool, ctxErr)
		}
		return s.fail(tool, err), nil
	}
	return res, nil
}

// describe builds the public tool: its schema and its annotation.
func describe(server, name, desc, comment string, args []Arg) servers.Tool {
	schema := Schema(args)
	ann := policy.ToolAnnotation{
		Tool:        name,
		Server:      server,
		Comment:     comment,
		Args:        make([]policy.ArgAnnotation, len(args)),
		InputSchema: schema,
	}
	for i, a := range args {
		ann.Args[i] = policy.ArgAnnotation{Name: a.Name, Spec: a.Roles}
	}
	return servers.Tool{Name: name, Description: desc, InputSchema: schema, Annotation: ann}
}

// Schema renders the JSON Schema of a tool's arguments: an object with
// exactly the declared properties. It panics on a declaration that cannot
// be encoded (static data).
func Schema(args []Arg) json.RawMessage {
	props := make(map[string]any, len(args))
	required := []string{}
	for i := range args {
		a := &args[i]
		props[a.Name] = property(a)
		if a.Required {
			required = append(required, a.Name)
		}
	}
	schema := map[string]any{
		"type":                 "object",
		"properties":           props,
		"additionalProperties": false,
	}
	if len(required) > 0 {
		schema["required"] = required
	}
	b, err := json.Marshal(schema)
	if err != nil {
		panic("toolargs: encoding input schema: " + err.Error())
	}
	return b
}

func property(a *Arg) map[string]any {
	var p map[string]any
	switch a.Kind {
	case String:
		p = map[string]any{"type": "string"}
		if len(a.Enum) > 0 {
			p["enum"] = a.Enum
		}
	case Strings:
		p = map[string]any{"type": "array", "items": map[string]any{"type": "string"}}
	case Int:
		p = map[string]any{"type": "integer", "minimum": 0}
		if a.Max > 0 {
			p["maximum"] = a.Max
		}
	case Bool:
		p = map[string]any{"type": "boolean"}
	case Custom:
		p = maps.Clone(a.Schema)
	}
	if p == nil {
		p = map[string]any{}
	}
	if a.Default != nil {
		p["default"] = a.Default
	}
	if a.Desc != "" {
		p["description"] = a.Desc
	}
	return p
}
