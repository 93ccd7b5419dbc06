package scenarios

import (
	_ "embed"
	"fmt"
	"os"
	"strings"

	"ironcurtain.dev/compiler/toolset"
)

//go:embed handwritten.json
var builtinHandwritten []byte

// Placeholders expanded in handwritten scenarios.
const (
	SandboxPlaceholder = "${SANDBOX}"
	HomePlaceholder    = "${HOME}"
)

// BuiltinHandwritten returns the shipped handwritten scenarios with the
// placeholders expanded, keeping only those whose tool is in ts (the
// shipped ones name built-in filesystem tools, which a deployment may not
// have).
func BuiltinHandwritten(ts toolset.Tools, sandbox, home string) ([]Scenario, error) {
	f, err := Parse("built-in handwritten scenarios", builtinHandwritten)
	if err != nil {
		return nil, err
	}
	var out []Scenario
	for _, s := range expand(f.Scenarios, sandbox, home) {
		if _, ok := ts[s.Request.ServerName+"/"+s.Request.ToolName]; ok {
			out = append(out, s)
		}
	}
	return out, nil
}

// LoadHandwritten reads an operator's handwritten scenarios ({"scenarios":
// [...]}, the test-scenarios.json shape) and expands the placeholders. Every
// scenario is marked handwritten: it is ground truth, kept even when it names
// a tool the annotations lack (such a call must then be denied).
func LoadHandwritten(file, sandbox, home string) ([]Scenario, error) {
	b, err := os.ReadFile(file)
	if err != nil {
		return nil, fmt.Errorf("loading handwritten scenarios: %w", err)
	}
	f, err := Parse(file, b)
	if err != nil {
		return nil, fmt.Errorf("loading handwritten scenarios: %w", err)
	}
	list := expand(f.Scenarios, sandbox, home)
	for i := range list {
		list[i].Source = Handwritten
	}
	return list, nil
}

func expand(list []Scenario, sandbox, home string) []Scenario {
	r := strings.NewReplacer(SandboxPlaceholder, sandbox, HomePlaceholder, home)
	out := make([]Scenario, len(list))
	for i, s := range list {
		s.Request.Arguments, _ = expandValue(r, s.Request.Arguments).(map[string]any)
		if s.Request.Arguments == nil {
			s.Request.Arguments = map[string]any{}
		}
		out[i] = s
	}
	return out
}

func expandValue(r *strings.Replacer, v any) any {
	switch x := v.(type) {
	case string:
		return r.Replace(x)
	case []any:
		out := make([]any, len(x))
		for i, e := range x {
			out[i] = expandValue(r, e)
		}
		return out
	case map[string]any:
		out := make(map[string]any, len(x))
		for k, e := range x {
			out[k] = expandValue(r, e)
		}
		return out
	}
	return v
}
