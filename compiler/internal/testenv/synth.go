package testenv

import (
	"encoding/json"
	"fmt"
	"regexp"
	"strings"

	"github.com/google/jsonschema-go/jsonschema"

	"ironcurtain.dev/compiler/internal/fakemodel"
	"ironcurtain.dev/compiler/toolset"
)

var toolLine = regexp.MustCompile(`(?m)^- ([^/\s]+)/([^:\s]+)`)

// Synth answers every pipeline step with a valid reply built from the
// annotations, for timing runs over any constitution: no rules (everything
// outside the sandbox is denied by default), one scenario per tool that
// expects deny, and a judge that accepts. Each server then costs one compile
// call, one scenario call per batch of tools and one judge call; steps it
// does not recognise get HTTP 599 so that a change of the pipeline's prompts
// shows up as a failure instead of a silently different figure.
func Synth(ts toolset.Tools) fakemodel.Responder {
	return func(r fakemodel.Request) fakemodel.Answer {
		switch {
		case strings.Contains(r.System, "You translate a security constitution"):
			return fakemodel.Answer{Text: `{"rules": []}`}
		case strings.Contains(r.System, "You write test scenarios"):
			return fakemodel.Answer{Text: synthScenarios(ts, r.System)}
		case strings.Contains(r.System, "You verify that compiled policy rules"):
			return fakemodel.Answer{Text: `{"analysis": "The rules implement the constitution.", "pass": true, "failureAttributions": [], "additionalScenarios": []}`}
		}
		return fakemodel.Answer{Status: 599}
	}
}

func synthScenarios(ts toolset.Tools, system string) string {
	tools := system
	if i := strings.Index(system, "## Tools"); i >= 0 {
		tools = system[i:]
		if j := strings.Index(tools, "## Environment"); j >= 0 {
			tools = tools[:j]
		}
	}
	type req struct {
		ServerName string         `json:"serverName"`
		ToolName   string         `json:"toolName"`
		Arguments  map[string]any `json:"arguments"`
	}
	type scen struct {
		Description string `json:"description"`
		Request     req    `json:"request"`
		Expected    string `json:"expectedDecision"`
		Reasoning   string `json:"reasoning"`
	}
	var out []scen
	for _, m := range toolLine.FindAllStringSubmatch(tools, -1) {
		t, ok := ts[m[1]+"/"+m[2]]
		if !ok {
			continue
		}
		out = append(out, scen{
			Description: fmt.Sprintf("Call %s/%s outside any permitted area", m[1], m[2]),
			Request:     req{ServerName: m[1], ToolName: m[2], Arguments: sampleArgs(t)},
			Expected:    "deny",
			Reasoning:   "No principle permits it.",
		})
	}
	b, _ := json.Marshal(map[string]any{"scenarios": out})
	return string(b)
}

// sampleArgs fills the required arguments with values of the right shape.
func sampleArgs(t toolset.Tool) map[string]any {
	args := map[string]any{}
	for _, name := range t.Required {
		args[name] = sample(t.Props[name], 0)
	}
	return args
}

func sample(p *jsonschema.Schema, depth int) any {
	if p == nil || depth > 8 {
		return "/etc/synthetic"
	}
	if len(p.Enum) > 0 {
		return p.Enum[0]
	}
	if p.Const != nil {
		return *p.Const
	}
	if len(p.AnyOf) > 0 {
		return sample(p.AnyOf[0], depth+1)
	}
	if len(p.OneOf) > 0 {
		return sample(p.OneOf[0], depth+1)
	}
	typ := p.Type
	if typ == "" && len(p.Types) > 0 {
		typ = p.Types[0]
	}
	switch typ {
	case "integer", "number":
		if p.Minimum != nil {
			return *p.Minimum
		}
		return 1.0
	case "boolean":
		return false
	case "array":
		n := 1
		if p.MinItems != nil && *p.MinItems > n {
			n = *p.MinItems
		}
		out := make([]any, n)
		for i := range out {
			out[i] = sample(p.Items, depth+1)
		}
		return out
	case "object":
		obj := map[string]any{}
		for _, r := range p.Required {
			obj[r] = sample(p.Properties[r], depth+1)
		}
		return obj
	}
	return "/etc/synthetic"
}
