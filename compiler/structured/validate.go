package structured

import (
	"encoding/json"
	"fmt"
	"math"
	"regexp"
	"sort"
	"strings"
	"sync"

	"github.com/google/jsonschema-go/jsonschema"
)

// maxReported bounds the problems listed in one validation message.
const maxReported = 20

// problems lists every violation of s by v it can find, each prefixed with
// a JSON path ("rules[0].if.server: missing"), for the subset of JSON Schema
// the step schemas use: type, enum, const, pattern, properties, required,
// additionalProperties, items, min/maxItems, minimum, anyOf and oneOf. The
// jsonschema package stops at the first error; the model fixes more per
// retry when it sees them all.
func problems(s *jsonschema.Schema, v any, path string, out *[]string) {
	if s == nil || len(*out) >= maxReported {
		return
	}
	add := func(format string, a ...any) {
		if len(*out) < maxReported {
			*out = append(*out, at(path)+fmt.Sprintf(format, a...))
		}
	}
	if s.Not != nil && isEmptySchema(s.Not) {
		add("not allowed")
		return
	}
	if types := schemaTypes(s); len(types) > 0 && !typeMatches(types, v) {
		add("is %s, want %s", jsonType(v), strings.Join(types, " or "))
		return
	}
	if len(s.Enum) > 0 && !inEnum(s.Enum, v) {
		add("%s is not one of %s", compact(v), compact(s.Enum))
	}
	if s.Const != nil && compact(*s.Const) != compact(v) {
		add("must be %s", compact(*s.Const))
	}
	switch x := v.(type) {
	case string:
		if s.Pattern != "" {
			if re, err := compiled(s.Pattern); err == nil && !re.MatchString(x) {
				add("%q does not match %s", x, s.Pattern)
			}
		}
	case float64:
		if s.Minimum != nil && x < *s.Minimum {
			add("%v is below the minimum %v", x, *s.Minimum)
		}
	case []any:
		if s.MinItems != nil && len(x) < *s.MinItems {
			add("has %d items, want at least %d", len(x), *s.MinItems)
		}
		if s.MaxItems != nil && len(x) > *s.MaxItems {
			add("has %d items, want at most %d", len(x), *s.MaxItems)
		}
		for i, e := range x {
			problems(s.Items, e, fmt.Sprintf("%s[%d]", path, i), out)
		}
	case map[string]any:
		for _, r := range s.Required {
			if _, ok := x[r]; !ok {
				add("missing required property %q", r)
			}
		}
		keys := make([]string, 0, len(x))
		for k := range x {
			keys = append(keys, k)
		}
		sort.Strings(keys)
		for _, k := range keys {
			child := join(path, k)
			if ps, ok := s.Properties[k]; ok {
				problems(ps, x[k], child, out)
				continue
			}
			if s.AdditionalProperties != nil {
				if s.AdditionalProperties.Not != nil && isEmptySchema(s.AdditionalProperties.Not) {
					known := make([]string, 0, len(s.Properties))
					for p := range s.Properties {
						known = append(known, p)
					}
					sort.Strings(known)
					add("unknown property %q (allowed: %s)", k, strings.Join(known, ", "))
					continue
				}
				problems(s.AdditionalProperties, x[k], child, out)
			}
		}
	}
	if len(s.AnyOf) > 0 || len(s.OneOf) > 0 {
		alts := s.AnyOf
		if len(alts) == 0 {
			alts = s.OneOf
		}
		// The closest form is the one with the fewest problems, where a
		// wrong constant (the discriminator, like "op" or "kind") weighs
		// most: it says the model meant another form.
		var best []string
		bestScore := -1
		for _, a := range alts {
			var p []string
			problems(a, v, path, &p)
			if len(p) == 0 {
				return
			}
			score := len(p)
			for _, m := range p {
				if strings.Contains(m, ": must be ") {
					score += 100
				}
			}
			if bestScore < 0 || score < bestScore {
				best, bestScore = p, score
			}
		}
		add("matches none of the allowed forms; closest form's problems follow")
		for _, p := range best {
			if len(*out) < maxReported {
				*out = append(*out, "  "+p)
			}
		}
	}
}

var patterns sync.Map // pattern -> *regexp.Regexp

func compiled(p string) (*regexp.Regexp, error) {
	if re, ok := patterns.Load(p); ok {
		return re.(*regexp.Regexp), nil
	}
	re, err := regexp.Compile(p)
	if err != nil {
		return nil, err
	}
	patterns.Store(p, re)
	return re, nil
}

func at(path string) string {
	if path == "" {
		return "(root): "
	}
	return path + ": "
}

func join(path, key string) string {
	if path == "" {
		return key
	}
	return path + "." + key
}

func isEmptySchema(s *jsonschema.Schema) bool {
	b, err := json.Marshal(s)
	return err == nil && (string(b) == "true" || string(b) == "{}")
}

func schemaTypes(s *jsonschema.Schema) []string {
	if s.Type != "" {
		return []string{s.Type}
	}
	return s.Types
}

func typeMatches(types []string, v any) bool {
	got := jsonType(v)
	for _, t := range types {
		if t == got || (t == "number" && got == "integer") {
			return true
		}
	}
	return false
}

func jsonType(v any) string {
	switch x := v.(type) {
	case nil:
		return "null"
	case bool:
		return "boolean"
	case string:
		return "string"
	case float64:
		if x == math.Trunc(x) && !math.IsInf(x, 0) {
			return "integer"
		}
		return "number"
	case []any:
		return "array"
	case map[string]any:
		return "object"
	}
	return fmt.Sprintf("%T", v)
}

func inEnum(enum []any, v any) bool {
	c := compact(v)
	for _, e := range enum {
		if compact(e) == c {
			return true
		}
	}
	return false
}

func compact(v any) string {
	b, err := json.Marshal(v)
	if err != nil {
		return fmt.Sprint(v)
	}
	return string(b)
}
