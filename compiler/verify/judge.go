// Package verify judges a compiled rule set: the scenarios are run through
// the real gateway/policy engine, and a model judge explains the failures,
// attributes each to the rule, the scenario or both (the dual-feedback repair
// of the original), and proposes probe scenarios for gaps it suspects.
package verify

import (
	"context"
	"fmt"
	"strings"

	"github.com/google/jsonschema-go/jsonschema"

	"ironcurtain.dev/compiler"
	"ironcurtain.dev/compiler/compile"
	"ironcurtain.dev/compiler/scenarios"
	s "ironcurtain.dev/compiler/structured"
	"ironcurtain.dev/compiler/toolset"
	"ironcurtain.dev/gateway/policy"
)

// MaxProbes bounds the probe scenarios the judge may add per round.
const MaxProbes = 5

// Blame kinds.
const (
	BlameRule     = "rule"
	BlameScenario = "scenario"
	BlameBoth     = "both"
)

// Input is what judging one server's rules needs.
type Input struct {
	Server       string
	Constitution string
	Tools        []toolset.Tool
	Settings     policy.Settings
	Rules        []policy.CompiledRule
	Lists        *policy.DynamicLists
}

// Blame attributes one failure.
type Blame struct {
	Kind               string                `json:"kind"`
	Reasoning          string                `json:"reasoning"`
	CorrectedDecision  scenarios.Expectation `json:"correctedDecision,omitempty"`
	CorrectedReasoning string                `json:"correctedReasoning,omitempty"`
}

// Verdict is one judge round.
type Verdict struct {
	Analysis string
	// Pass is the judge's opinion that the rules implement the
	// constitution; it is reported, never trusted over the engine.
	Pass bool
	// Blames maps a failing scenario's description to its attribution.
	Blames map[string]Blame
	// Probes are extra scenarios the judge wants run (source generated).
	Probes []scenarios.Scenario
}

// Judge is a multi-turn judging session for one version of a rule set.
type Judge struct {
	in     Input
	runner *s.Runner
	system string
	convo  []compiler.Message
	rounds int
	// Label distinguishes sessions of the same server in step names
	// ("initial", "repair-1").
	label string
}

// NewJudge starts a session; label names it in the interaction log.
func NewJudge(r *s.Runner, in Input, label string) *Judge {
	return &Judge{in: in, runner: r, system: judgePrompt(in), label: label}
}

type judgeReply struct {
	Analysis     string `json:"analysis"`
	Pass         bool   `json:"pass"`
	Attributions []struct {
		ScenarioDescription string `json:"scenarioDescription"`
		Blame               Blame  `json:"blame"`
	} `json:"failureAttributions"`
	Additional []struct {
		Description string            `json:"description"`
		Request     scenarios.Request `json:"request"`
		Expected    string            `json:"expectedDecision"`
		Reasoning   string            `json:"reasoning"`
	} `json:"additionalScenarios"`
}

// Round shows the judge the results of running scenarios and returns its
// verdict. Every failure must be attributed, and probes must be valid calls
// of the server's tools; otherwise the reply goes back to the model.
func (j *Judge) Round(ctx context.Context, results []scenarios.Result) (Verdict, error) {
	j.rounds++
	var failing []string
	for _, r := range results {
		if !r.Pass {
			failing = append(failing, r.Scenario.Description)
		}
	}
	index := toolset.Tools{}
	names := make([]string, len(j.in.Tools))
	for i, t := range j.in.Tools {
		index[t.Key()] = t
		names[i] = t.Annotation.Tool
	}
	blame := s.OneOf(
		s.Object(map[string]*jsonschema.Schema{"kind": s.Const(BlameRule), "reasoning": s.String("")}, "kind", "reasoning"),
		s.Object(map[string]*jsonschema.Schema{"kind": s.Const(BlameScenario), "reasoning": s.String(""), "correctedDecision": s.Enum(scenarios.ExpectAllow, scenarios.ExpectDeny, scenarios.ExpectEscalate), "correctedReasoning": s.String("")}, "kind", "reasoning", "correctedDecision", "correctedReasoning"),
		s.Object(map[string]*jsonschema.Schema{"kind": s.Const(BlameBoth), "reasoning": s.String(""), "correctedDecision": s.Enum(scenarios.ExpectAllow, scenarios.ExpectDeny, scenarios.ExpectEscalate), "correctedReasoning": s.String("")}, "kind", "reasoning", "correctedDecision", "correctedReasoning"),
	)
	descSchema := s.String("the FAIL scenario's exact description")
	if len(failing) > 0 {
		descSchema = s.Enum(failing...)
	}
	attributions := s.Array(s.Object(map[string]*jsonschema.Schema{"scenarioDescription": descSchema, "blame": blame}, "scenarioDescription", "blame"))
	if len(failing) == 0 {
		attributions = s.MaxItems(attributions, 0)
	}
	schema := s.Object(map[string]*jsonschema.Schema{
		"analysis":            s.String("a few sentences per issue"),
		"pass":                s.Bool("true only if every result is correct and coverage is adequate"),
		"failureAttributions": attributions,
		"additionalScenarios": s.MaxItems(s.Array(s.Object(map[string]*jsonschema.Schema{
			"description": s.String(""),
			"request": s.Object(map[string]*jsonschema.Schema{
				"serverName": s.Const(j.in.Server),
				"toolName":   s.Enum(names...),
				"arguments":  {Type: "object"},
			}, "serverName", "toolName", "arguments"),
			"expectedDecision": s.Enum(scenarios.ExpectAllow, scenarios.ExpectDeny, scenarios.ExpectEscalate),
			"reasoning":        s.String(""),
		}, "description", "request", "expectedDecision", "reasoning")), MaxProbes),
	}, "analysis", "pass", "failureAttributions", "additionalScenarios")

	check := func(v *judgeReply) error {
		var errs []string
		seen := map[string]bool{}
		for _, a := range v.Attributions {
			if seen[a.ScenarioDescription] {
				errs = append(errs, fmt.Sprintf("%q is attributed twice", a.ScenarioDescription))
			}
			seen[a.ScenarioDescription] = true
		}
		for _, f := range failing {
			if !seen[f] {
				errs = append(errs, fmt.Sprintf("the failure %q has no entry in failureAttributions", f))
			}
		}
		for k, p := range v.Additional {
			if err := index.CheckCall(p.Request.ServerName, p.Request.ToolName, p.Request.Arguments); err != nil {
				errs = append(errs, fmt.Sprintf("additionalScenarios[%d]: %v", k, err))
			}
		}
		if len(errs) > 0 {
			return fmt.Errorf("fix these problems:\n%s", strings.Join(errs, "\n"))
		}
		return nil
	}
	step := fmt.Sprintf("judge/%s/%s/%d", j.in.Server, j.label, j.rounds)
	user := fmt.Sprintf("## Results of round %d\n\n%s\nAnalyse the results as instructed.", j.rounds, scenarios.FormatResults(results))
	res, err := s.Generate(ctx, j.runner, s.Request{Step: step, System: j.system, History: j.convo, User: user, Schema: schema}, check)
	if err != nil {
		return Verdict{}, fmt.Errorf("judging %s: %w", j.in.Server, err)
	}
	j.convo = res.Conversation
	out := Verdict{Analysis: res.Value.Analysis, Pass: res.Value.Pass, Blames: map[string]Blame{}}
	for _, a := range res.Value.Attributions {
		out.Blames[a.ScenarioDescription] = a.Blame
	}
	for _, p := range res.Value.Additional {
		args := p.Request.Arguments
		if args == nil {
			args = map[string]any{}
		}
		out.Probes = append(out.Probes, scenarios.Scenario{
			Description:      strings.TrimSpace(p.Description),
			Request:          scenarios.Request{ServerName: p.Request.ServerName, ToolName: p.Request.ToolName, Arguments: args},
			ExpectedDecision: scenarios.Expectation(p.Expected),
			Reasoning:        p.Reasoning,
			Source:           scenarios.Generated,
		})
	}
	return out, nil
}

func judgePrompt(in Input) string {
	var b strings.Builder
	fmt.Fprintf(&b, `You verify that compiled policy rules implement a constitution. The rules of the %q server were run through the real policy engine on test scenarios; you see each result.

## Constitution

%s

## Compiled rules (per role, first match wins; most restrictive role wins)

%s
## Tools

%s
## Engine behaviour that is always correct

- On the filesystem and git servers, arguments with the roles %s whose values all lie inside the sandbox %s are allowed (rule structural-sandbox-allow); other roles inside the sandbox are decided by the rules.
- Protected files and paths are denied (structural-protected-path); git force pushes, branch deletions and pushes to protected branches are denied (structural-git-push); unknown tools and arguments are denied.
- URL arguments outside the server's domain allowlist are escalated (structural-domain-escalate).
- "default-deny" means no rule matched: right when the constitution forbids the call or is silent, wrong when it allows the call or asks for a human.
- A rule that escalates gives "escalate", never "deny".

A structural result that disagrees with a scenario means the scenario is wrong.
`, in.Server, strings.TrimSpace(in.Constitution), compile.FormatRules(in.Rules), toolset.Describe(in.Tools), toolset.SandboxSafeText(in.Settings), in.Settings.Sandbox)
	if in.Settings.Home != "" {
		fmt.Fprintf(&b, "\nThe home directory is %s.\n", in.Settings.Home)
	}
	if in.Lists != nil && len(in.Lists.Lists) > 0 {
		b.WriteString("\nDynamic lists referenced by the rules have these members (first few):\n")
		for _, n := range sortedKeys(in.Lists.Lists) {
			vals := in.Lists.Lists[n].Effective()
			if len(vals) > 5 {
				vals = vals[:5]
			}
			fmt.Fprintf(&b, "- @%s: %s\n", n, strings.Join(vals, ", "))
		}
	}
	fmt.Fprintf(&b, `
## Instructions

1. For EVERY FAIL give a failureAttributions entry with the scenario's exact description and the blame:
   - "rule": the rule set is wrong; the expectation follows the constitution.
   - "scenario": the expectation is wrong; give correctedDecision and correctedReasoning.
   - "both": the rules need a change and the expectation is wrong too; give the corrected expectation.
   Scenarios with source handwritten or invariant are ground truth: blame the rules.
2. Look for gaps: a broad allow shadowing an escalate, an escalate that catches calls the constitution forbids, a tool covered for some inputs whose complement the constitution also speaks about, a rule whose name says one decision and whose "then" says another.
3. Propose at most %d additionalScenarios that probe real gaps, outside the sandbox, with valid arguments. None if coverage is adequate.
4. Set pass to true only when every result is right and coverage is adequate.
Be concise.
`, MaxProbes)
	return b.String()
}

func sortedKeys[V any](m map[string]V) []string {
	out := make([]string, 0, len(m))
	for k := range m {
		out = append(out, k)
	}
	for i := 1; i < len(out); i++ {
		for j := i; j > 0 && out[j] < out[j-1]; j-- {
			out[j], out[j-1] = out[j-1], out[j]
		}
	}
	return out
}
