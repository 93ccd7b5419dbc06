package filesystem

import (
	"fmt"
	"strings"
	"unicode"

	"ironcurtain.dev/gateway/internal/servers/toolargs"
	"ironcurtain.dev/gateway/policy"
)

// edit is one edit_file replacement.
type edit struct {
	oldText string
	newText string
}

// editsArg is edit_file's "edits" argument: a list of {oldText, newText}
// objects, parsed into []edit.
var editsArg = toolargs.Arg{
	Name:     "edits",
	Kind:     toolargs.Custom,
	Required: true,
	Desc:     "Edits applied in order.",
	Roles:    policy.Static(roleNone),
	Schema: map[string]any{
		"type": "array",
		"items": map[string]any{
			"type": "object",
			"properties": map[string]any{
				"oldText": map[string]any{"type": "string", "description": "Text to search for (exact, or the same lines up to whitespace)."},
				"newText": map[string]any{"type": "string", "description": "Text to replace it with."},
			},
			"required":             []string{"oldText", "newText"},
			"additionalProperties": false,
		},
	},
	Parse: func(v any) (any, error) { return editList(v) },
}

func editList(v any) ([]edit, error) {
	var items []any
	switch l := v.(type) {
	case []any:
		items = l
	case []map[string]any:
		for _, m := range l {
			items = append(items, m)
		}
	default:
		return nil, &toolError{msg: `argument "edits" must be an array of {oldText, newText} objects`}
	}
	if len(items) > maxEdits {
		return nil, &toolError{msg: fmt.Sprintf("too many edits (limit %d)", maxEdits)}
	}
	out := make([]edit, 0, len(items))
	for i, it := range items {
		m, ok := it.(map[string]any)
		if !ok {
			return nil, &toolError{msg: fmt.Sprintf("edits[%d] must be an object", i)}
		}
		for k := range m {
			if k != "oldText" && k != "newText" {
				return nil, &toolError{msg: fmt.Sprintf("edits[%d]: unknown field %q", i, toolargs.Clip(k))}
			}
		}
		o, ok1 := m["oldText"].(string)
		n, ok2 := m["newText"].(string)
		if !ok1 || !ok2 {
			return nil, &toolError{msg: fmt.Sprintf("edits[%d] needs string fields oldText and newText", i)}
		}
		out = append(out, edit{oldText: o, newText: n})
	}
	return out, nil
}

// normalizeNewlines turns CRLF into LF.
func normalizeNewlines(s string) string {
	if !strings.Contains(s, "\r\n") {
		return s
	}
	return strings.ReplaceAll(s, "\r\n", "\n")
}

// applyEdits applies edits in order, like the reference server: an exact
// match of oldText is replaced first (first occurrence only); otherwise a
// run of lines equal to oldText's lines up to surrounding whitespace is
// replaced, re-indenting newText to the indentation found in the file.
func applyEdits(content string, edits []edit) (string, error) {
	for i, e := range edits {
		old := normalizeNewlines(e.oldText)
		repl := normalizeNewlines(e.newText)
		if old == "" {
			return "", &toolError{msg: fmt.Sprintf("edits[%d]: oldText is empty", i)}
		}
		if idx := strings.Index(content, old); idx >= 0 {
			content = content[:idx] + repl + content[idx+len(old):]
			continue
		}
		next, ok := replaceLoose(content, old, repl)
		if !ok {
			return "", &toolError{msg: fmt.Sprintf("edits[%d]: could not find a match for oldText", i)}
		}
		content = next
	}
	return content, nil
}

// replaceLoose replaces the first run of lines of content that equals the
// lines of old when each line is trimmed of surrounding whitespace.
func replaceLoose(content, old, repl string) (string, bool) {
	oldLines := strings.Split(old, "\n")
	lines := strings.Split(content, "\n")
	if len(oldLines) > len(lines) {
		return "", false
	}
	want := make([]string, len(oldLines))
	for j, l := range oldLines {
		want[j] = strings.TrimSpace(l)
	}
	for i := 0; i+len(oldLines) <= len(lines); i++ {
		match := true
		for j := range want {
			if strings.TrimSpace(lines[i+j]) != want[j] {
				match = false
				break
			}
		}
		if !match {
			continue
		}
		indent := leadingSpace(lines[i])
		newLines := strings.Split(repl, "\n")
		for j, line := range newLines {
			if j == 0 {
				newLines[j] = indent + strings.TrimLeftFunc(line, unicode.IsSpace)
				continue
			}
			oldIndent := ""
			if j < len(oldLines) {
				oldIndent = leadingSpace(oldLines[j])
			}
			newIndent := leadingSpace(line)
			if oldIndent != "" && newIndent != "" {
				extra := max(0, len(newIndent)-len(oldIndent))
				newLines[j] = indent + strings.Repeat(" ", extra) + strings.TrimLeftFunc(line, unicode.IsSpace)
			}
		}
		out := make([]string, 0, len(lines)-len(oldLines)+len(newLines))
		out = append(out, lines[:i]...)
		out = append(out, newLines...)
		out = append(out, lines[i+len(oldLines):]...)
		return strings.Join(out, "\n"), true
	}
	return "", false
}

// leadingSpace returns the whitespace prefix of s.
func leadingSpace(s string) string {
	return s[:len(s)-len(strings.TrimLeftFunc(s, unicode.IsSpace))]
}
