package gate

import (
	"strconv"
	"strings"

	"ironcurtain.dev/gateway/policy"
)

// Bounds of an escalation's resource text (the console shows it in its
// RESOURCE column; the arguments themselves are shown whole elsewhere).
const (
	maxResourcePaths = 16
	maxResourceBytes = 4096
)

// pathResource is the resource of a tool call's escalation: every argument
// value with a path role, as the policy judged it (resolved; the agent's
// value when the policy has none), in annotation order:
//
//	source (read-path+delete-path): "/w/a"; destination (write-path): "/w/b"
//
// Each path is quoted (strconv.Quote: control, bidi and invisible
// characters escaped), so an agent cannot make one path look like two or
// hide one. The text is never a bare path or host name, so "approve
// similar" stays exact-argument only for tool calls, as it was: a
// directory or domain scope covering one path would also cover a call's
// other paths. "" when the call has no path argument.
func pathResource(ann policy.ToolAnnotation, agentArgs, policyArgs map[string]any) string {
	var b strings.Builder
	n, more := 0, 0
	for _, a := range ann.Args {
		var roles []string
		for _, r := range a.Spec.Resolve(agentArgs) {
			if d, ok := policy.LookupRole(r); ok && d.Category == policy.CategoryPath {
				roles = append(roles, string(r))
			}
		}
		if len(roles) == 0 {
			continue
		}
		v, ok := policyArgs[a.Name]
		if !ok {
			v, ok = agentArgs[a.Name]
		}
		if !ok {
			continue
		}
		for i, p := range pathValues(v) {
			name := a.Name
			if _, isList := v.([]any); isList {
				name += "[" + strconv.Itoa(i) + "]"
			}
			entry := name + " (" + strings.Join(roles, "+") + "): " + strconv.Quote(p)
			if n == maxResourcePaths || b.Len()+len(entry)+2 > maxResourceBytes {
				more++
				continue
			}
			if n > 0 {
				b.WriteString("; ")
			}
			b.WriteString(entry)
			n++
		}
	}
	if more > 0 {
		if n > 0 {
			b.WriteString("; ")
		}
		b.WriteString(strconv.Itoa(more) + " more not shown (see the arguments)")
	}
	return b.String()
}

// pathValues are the strings of a path argument: the value, or the
// strings of a list. Anything else is not a path (policy refuses it).
func pathValues(v any) []string {
	switch x := v.(type) {
	case string:
		return []string{x}
	case []any:
		out := make([]string, 0, len(x))
		for _, e := range x {
			if s, ok := e.(string); ok {
				out = append(out, s)
			}
		}
		return out
	case []string:
		return x
	}
	return nil
}
