package structured

import (
	"github.com/google/jsonschema-go/jsonschema"
)

// Schema constructors keep the per-step schemas short and readable. Objects
// are closed (additionalProperties: false) so a misspelt field is an error
// the model is told about, not a silently ignored key.

// Object is a closed object with the given properties; required lists the
// properties that must be present.
func Object(props map[string]*jsonschema.Schema, required ...string) *jsonschema.Schema {
	return &jsonschema.Schema{
		Type:                 "object",
		Properties:           props,
		Required:             required,
		AdditionalProperties: &jsonschema.Schema{Not: &jsonschema.Schema{}},
	}
}

// Map is an object whose property names are free and whose values match v.
func Map(v *jsonschema.Schema) *jsonschema.Schema {
	return &jsonschema.Schema{Type: "object", AdditionalProperties: v}
}

// Array is an array of items.
func Array(items *jsonschema.Schema) *jsonschema.Schema {
	return &jsonschema.Schema{Type: "array", Items: items}
}

// String is any string; described strings tell the model what to write.
func String(description string) *jsonschema.Schema {
	return &jsonschema.Schema{Type: "string", Description: description}
}

// Pattern is a string matching a regular expression.
func Pattern(re, description string) *jsonschema.Schema {
	return &jsonschema.Schema{Type: "string", Pattern: re, Description: description}
}

// Bool is a boolean.
func Bool(description string) *jsonschema.Schema {
	return &jsonschema.Schema{Type: "boolean", Description: description}
}

// Enum is a string from values.
func Enum[S ~string](values ...S) *jsonschema.Schema {
	e := make([]any, len(values))
	for i, v := range values {
		e[i] = string(v)
	}
	return &jsonschema.Schema{Type: "string", Enum: e}
}

// Const is exactly the string v.
func Const(v string) *jsonschema.Schema {
	var a any = v
	return &jsonschema.Schema{Type: "string", Const: &a}
}

// Scalar is a string, number or boolean.
func Scalar() *jsonschema.Schema {
	return &jsonschema.Schema{Types: []string{"string", "number", "boolean"}}
}

// AnyValue accepts any JSON value.
func AnyValue() *jsonschema.Schema { return &jsonschema.Schema{} }

// OneOf is exactly one of the alternatives.
func OneOf(alts ...*jsonschema.Schema) *jsonschema.Schema {
	return &jsonschema.Schema{OneOf: alts}
}

// AnyOf is at least one of the alternatives.
func AnyOf(alts ...*jsonschema.Schema) *jsonschema.Schema {
	return &jsonschema.Schema{AnyOf: alts}
}

// MaxItems bounds an array schema and returns it.
func MaxItems(s *jsonschema.Schema, n int) *jsonschema.Schema {
	s.MaxItems = &n
	return s
}

// MinItems sets the minimum length of an array schema and returns it.
func MinItems(s *jsonschema.Schema, n int) *jsonschema.Schema {
	s.MinItems = &n
	return s
}
