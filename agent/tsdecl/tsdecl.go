// Package tsdecl turns the gateway's MCP tool list into the TypeScript
// declaration the model reads: one `declare namespace` per server, one
// function per tool with typed arguments generated from the tool's JSON
// Schema and JSDoc from its descriptions. It also decides the JavaScript
// names (namespace.function) the sandbox binds to each MCP tool, so the
// declaration and the stubs always agree.
//
// Generation never fails and never panics: a schema that cannot be read
// becomes `unknown`, and every output is valid TypeScript (fuzzed).
package tsdecl

import (
	"encoding/json"
	"fmt"
	"sort"
	"strings"
)

// Tool is one tool as listed by the gateway's tools/list.
type Tool struct {
	Name         string          // "server__tool"
	Description  string          // free text from the server
	InputSchema  json.RawMessage // JSON Schema of the arguments
	OutputSchema json.RawMessage // optional JSON Schema of structured results
}

// Function is the JavaScript binding of one tool: calling
// Namespace.Name(args) in the sandbox calls the MCP tool Tool.
type Function struct {
	Namespace  string // TypeScript/JavaScript identifier of the namespace
	Name       string // identifier of the function inside the namespace
	Tool       string // MCP tool name as the gateway knows it
	Structured bool   // the tool declares an output schema: results are objects
}

// Qualified returns "namespace.name".
func (f Function) Qualified() string { return f.Namespace + "." + f.Name }

// Declaration is the generated TypeScript source and the bindings it declares.
type Declaration struct {
	Source    string
	Functions []Function // sorted by namespace, then name
}

// serverSeparator joins server and tool names in the gateway's tool names.
const serverSeparator = "__"

// defaultNamespace holds tools whose name has no server prefix.
const defaultNamespace = "tools"

// Generate builds the declaration for tools. The output is deterministic:
// tools are sorted by name, and name collisions after sanitising are broken
// with numeric suffixes in that order.
func Generate(tools []Tool) Declaration {
	sorted := append([]Tool(nil), tools...)
	sort.SliceStable(sorted, func(i, j int) bool { return sorted[i].Name < sorted[j].Name })

	type nsEntry struct {
		ident string
		tools []Tool
		funcs []Function
	}
	var order []string
	byServer := map[string]*nsEntry{}
	usedNS := map[string]bool{}
	for _, t := range sorted {
		server, _ := splitName(t.Name)
		e, ok := byServer[server]
		if !ok {
			e = &nsEntry{ident: unique(namespaceIdent(server), usedNS)}
			byServer[server] = e
			order = append(order, server)
		}
		e.tools = append(e.tools, t)
	}
	sort.Slice(order, func(i, j int) bool { return byServer[order[i]].ident < byServer[order[j]].ident })

	var b strings.Builder
	b.WriteString("// Generated from the gateway's tools/list. Every function is synchronous:\n")
	b.WriteString("// it returns the tool's result or throws an Error saying what was refused and why.\n")
	var funcs []Function
	seenTool := map[string]bool{}
	for _, server := range order {
		e := byServer[server]
		used := map[string]bool{}
		fmt.Fprintf(&b, "\n/** Tools of the %s server. */\n", docText(server))
		fmt.Fprintf(&b, "declare namespace %s {\n", e.ident)
		for _, t := range e.tools {
			if seenTool[t.Name] {
				continue // duplicate listing: the first one wins
			}
			seenTool[t.Name] = true
			_, bare := splitName(t.Name)
			fn := Function{
				Namespace:  e.ident,
				Name:       unique(functionIdent(bare), used),
				Tool:       t.Name,
				Structured: hasSchema(t.OutputSchema),
			}
			writeFunction(&b, fn, t)
			funcs = append(funcs, fn)
		}
		b.WriteString("}\n")
	}
	return Declaration{Source: b.String(), Functions: funcs}
}

// splitName splits "server__tool" at the first separator.
func splitName(name string) (server, tool string) {
	if i := strings.Index(name, serverSeparator); i > 0 && i+len(serverSeparator) < len(name) {
		return name[:i], name[i+len(serverSeparator):]
	}
	return defaultNamespace, name
}

func hasSchema(raw json.RawMessage) bool {
	s := strings.TrimSpace(string(raw))
	return s != "" && s != "null"
}

func writeFunction(b *strings.Builder, fn Function, t Tool) {
	input := parseSchema(t.InputSchema)
	r := renderer{root: input}
	argType := r.render(input, 1)
	if !hasSchema(t.InputSchema) {
		argType = "{ [key: string]: unknown }"
	}
	optional := ""
	if !requiresSomething(input) {
		optional = "?"
	}
	ret := "string"
	if fn.Structured {
		out := parseSchema(t.OutputSchema)
		ro := renderer{root: out}
		ret = ro.render(out, 1)
	}
	doc := strings.TrimSpace(t.Description)
	lines := []string{}
	if doc != "" {
		lines = append(lines, doc, "")
	}
	lines = append(lines, fmt.Sprintf("MCP tool `%s`.", t.Name))
	writeDoc(b, "  ", lines)
	fmt.Fprintf(b, "  function %s(args%s: %s): %s;\n", fn.Name, optional, argType, ret)
}

// requiresSomething reports whether an argument object must be passed.
func requiresSomething(s any) bool {
	m, ok := s.(map[string]any)
	if !ok {
		return false
	}
	req, _ := m["required"].([]any)
	return len(req) > 0
}

// unique returns name, or name with the smallest numeric suffix not in used,
// and marks the result used.
func unique(name string, used map[string]bool) string {
	out := name
	for i := 2; used[out]; i++ {
		out = fmt.Sprintf("%s_%d", name, i)
	}
	used[out] = true
	return out
}
