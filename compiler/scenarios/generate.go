package scenarios

import (
	"context"
	"fmt"
	"sort"
	"strings"

	"github.com/google/jsonschema-go/jsonschema"
	"golang.org/x/sync/errgroup"

	s "ironcurtain.dev/compiler/structured"
	"ironcurtain.dev/compiler/toolset"
	"ironcurtain.dev/gateway/policy"
)

// DefaultBatchSize is how many tools one generation prompt covers.
const DefaultBatchSize = 25

// GenerateInput is what generating one server's scenarios needs.
type GenerateInput struct {
	Server       string
	Constitution string
	// Tools are the server's tools, sorted.
	Tools    []toolset.Tool
	Settings policy.Settings
	// PermittedDirs are the paths.within directories of the compiled rules.
	PermittedDirs []string
	// Lists are the resolved dynamic lists (values shown as examples).
	Lists *policy.DynamicLists
	// Existing are the ground-truth scenarios of the server; generated ones
	// complement them and never duplicate their calls.
	Existing []Scenario
	// BatchSize is the number of tools per prompt (DefaultBatchSize if 0).
	BatchSize int
}

type generated struct {
	Scenarios []struct {
		Description string  `json:"description"`
		Request     Request `json:"request"`
		Expected    string  `json:"expectedDecision"`
		Reasoning   string  `json:"reasoning"`
	} `json:"scenarios"`
}

// Generate asks the model for scenarios, one prompt per batch of tools, all
// batches concurrently. Every scenario's call is checked against the tool's
// input schema (errors go back to the model). Scenarios that only exercise a
// conditional tool's fallback roles are dropped and listed in dropped.
func Generate(ctx context.Context, r *s.Runner, in GenerateInput) (out []Scenario, dropped []string, err error) {
	size := in.BatchSize
	if size <= 0 {
		size = DefaultBatchSize
	}
	var batches [][]toolset.Tool
	for i := 0; i < len(in.Tools); i += size {
		batches = append(batches, in.Tools[i:min(i+size, len(in.Tools))])
	}
	results := make([][]Scenario, len(batches))
	g, gctx := errgroup.WithContext(ctx)
	for i, batch := range batches {
		g.Go(func() error {
			list, err := generateBatch(gctx, r, in, batch, i, len(batches))
			results[i] = list
			return err
		})
	}
	if err := g.Wait(); err != nil {
		return nil, nil, fmt.Errorf("generating scenarios for %s: %w", in.Server, err)
	}
	index := toolset.Tools{}
	for _, t := range in.Tools {
		index[t.Key()] = t
	}
	var all []Scenario
	for _, list := range results {
		for _, sc := range list {
			t := index[sc.Request.ServerName+"/"+sc.Request.ToolName]
			if fb, why := t.FallsBackToDefault(sc.Request.Arguments); fb {
				dropped = append(dropped, fmt.Sprintf("%q: tests only the default roles (%s)", sc.Description, why))
				continue
			}
			all = append(all, sc)
		}
	}
	for _, sc := range Merge(in.Existing, all...) {
		if sc.Source == Generated {
			out = append(out, sc)
		}
	}
	return out, dropped, nil
}

func generateBatch(ctx context.Context, r *s.Runner, in GenerateInput, batch []toolset.Tool, i, n int) ([]Scenario, error) {
	names := make([]string, len(batch))
	index := toolset.Tools{}
	for j, t := range batch {
		names[j] = t.Annotation.Tool
		index[t.Key()] = t
	}
	schema := s.Object(map[string]*jsonschema.Schema{
		"scenarios": s.MinItems(s.Array(s.Object(map[string]*jsonschema.Schema{
			"description": s.String("what the scenario checks, one sentence, unique"),
			"request": s.Object(map[string]*jsonschema.Schema{
				"serverName": s.Const(in.Server),
				"toolName":   s.Enum(names...),
				"arguments":  {Type: "object"},
			}, "serverName", "toolName", "arguments"),
			"expectedDecision": s.Enum(ExpectAllow, ExpectDeny, ExpectEscalate),
			"reasoning":        s.String("why the constitution gives this decision, one sentence"),
		}, "description", "request", "expectedDecision", "reasoning")), 1),
	}, "scenarios")
	var existing []Scenario
	for _, e := range in.Existing {
		if _, ok := index[e.Request.ServerName+"/"+e.Request.ToolName]; ok {
			existing = append(existing, e)
		}
	}
	step := "scenarios/" + in.Server
	if n > 1 {
		step = fmt.Sprintf("%s/%d", step, i+1)
	}
	res, err := s.Generate(ctx, r, s.Request{
		Step:      step,
		System:    generatorPrompt(in, batch),
		User:      batchInstruction(existing),
		Schema:    schema,
		MaxTokens: 16384,
	}, func(g *generated) error {
		var errs []string
		seen := map[string]bool{}
		for k, sc := range g.Scenarios {
			if err := index.CheckCall(sc.Request.ServerName, sc.Request.ToolName, sc.Request.Arguments); err != nil {
				errs = append(errs, fmt.Sprintf("scenarios[%d] (%s): %v", k, sc.Description, err))
			}
			d := strings.TrimSpace(sc.Description)
			if d == "" || seen[d] {
				errs = append(errs, fmt.Sprintf("scenarios[%d]: the description is empty or repeats an earlier one", k))
			}
			seen[d] = true
		}
		if len(errs) > 0 {
			return fmt.Errorf("fix these scenarios:\n%s", strings.Join(errs, "\n"))
		}
		return nil
	})
	if err != nil {
		return nil, err
	}
	out := make([]Scenario, len(res.Value.Scenarios))
	for k, sc := range res.Value.Scenarios {
		args := sc.Request.Arguments
		if args == nil {
			args = map[string]any{}
		}
		out[k] = Scenario{
			Description:      strings.TrimSpace(sc.Description),
			Request:          Request{ServerName: sc.Request.ServerName, ToolName: sc.Request.ToolName, Arguments: args},
			ExpectedDecision: Expectation(sc.Expected),
			Reasoning:        sc.Reasoning,
			Source:           Generated,
		}
	}
	return out, nil
}

func generatorPrompt(in GenerateInput, batch []toolset.Tool) string {
	var b strings.Builder
	fmt.Fprintf(&b, `You write test scenarios for the security policy of an AI-agent gateway. A scenario is one concrete tool call and the decision the constitution requires for it. Your scenarios are run through the real policy engine; a failure means either the rules or your expectation is wrong, so be precise.

## Constitution

%s

## Tools

%s
## Environment

- Sandbox (the agent's workspace): %s. On the filesystem and git servers, arguments with the roles %s are always allowed inside it; other operations inside it (deletes, history rewrites) follow the constitution.
`, strings.TrimSpace(in.Constitution), toolset.Describe(batch), in.Settings.Sandbox, toolset.SandboxSafeText(in.Settings))
	if in.Settings.Home != "" {
		fmt.Fprintf(&b, "- Home directory: %s (so ~/Downloads is %s/Downloads).\n", in.Settings.Home, strings.TrimSuffix(in.Settings.Home, "/"))
	}
	if allow := in.Settings.DomainAllowlists[in.Server]; len(allow) > 0 {
		fmt.Fprintf(&b, "- URLs of this server outside %s are escalated to a human by the engine.\n", strings.Join(allow, ", "))
	}
	if len(in.PermittedDirs) > 0 {
		fmt.Fprintf(&b, "- The compiled rules name these directories; use exactly these paths for cases about them: %s\n", strings.Join(in.PermittedDirs, ", "))
	}
	if in.Lists != nil && len(in.Lists.Lists) > 0 {
		b.WriteString("- Dynamic lists (use members for positive cases, clearly unrelated values for negative ones):\n")
		names := make([]string, 0, len(in.Lists.Lists))
		for n := range in.Lists.Lists {
			names = append(names, n)
		}
		sort.Strings(names)
		for _, n := range names {
			vals := in.Lists.Lists[n].Effective()
			more := ""
			if len(vals) > 5 {
				vals, more = vals[:5], fmt.Sprintf(", ... (%d in all)", len(in.Lists.Lists[n].Effective()))
			}
			fmt.Fprintf(&b, "  @%s: %s%s\n", n, strings.Join(vals, ", "), more)
		}
	}
	b.WriteString(`
## Decisions

- "allow": the constitution permits the call.
- "escalate": the constitution says a human must approve it.
- "deny": the constitution forbids it, or does not mention it (default deny).

Cover allowed, escalated and denied calls for these tools: reads and writes outside the sandbox, the directories the constitution names, boundary cases (a sibling directory with a similar name, ".." that leaves a permitted directory), every mode of conditional tools (set the discriminator argument explicitly), and for URL arguments both allowed and unlisted domains. Always give git remote arguments an explicit URL. Use only the arguments each tool declares, with the right JSON types. Write at least one scenario per tool when the constitution says something about it; one sentence per description and reasoning.
`)
	return b.String()
}

func batchInstruction(existing []Scenario) string {
	if len(existing) == 0 {
		return "Write the test scenarios."
	}
	var b strings.Builder
	b.WriteString("These scenarios already exist; complement them without repeating their calls:\n")
	for _, e := range existing {
		fmt.Fprintf(&b, "- %s/%s: %s (%s)\n", e.Request.ServerName, e.Request.ToolName, e.Description, e.ExpectedDecision)
	}
	b.WriteString("\nWrite the test scenarios.")
	return b.String()
}
