package filesystem

import (
	"encoding/json"
	"fmt"
	"math"
)

// argKind is the JSON type an argument must have.
type argKind uint8

const (
	kindString argKind = iota
	kindStrings
	kindInt
	kindBool
	kindEdits
)

// argSpec declares one argument of a tool.
type argSpec struct {
	name     string
	kind     argKind
	required bool
}

// edit is one edit_file replacement.
type edit struct {
	oldText string
	newText string
}

// args holds the type-checked arguments of one call. Absent optional
// arguments are simply missing from the maps.
type args struct {
	strs  map[string]string
	lists map[string][]string
	ints  map[string]int64
	bools map[string]bool
	edits []edit
}

func (a *args) str(name string) string    { return a.strs[name] }
func (a *args) list(name string) []string { return a.lists[name] }
func (a *args) boolean(name string) bool  { return a.bools[name] }
func (a *args) integer(name string) (int64, bool) {
	v, ok := a.ints[name]
	return v, ok
}

// parseArgs checks raw against spec: unknown keys, missing required
// arguments and wrong types are errors (the policy engine annotated exactly
// the declared arguments, so anything else must not slip through). A JSON
// null counts as absent.
func parseArgs(spec []argSpec, raw map[string]any) (*args, error) {
	a := &args{}
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
		if err := a.set(sp, v); err != nil {
			return nil, err
		}
	}
	return a, nil
}

func declared(spec []argSpec, key string) bool {
	for _, sp := range spec {
		if sp.name == key {
			return true
		}
	}
	return false
}

func (a *args) set(sp argSpec, v any) error {
	switch sp.kind {
	case kindString:
		s, ok := v.(string)
		if !ok {
			return typeError(sp.name, "a string")
		}
		if a.strs == nil {
			a.strs = map[string]string{}
		}
		a.strs[sp.name] = s
	case kindStrings:
		l, err := stringList(v)
		if err != nil {
			return typeError(sp.name, "an array of strings")
		}
		if a.lists == nil {
			a.lists = map[string][]string{}
		}
		a.lists[sp.name] = l
	case kindInt:
		n, err := integer(v)
		if err != nil {
			return typeError(sp.name, "a non-negative integer")
		}
		if a.ints == nil {
			a.ints = map[string]int64{}
		}
		a.ints[sp.name] = n
	case kindBool:
		b, ok := v.(bool)
		if !ok {
			return typeError(sp.name, "a boolean")
		}
		if a.bools == nil {
			a.bools = map[string]bool{}
		}
		a.bools[sp.name] = b
	case kindEdits:
		e, err := editList(v)
		if err != nil {
			return err
		}
		a.edits = e
	default:
		return fmt.Errorf("argument %q has no kind", sp.name)
	}
	return nil
}

func typeError(name, want string) error {
	return &toolError{msg: fmt.Sprintf("argument %q must be %s", name, want)}
}

func stringList(v any) ([]string, error) {
	switch l := v.(type) {
	case []string:
		return append([]string(nil), l...), nil
	case []any:
		out := make([]string, len(l))
		for i, e := range l {
			s, ok := e.(string)
			if !ok {
				return nil, fmt.Errorf("element %d is %T", i, e)
			}
			out[i] = s
		}
		return out, nil
	}
	return nil, fmt.Errorf("not a list: %T", v)
}

// integer accepts the number types a JSON decoder or a Go caller produces,
// as long as the value is a whole number in [0, MaxInt32].
func integer(v any) (int64, error) {
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
			return 0, err
		}
		f = x
	default:
		return 0, fmt.Errorf("not a number: %T", v)
	}
	if math.IsNaN(f) || f < 0 || f > math.MaxInt32 || f != math.Trunc(f) {
		return 0, fmt.Errorf("out of range: %v", f)
	}
	return int64(f), nil
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
		return nil, typeError("edits", "an array of {oldText, newText} objects")
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
				return nil, &toolError{msg: fmt.Sprintf("edits[%d]: unknown field %q", i, clip(k))}
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

// clip shortens an agent-supplied string before it is echoed back.
func clip(s string) string {
	const max = 64
	if len(s) <= max {
		return s
	}
	return s[:max] + "..."
}
