// Package toolargs declares the arguments of a built-in tool server's tools
// once and derives from that one declaration everything that must agree
// with it: the JSON Schema shown to the agent, the policy annotation (the
// role of every argument), strict parsing of a call's arguments with typed
// accessors, and the dispatch of a call to its handler (Set).
//
// Parsing is strict because the policy engine judged exactly the declared
// arguments: an unknown key, a missing required argument, a value of the
// wrong type, a string outside its enum or an integer outside its range is
// refused with a short message that is safe to show to the agent (an
// *Error). A JSON null counts as absent.
package toolargs

import (
	"encoding/json"
	"fmt"
	"math"

	"ironcurtain.dev/gateway/policy"
)

// Kind is the JSON type an argument must have.
type Kind uint8

// The argument kinds.
const (
	// String is a JSON string, optionally restricted to Arg.Enum.
	String Kind = iota + 1
	// Strings is an array of strings.
	Strings
	// Int is a whole number from 0 to Arg.Max (MaxInt32 when Max is 0).
	Int
	// Bool is true or false.
	Bool
	// Custom is checked and converted by Arg.Parse and described by
	// Arg.Schema.
	Custom
)

// Arg declares one argument of a tool.
type Arg struct {
	Name     string
	Kind     Kind
	Required bool
	// Desc is the argument's description in the schema ("" leaves it out).
	Desc string
	// Roles are the argument's policy roles.
	Roles policy.ArgSpec
	// Enum lists the allowed values of a String argument (schema "enum").
	Enum []string
	// Max bounds an Int argument (schema "maximum"); 0 means MaxInt32 and
	// leaves "maximum" out of the schema.
	Max int64
	// Default is the schema's "default" (documentation for the agent; an
	// absent argument is still absent to the handler).
	Default any
	// Schema is the property schema of a Custom argument (without its
	// description).
	Schema map[string]any
	// Parse checks and converts the value of a Custom argument; its error
	// is returned unchanged, so it must be agent-safe.
	Parse func(v any) (any, error)
}

// Error is a refusal of a call's arguments. Its message is short, names the
// argument and is safe to show to the agent (agent-supplied names are
// clipped).
type Error struct{ msg string }

func (e *Error) Error() string { return e.msg }

func refuse(format string, a ...any) error { return &Error{msg: fmt.Sprintf(format, a...)} }

// Args holds the type-checked arguments of one call. Absent optional
// arguments are missing from it: the accessors then return the zero value.
type Args struct {
	raw   map[string]any
	strs  map[string]string
	lists map[string][]string
	ints  map[string]int64
	bools map[string]bool
	other map[string]any
}

// Str returns a String argument ("" when absent).
func (a *Args) Str(name string) string { return a.strs[name] }

// Strings returns a Strings argument (nil when absent).
func (a *Args) Strings(name string) []string { return a.lists[name] }

// Bool returns a Bool argument (false when absent).
func (a *Args) Bool(name string) bool { return a.bools[name] }

// Int returns an Int argument and whether it was given.
func (a *Args) Int(name string) (int64, bool) {
	v, ok := a.ints[name]
	return v, ok
}

// Value returns what Arg.Parse made of a Custom argument (nil when absent).
func (a *Args) Value(name string) any { return a.other[name] }

// Has reports whether the argument was given (and not null).
func (a *Args) Has(name string) bool {
	if _, ok := a.strs[name]; ok {
		return true
	}
	if _, ok := a.lists[name]; ok {
		return true
	}
	if _, ok := a.ints[name]; ok {
		return true
	}
	if _, ok := a.bools[name]; ok {
		return true
	}
	_, ok := a.other[name]
	return ok
}

// Raw returns the arguments as the call passed them (for code that must
// judge them exactly as the policy engine did). It must not be modified.
func (a *Args) Raw() map[string]any { return a.raw }

// Parse checks raw against spec and returns the typed arguments. Refusals
// are *Error (or, for a Custom argument, the error of its Parse).
func Parse(spec []Arg, raw map[string]any) (*Args, error) {
	a := &Args{raw: raw}
	for key := range raw {
		if !declared(spec, key) {
			return nil, refuse("unknown argument %q", Clip(key))
		}
	}
	for i := range spec {
		sp := &spec[i]
		v, ok := raw[sp.Name]
		if !ok || v == nil {
			if sp.Required {
				return nil, refuse("missing argument %q", sp.Name)
			}
			continue
		}
		if err := a.set(sp, v); err != nil {
			return nil, err
		}
	}
	return a, nil
}

func declared(spec []Arg, key string) bool {
	for i := range spec {
		if spec[i].Name == key {
			return true
		}
	}
	return false
}

func (a *Args) set(sp *Arg, v any) error {
	switch sp.Kind {
	case String:
		s, ok := v.(string)
		if !ok {
			return typeError(sp.Name, "a string")
		}
		if len(sp.Enum) > 0 && !oneOf(s, sp.Enum) {
			return refuse("argument %q must be one of %q", sp.Name, sp.Enum)
		}
		if a.strs == nil {
			a.strs = map[string]string{}
		}
		a.strs[sp.Name] = s
	case Strings:
		l, ok := stringList(v)
		if !ok {
			return typeError(sp.Name, "an array of strings")
		}
		if a.lists == nil {
			a.lists = map[string][]string{}
		}
		a.lists[sp.Name] = l
	case Int:
		n, ok := integer(v, sp.Max)
		if !ok {
			if sp.Max == 0 {
				return typeError(sp.Name, "a non-negative integer")
			}
			return refuse("argument %q must be an integer from 0 to %d", sp.Name, sp.Max)
		}
		if a.ints == nil {
			a.ints = map[string]int64{}
		}
		a.ints[sp.Name] = n
	case Bool:
		b, ok := v.(bool)
		if !ok {
			return typeError(sp.Name, "a boolean")
		}
		if a.bools == nil {
			a.bools = map[string]bool{}
		}
		a.bools[sp.Name] = b
	case Custom:
		if sp.Parse == nil {
			return fmt.Errorf("argument %q has no parser", sp.Name)
		}
		x, err := sp.Parse(v)
		if err != nil {
			return err
		}
		if a.other == nil {
			a.other = map[string]any{}
		}
		a.other[sp.Name] = x
	default:
		// A declaration bug, not the agent's: the caller shows a generic
		// failure.
		return fmt.Errorf("argument %q has no kind", sp.Name)
	}
	return nil
}

func typeError(name, want string) error {
	return refuse("argument %q must be %s", name, want)
}

func oneOf(s string, set []string) bool {
	for _, x := range set {
		if s == x {
			return true
		}
	}
	return false
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

// integer accepts the number types a JSON decoder or a Go caller produces,
// as long as the value is a whole number in [0, max] (max 0: MaxInt32).
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

// Clip shortens an agent-supplied string before it is echoed back.
func Clip(s string) string {
	const max = 64
	if len(s) <= max {
		return s
	}
	return s[:max] + "..."
}
