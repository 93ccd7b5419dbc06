package toolset

import (
	"encoding/json"
	"fmt"
	"strings"

	"ironcurtain.dev/gateway/policy"
)

// Describe writes tools for a prompt: each tool's comment, the roles of its
// arguments (conditional specs spelt out per mode, since all roles of a mode
// are evaluated together) and the arguments a call may carry with their
// JSON types.
func Describe(list []Tool) string {
	var b strings.Builder
	for i, t := range list {
		if i > 0 {
			b.WriteByte('\n')
		}
		fmt.Fprintf(&b, "- %s/%s", t.Annotation.Server, t.Annotation.Tool)
		if c := oneLine(t.Annotation.Comment); c != "" {
			fmt.Fprintf(&b, ": %s", c)
		}
		b.WriteByte('\n')
		if len(t.Annotation.Args) == 0 {
			b.WriteString("    roles: (no arguments)\n")
		}
		for _, a := range t.Annotation.Args {
			fmt.Fprintf(&b, "    %s: %s\n", a.Name, FormatSpec(a.Spec))
		}
		if args := ArgList(t); args != "" {
			fmt.Fprintf(&b, "    valid arguments: %s\n", args)
		}
	}
	return b.String()
}

// FormatSpec renders a role spec: "[read-path] (always)" or
// "default [read-path, write-history]; when mode=\"list\" -> [read-path]".
func FormatSpec(s policy.ArgSpec) string {
	if !s.Conditional() {
		return "[" + joinRoles(s.Default) + "] (always)"
	}
	parts := []string{"default [" + joinRoles(s.Default) + "]"}
	for _, w := range s.When {
		parts = append(parts, "when "+FormatCondition(w.Condition)+" -> ["+joinRoles(w.Roles)+"]")
	}
	return strings.Join(parts, "; ") + " (conditional: all roles of the matching clause are active together)"
}

// FormatCondition renders a conditional-role condition.
func FormatCondition(c policy.ArgCondition) string {
	switch {
	case c.Equals != nil:
		return c.Arg + "=" + compact(c.Equals)
	case c.In != nil:
		return c.Arg + " in " + compact(c.In)
	case c.Is != "":
		return c.Arg + " is " + c.Is
	}
	return c.Arg + "=?"
}

// ArgList names the arguments of t with their JSON types, required first
// marked: "path (string, required), tail (number)".
func ArgList(t Tool) string {
	req := map[string]bool{}
	for _, r := range t.Required {
		req[r] = true
	}
	var parts []string
	for _, n := range t.ArgNames() {
		typ := "any"
		if p := t.Props[n]; p != nil {
			switch {
			case p.Type != "":
				typ = p.Type
			case len(p.Types) > 0:
				typ = strings.Join(p.Types, "|")
			}
			if len(p.Enum) > 0 {
				typ += " one of " + compact(p.Enum)
			}
		}
		if req[n] {
			typ += ", required"
		}
		parts = append(parts, fmt.Sprintf("%s (%s)", n, typ))
	}
	return strings.Join(parts, ", ")
}

func joinRoles(rs []policy.Role) string {
	s := make([]string, len(rs))
	for i, r := range rs {
		s[i] = string(r)
	}
	return strings.Join(s, ", ")
}

func compact(v any) string {
	b, err := json.Marshal(v)
	if err != nil {
		return fmt.Sprint(v)
	}
	return string(b)
}

func oneLine(s string) string { return strings.Join(strings.Fields(s), " ") }

// SandboxSafe returns the path roles sandbox containment resolves under s.
func SandboxSafe(s policy.Settings) []policy.Role {
	if s.SandboxSafeRoles == nil {
		return policy.DefaultSandboxSafeRoles()
	}
	return s.SandboxSafeRoles
}

// SandboxSafeText names the sandbox-safe roles for a prompt ("read-path,
// write-path", or "none").
func SandboxSafeText(s policy.Settings) string {
	if r := SandboxSafe(s); len(r) > 0 {
		return joinRoles(r)
	}
	return "none"
}
