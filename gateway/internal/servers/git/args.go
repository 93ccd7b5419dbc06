package git

import (
	"encoding/json"
	"fmt"
	"math"

	"ironcurtain.dev/gateway/internal/servers"
)

type argKind uint8

const (
	kindString argKind = iota
	kindStrings
	kindInt
	kindBool
)

// argSpec declares one argument of a tool.
type argSpec struct {
	name     string
	kind     argKind
	required bool
	enum     []string // allowed values of a string argument
	max      int64    // upper bound of an integer argument (0: MaxInt32)
}

// call is one tool call with type-checked arguments.
type call struct {
	tool  string
	raw   map[string]any
	strs  map[string]string
	lists map[string][]string
	ints  map[string]int64
	bools map[string]bool
	info  servers.CallInfo
}

func (c *call) str(name string) string    { return c.strs[name] }
func (c *call) has(name string) bool      { _, ok := c.strs[name]; return ok }
func (c *call) list(name string) []string { return c.lists[name] }
func (c *call) flag(name string) bool     { return c.bools[name] }
func (c *call) num(name string) (int64, bool) {
	v, ok := c.ints[name]
	return v, ok
}

// parseCall checks raw against spec: unknown keys, missing required
// arguments, wrong types and values outside an enum are errors. A JSON null
// counts as absent.
func parseCall(tool string, spec []argSpec, raw map[string]any) (*call, error) {
	c := &call{tool: tool, raw: raw, strs: map[string]string{}, lists: map[string][]string{},
		ints: map[string]int64{}, bools: map[string]bool{}}
	for key := range raw {
		if !declared(spec, key) {
			return nil, &toolError{msg: fmt.Sprintf("unknown argument %q", clip(key))}
		}
	}
	for _, sp := range spec {
		v, ok := raw[sp.name]
		if !ok || v == nil {
			if sp.required {
				return nil, &toolError{msg: fmt.Sprintf("missing argument %q", sp.name)}
			}
			continue
		}
		if err := c.set(sp, v); err != nil {
			return nil, err
		}
	}
	return c, nil
}

func declared(spec []argSpec, key string) bool {
	for _, sp := range spec {
		if sp.name == key {
			return true
		}
	}
	return false
}

func (c *call) set(sp argSpec, v any) error {
	switch sp.kind {
	case kindString:
		s, ok := v.(string)
		if !ok {
			return typeError(sp.name, "a string")
		}
		if len(sp.enum) > 0 && !oneOf(s, sp.enum) {
			return &toolError{msg: fmt.Sprintf("argument %q must be one of %q", sp.name, sp.enum)}
		}
		c.strs[sp.name] = s
	case kindStrings:
		l, ok := stringList(v)
		if !ok {
			return typeError(sp.name, "an array of strings")
		}
		c.lists[sp.name] = l
	case kindInt:
		n, ok := integer(v, sp.max)
		if !ok {
			max := sp.max
			if max == 0 {
				max = math.MaxInt32
			}
			return &toolError{msg: fmt.Sprintf("argument %q must be an integer from 0 to %d", sp.name, max)}
		}
		c.ints[sp.name] = n
	case kindBool:
		b, ok := v.(bool)
		if !ok {
			return typeError(sp.name, "a boolean")
		}
		c.bools[sp.name] = b
	default:
		return fmt.Errorf("argument %q has no kind", sp.name)
	}
	return nil
}

func oneOf(s string, set []string) bool {
	for _, x := range set {
		if s == x {
			return true
		}
	}
	return false
}

func typeError(name, want string) error {
	return &toolError{msg: fmt.Sprintf("argument %q must be %s", name, want)}
}

func stringList(v any) ([]string, bool) {
	switch l := v.(type) {
	case []string:
		return append([]string(nil), l...), true
	case []any:
		out := make([]string, len(l))
		for i, e := range l {
			s, ok := e.(string)
			if !ok {
				return nil, false
			}
			out[i] = s
		}
		return out, true
	}
	return nil, false
}

func integer(v any, max int64) (int64, bool) {
	if max == 0 {
		max = math.MaxInt32
	}
	var f float64
	switch n := v.(type) {
	case float64:
		f = n
	case int:
		f = float64(n)
	case int64:
		f = float64(n)
	case json.Number:
		x, err := n.Float64()
		if err != nil {
			return 0, false
		}
		f = x
	default:
		return 0, false
	}
	if math.IsNaN(f) || f < 0 || f > float64(max) || f != math.Trunc(f) {
		return 0, false
	}
	return int64(f), true
}

// clip shortens an agent-supplied string before it is echoed back.
func clip(s string) string {
	const max = 64
	if len(s) <= max {
		return s
	}
	return s[:max] + "..."
}
