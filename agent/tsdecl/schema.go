package tsdecl

import (
	"bytes"
	"encoding/json"
	"fmt"
	"sort"
	"strconv"
	"strings"
	"unicode"
)

// Limits that keep pathological schemas from producing huge declarations.
const (
	maxDepth      = 8    // nesting of rendered types; deeper becomes unknown
	maxProperties = 200  // properties rendered per object
	maxMembers    = 50   // enum / anyOf members rendered
	maxDocRunes   = 1500 // runes of one description kept
)

// parseSchema decodes a JSON Schema; anything unreadable becomes nil (unknown).
func parseSchema(raw json.RawMessage) any {
	if !hasSchema(raw) {
		return nil
	}
	dec := json.NewDecoder(bytes.NewReader(raw))
	dec.UseNumber()
	var v any
	if err := dec.Decode(&v); err != nil {
		return nil
	}
	return v
}

// renderer renders JSON Schema values as TypeScript types. root resolves
// local "$ref"s; refs tracks the references being expanded (cycle guard).
type renderer struct {
	root any
	refs []string
}

// render returns the TypeScript type of schema s; indent is the nesting
// level used to lay out object members.
func (r *renderer) render(s any, indent int) string {
	if indent > maxDepth {
		return "unknown"
	}
	switch v := s.(type) {
	case bool:
		if v {
			return "unknown"
		}
		return "never"
	case map[string]any:
		return r.renderObjectSchema(v, indent)
	default:
		return "unknown"
	}
}

func (r *renderer) renderObjectSchema(m map[string]any, indent int) string {
	if ref, ok := m["$ref"].(string); ok {
		return r.renderRef(ref, indent)
	}
	if c, ok := m["const"]; ok {
		if lit, ok := literal(c); ok {
			return lit
		}
		return "unknown"
	}
	if e, ok := m["enum"].([]any); ok {
		return enumType(e)
	}
	var parts []string
	if t := r.renderTyped(m, indent); t != "" {
		parts = append(parts, t)
	}
	for _, key := range []string{"anyOf", "oneOf"} {
		if alts, ok := m[key].([]any); ok && len(alts) > 0 {
			parts = append(parts, r.combine(alts, " | ", indent))
		}
	}
	if all, ok := m["allOf"].([]any); ok && len(all) > 0 {
		parts = append(parts, r.combine(all, " & ", indent))
	}
	if len(parts) == 0 {
		return "unknown"
	}
	out := parts[0]
	for _, p := range parts[1:] {
		out = wrap(out) + " & " + wrap(p)
	}
	if n, ok := m["nullable"].(bool); ok && n {
		out = wrap(out) + " | null"
	}
	return out
}

// renderTyped renders the "type" keyword (or the type implied by
// properties/items); "" when the schema says nothing about its type.
func (r *renderer) renderTyped(m map[string]any, indent int) string {
	var types []string
	switch t := m["type"].(type) {
	case string:
		types = []string{t}
	case []any:
		for _, x := range t {
			if s, ok := x.(string); ok {
				types = append(types, s)
			}
		}
		if len(types) == 0 {
			return "unknown"
		}
	default:
		_, hasProps := m["properties"]
		_, hasAP := m["additionalProperties"]
		_, hasItems := m["items"]
		_, hasPrefix := m["prefixItems"]
		switch {
		case hasProps || hasAP:
			types = []string{"object"}
		case hasItems || hasPrefix:
			types = []string{"array"}
		default:
			return ""
		}
	}
	var out []string
	seen := map[string]bool{}
	for _, t := range types {
		var ts string
		switch t {
		case "string":
			ts = "string"
		case "number", "integer":
			ts = "number"
		case "boolean":
			ts = "boolean"
		case "null":
			ts = "null"
		case "array":
			ts = r.renderArray(m, indent)
		case "object":
			ts = r.renderObject(m, indent)
		default:
			ts = "unknown"
		}
		if !seen[ts] {
			seen[ts] = true
			out = append(out, ts)
		}
	}
	if len(out) == 1 {
		return out[0]
	}
	for i := range out {
		out[i] = wrap(out[i])
	}
	return strings.Join(out, " | ")
}

func (r *renderer) renderRef(ref string, indent int) string {
	for _, seen := range r.refs {
		if seen == ref {
			return "unknown" // recursive schema
		}
	}
	target, ok := resolvePointer(r.root, ref)
	if !ok {
		return "unknown"
	}
	r.refs = append(r.refs, ref)
	defer func() { r.refs = r.refs[:len(r.refs)-1] }()
	return r.render(target, indent)
}

// resolvePointer resolves a local JSON pointer ("#/$defs/x").
func resolvePointer(root any, ref string) (any, bool) {
	if !strings.HasPrefix(ref, "#") {
		return nil, false
	}
	p := strings.TrimPrefix(ref, "#")
	if p == "" {
		return root, true
	}
	if !strings.HasPrefix(p, "/") {
		return nil, false
	}
	cur := root
	for _, tok := range strings.Split(p[1:], "/") {
		tok = strings.ReplaceAll(strings.ReplaceAll(tok, "~1", "/"), "~0", "~")
		switch c := cur.(type) {
		case map[string]any:
			next, ok := c[tok]
			if !ok {
				return nil, false
			}
			cur = next
		case []any:
			i, err := strconv.Atoi(tok)
			if err != nil || i < 0 || i >= len(c) {
				return nil, false
			}
			cur = c[i]
		default:
			return nil, false
		}
	}
	return cur, true
}

func (r *renderer) combine(alts []any, sep string, indent int) string {
	var out []string
	seen := map[string]bool{}
	for i, a := range alts {
		if i >= maxMembers {
			out = append(out, "unknown")
			break
		}
		ts := r.render(a, indent)
		if !seen[ts] {
			seen[ts] = true
			out = append(out, wrap(ts))
		}
	}
	if len(out) == 1 {
		return strings.TrimSuffix(strings.TrimPrefix(out[0], "("), ")")
	}
	return strings.Join(out, sep)
}

func (r *renderer) renderArray(m map[string]any, indent int) string {
	if prefix, ok := m["prefixItems"].([]any); ok && len(prefix) > 0 {
		return r.tuple(prefix, indent)
	}
	switch items := m["items"].(type) {
	case []any: // draft-07 tuple form
		if len(items) > 0 {
			return r.tuple(items, indent)
		}
		return "unknown[]"
	case nil:
		return "unknown[]"
	default:
		el := r.render(items, indent)
		if isSimple(el) {
			return el + "[]"
		}
		return "Array<" + el + ">"
	}
}

func (r *renderer) tuple(items []any, indent int) string {
	var els []string
	for i, it := range items {
		if i >= maxMembers {
			break
		}
		els = append(els, r.render(it, indent))
	}
	return "[" + strings.Join(els, ", ") + ", ...unknown[]]"
}

func (r *renderer) renderObject(m map[string]any, indent int) string {
	props, _ := m["properties"].(map[string]any)
	required := map[string]bool{}
	if req, ok := m["required"].([]any); ok {
		for _, x := range req {
			if s, ok := x.(string); ok {
				required[s] = true
			}
		}
	}
	var extra string // index signature type, "" for none
	switch ap := m["additionalProperties"].(type) {
	case bool:
		if ap {
			extra = "unknown"
		}
	case map[string]any:
		extra = r.render(ap, indent+1)
	case nil:
		if len(props) == 0 {
			extra = "unknown"
		}
	}
	if len(props) == 0 && extra == "" {
		return "{}"
	}
	if len(props) == 0 {
		return "{ [key: string]: " + extra + " }"
	}
	names := make([]string, 0, len(props))
	for k := range props {
		names = append(names, k)
	}
	sort.Strings(names)
	pad := strings.Repeat("  ", indent+1)
	var b strings.Builder
	b.WriteString("{\n")
	for i, name := range names {
		if i >= maxProperties {
			b.WriteString(pad + "[key: string]: unknown;\n")
			extra = ""
			break
		}
		ps := props[name]
		if doc := propertyDoc(ps); len(doc) > 0 {
			writeDoc(&b, pad, doc)
		}
		opt := "?"
		if required[name] {
			opt = ""
		}
		fmt.Fprint(&b, pad, propertyKey(name), opt, ": ", r.render(ps, indent+1), ";\n")
	}
	if extra != "" {
		// Declared properties must fit the index signature, so it stays unknown.
		b.WriteString(pad + "[key: string]: unknown;\n")
	}
	b.WriteString(strings.Repeat("  ", indent) + "}")
	return b.String()
}

func propertyKey(name string) string {
	if isIdentifier(name) {
		return name
	}
	q, err := json.Marshal(name) // JSON strings are JavaScript string literals
	if err != nil {
		return `"_"`
	}
	return string(q)
}

// propertyDoc collects the JSDoc lines of a property schema.
func propertyDoc(s any) []string {
	m, ok := s.(map[string]any)
	if !ok {
		return nil
	}
	var lines []string
	if d, ok := m["description"].(string); ok && strings.TrimSpace(d) != "" {
		lines = append(lines, d)
	} else if t, ok := m["title"].(string); ok && strings.TrimSpace(t) != "" {
		lines = append(lines, t)
	}
	if def, ok := m["default"]; ok {
		if b, err := json.Marshal(def); err == nil && len(b) <= 200 {
			lines = append(lines, "@default "+string(b))
		}
	}
	return lines
}

func enumType(values []any) string {
	if len(values) == 0 {
		return "never"
	}
	var out []string
	seen := map[string]bool{}
	for i, v := range values {
		if i >= maxMembers {
			out = append(out, "unknown")
			break
		}
		lit, ok := literal(v)
		if !ok {
			lit = "unknown"
		}
		if !seen[lit] {
			seen[lit] = true
			out = append(out, lit)
		}
	}
	return strings.Join(out, " | ")
}

// literal renders a JSON scalar as a TypeScript literal type.
func literal(v any) (string, bool) {
	switch x := v.(type) {
	case string:
		b, err := json.Marshal(x)
		return string(b), err == nil
	case json.Number:
		f, err := strconv.ParseFloat(string(x), 64)
		if err != nil || f != f || f > 1e300 || f < -1e300 {
			return "number", true
		}
		return strconv.FormatFloat(f, 'g', -1, 64), true
	case bool:
		return strconv.FormatBool(x), true
	case nil:
		return "null", true
	default:
		return "", false
	}
}

// isSimple reports whether t can take a "[]" suffix without parentheses.
func isSimple(t string) bool {
	for _, r := range t {
		if !(unicode.IsLetter(r) || unicode.IsDigit(r) || r == '_' || r == '$' || r == '[' || r == ']') {
			return false
		}
	}
	return t != ""
}

// wrap parenthesises a composite type so it can be combined safely.
func wrap(t string) string {
	if isSimple(t) || strings.HasPrefix(t, "{") && strings.HasSuffix(t, "}") && !strings.Contains(t, "} ") {
		return t
	}
	return "(" + t + ")"
}

// docText makes free text safe inside a JSDoc comment: no comment
// terminator, no control characters, bounded length.
func docText(s string) string {
	s = strings.ReplaceAll(s, "*/", "*\\/")
	var b strings.Builder
	n := 0
	for _, r := range s {
		if n >= maxDocRunes {
			b.WriteString("…")
			break
		}
		n++
		switch {
		case r == '\n' || r == '\t':
			b.WriteRune(r)
		case r == '\u2028' || r == '\u2029' || r == '\r':
			b.WriteByte('\n')
		case unicode.IsControl(r) || r == unicode.ReplacementChar:
			b.WriteByte(' ')
		default:
			b.WriteRune(r)
		}
	}
	return b.String()
}

// writeDoc writes lines as a JSDoc block indented by pad.
func writeDoc(b *strings.Builder, pad string, lines []string) {
	var all []string
	for _, l := range lines {
		all = append(all, strings.Split(docText(l), "\n")...)
	}
	for len(all) > 0 && strings.TrimSpace(all[len(all)-1]) == "" {
		all = all[:len(all)-1]
	}
	if len(all) == 0 {
		return
	}
	if len(all) == 1 {
		b.WriteString(pad + "/** " + strings.TrimSpace(all[0]) + " */\n")
		return
	}
	b.WriteString(pad + "/**\n")
	for _, l := range all {
		l = strings.TrimRight(l, " \t")
		if l == "" {
			b.WriteString(pad + " *\n")
		} else {
			b.WriteString(pad + " * " + l + "\n")
		}
	}
	b.WriteString(pad + " */\n")
}
