package pipeline

import (
	"context"
	"strings"

	"ironcurtain.dev/compiler/artifact"
	"ironcurtain.dev/compiler/scenarios"
	"ironcurtain.dev/compiler/verify"
	"ironcurtain.dev/gateway/policy"
)

// merge concatenates the servers' rules in server order, de-duplicates list
// definitions (first server wins), collects every scenario and verifies the
// merged artifacts after encoding and re-parsing them, exactly as the
// gateway will load them.
func merge(ctx context.Context, cfg Config, v *verify.Verifier, states []*serverState, reports []ServerReport, invariants, handwritten []scenarios.Scenario, lr *listResolver) (*Result, error) {
	now := artifact.Timestamp(cfg.Now())
	pol := &policy.CompiledPolicy{
		GeneratedAt:      now,
		ConstitutionHash: artifact.TextHash(cfg.Constitution),
		// The gateway rebases rules naming this sandbox to its own.
		Sandbox: cfg.Settings.Sandbox,
		Rules:   []policy.CompiledRule{},
	}
	var hashes []string
	seenList := map[string]bool{}
	resolved := map[string]policy.ResolvedList{}
	all := scenarios.Merge(invariants, handwritten...)
	all = scenarios.Merge(all, scenarios.Scenario{
		Description:      "invariant: a server unknown to the annotations is denied",
		Request:          scenarios.Request{ServerName: "ironcurtain-invariant-no-such-server", ToolName: "anything", Arguments: map[string]any{}},
		ExpectedDecision: scenarios.ExpectDeny,
		Reasoning:        "Only annotated tools of known servers can ever be called.",
		Source:           scenarios.Invariant,
	})
	verified := len(states) > 0
	for _, st := range states {
		if st.err != nil {
			verified = false
			pol.SkippedServers = append(pol.SkippedServers, policy.SkippedServer{
				ServerName: st.name,
				Reason:     "compilation failed, every call is denied: " + firstLine(st.err.Error()),
			})
			continue
		}
		hashes = append(hashes, st.inputHash)
		pol.Rules = append(pol.Rules, st.out.Rules...)
		for _, d := range st.out.Lists {
			if !seenList[d.Name] {
				seenList[d.Name] = true
				pol.ListDefinitions = append(pol.ListDefinitions, d)
				if st.resolved != nil {
					resolved[d.Name] = st.resolved.Lists[d.Name]
				}
			}
		}
		all = scenarios.Merge(all, st.generated...)
	}
	pol.InputHash = artifact.InputHash(hashes...)
	scenarios.Sort(all)

	res := &Result{
		Policy:    pol,
		Scenarios: &scenarios.File{GeneratedAt: now, ConstitutionHash: pol.ConstitutionHash, InputHash: artifact.InputHash("scenarios", pol.InputHash), Scenarios: all},
		Servers:   reports,
	}
	if len(pol.ListDefinitions) > 0 {
		res.Lists = &policy.DynamicLists{GeneratedAt: now, Lists: resolved}
	}
	e, err := v.EngineFromArtifacts(res.Policy, res.Lists, cfg.Annotations)
	if err != nil {
		return nil, err
	}
	final := v.Run(ctx, e, all)
	res.Final = final
	res.Verified = verified && len(scenarios.Failures(final)) == 0
	res.ListNotes = lr.notes()
	return res, nil
}

// Write writes the artifacts into dir in dependency order: dynamic lists
// (or the removal of a stale file), scenarios, and the compiled policy last,
// so a reader that sees the new policy also sees its lists.
func (r *Result) Write(dir string) error {
	if r.Lists != nil {
		if err := artifact.Write(dir, artifact.DynamicListsFile, r.Lists); err != nil {
			return err
		}
	} else if err := artifact.Remove(dir, artifact.DynamicListsFile); err != nil {
		return err
	}
	if err := artifact.Write(dir, artifact.ScenariosFile, r.Scenarios); err != nil {
		return err
	}
	return artifact.Write(dir, artifact.CompiledPolicyFile, r.Policy)
}

func firstLine(s string) string {
	if i := strings.IndexByte(s, '\n'); i >= 0 {
		return s[:i]
	}
	return s
}
