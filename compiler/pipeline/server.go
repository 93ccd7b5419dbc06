package pipeline

import (
	"context"
	"fmt"
	"sort"

	"ironcurtain.dev/compiler/artifact"
	"ironcurtain.dev/compiler/compile"
	"ironcurtain.dev/compiler/lists"
	"ironcurtain.dev/compiler/scenarios"
	"ironcurtain.dev/compiler/structured"
	"ironcurtain.dev/compiler/toolset"
	"ironcurtain.dev/compiler/verify"
	"ironcurtain.dev/gateway/policy"
)

// serverState is one server's compile-verify-repair cycle.
type serverState struct {
	name        string
	cfg         *Config
	runner      *structured.Runner
	verifier    *verify.Verifier
	lists       *listResolver
	tools       []toolset.Tool
	invariants  []scenarios.Scenario
	handwritten []scenarios.Scenario

	session   *compile.Session
	out       compile.Output
	resolved  *policy.DynamicLists
	generated []scenarios.Scenario // generated and probe scenarios (may be corrected)
	results   []scenarios.Result
	verdict   verify.Verdict
	inputHash string

	probes, repairs, corrections int
	dropped, refused             []string
	err                          error
}

func (st *serverState) log(msg string, args ...any) {
	st.cfg.Logger.Info(msg, append([]any{"server", st.name}, args...)...)
}

func (st *serverState) groundTruth() []scenarios.Scenario {
	return scenarios.Merge(st.invariants, st.handwritten...)
}

func (st *serverState) all() []scenarios.Scenario {
	return scenarios.Merge(st.groundTruth(), st.generated...)
}

func (st *serverState) run(ctx context.Context) {
	if err := st.compile(ctx); err != nil {
		st.err = err
		st.log("failed", "error", err)
		return
	}
	if err := st.verifyAndRepair(ctx); err != nil {
		st.err = err
		st.log("failed", "error", err)
	}
}

func (st *serverState) compile(ctx context.Context) error {
	in := compile.Input{
		Server:       st.name,
		Constitution: st.cfg.Constitution,
		Tools:        st.tools,
		Annotations:  st.cfg.Annotations,
		Settings:     st.cfg.Settings,
		GroundTruth:  st.groundTruth(),
	}
	st.session = compile.NewSession(st.runner, in)
	st.inputHash = artifact.InputHash("server", st.name, st.cfg.Constitution, artifact.JSONString(st.cfg.Annotations.Servers[st.name]), st.session.System())
	out, err := st.session.Compile(ctx)
	if err != nil {
		return err
	}
	st.out = out
	st.log("compiled", "rules", len(out.Rules), "lists", len(out.Lists))
	if err := st.resolveLists(ctx); err != nil {
		return err
	}
	engine, err := st.engine()
	if err != nil {
		return err
	}
	gen, dropped, err := scenarios.Generate(ctx, st.runner, scenarios.GenerateInput{
		Server:        st.name,
		Constitution:  st.cfg.Constitution,
		Tools:         st.tools,
		Settings:      st.cfg.Settings,
		PermittedDirs: compile.PermittedDirs(out.Rules),
		Lists:         st.resolved,
		Existing:      st.groundTruth(),
		BatchSize:     st.cfg.BatchSize,
	})
	if err != nil {
		return err
	}
	st.dropped = append(st.dropped, dropped...)
	st.generated = st.dropStructuralConflicts(ctx, engine, gen)
	st.log("scenarios", "generated", len(st.generated), "dropped", len(st.dropped))
	return nil
}

// dropStructuralConflicts removes generated scenarios that a structural
// check decides against their expectation: the check is ground truth, so the
// expectation is wrong.
func (st *serverState) dropStructuralConflicts(ctx context.Context, e *policy.Engine, list []scenarios.Scenario) []scenarios.Scenario {
	var keep []scenarios.Scenario
	for _, r := range st.verifier.Run(ctx, e, list) {
		if !r.Pass && r.Structural() {
			st.dropped = append(st.dropped, fmt.Sprintf("%q: %s always gives %s", r.Scenario.Description, r.Decision.Rule, r.Decision.Status))
			continue
		}
		keep = append(keep, r.Scenario)
	}
	return keep
}

func (st *serverState) resolveLists(ctx context.Context) error {
	if len(st.out.Lists) == 0 {
		st.resolved = nil
		return nil
	}
	l, err := st.lists.resolve(ctx, st.out.Lists)
	if err != nil {
		return err
	}
	st.resolved = l
	return nil
}

// policyFile is the server's rules as a compiled policy.
func (st *serverState) policyFile() *policy.CompiledPolicy {
	return &policy.CompiledPolicy{Rules: st.out.Rules, ListDefinitions: st.out.Lists}
}

func (st *serverState) engine() (*policy.Engine, error) {
	l := st.resolved
	if l == nil {
		l = compile.EmptyLists(st.out.Lists)
	}
	e, err := st.verifier.Engine(st.policyFile(), l, st.cfg.Annotations)
	if err != nil {
		return nil, fmt.Errorf("loading %s rules into the engine: %w", st.name, err)
	}
	return e, nil
}

func (st *serverState) execute(ctx context.Context) error {
	e, err := st.engine()
	if err != nil {
		return err
	}
	st.results = st.verifier.Run(ctx, e, st.all())
	return nil
}

func (st *serverState) judgeInput() verify.Input {
	return verify.Input{Server: st.name, Constitution: st.cfg.Constitution, Tools: st.tools, Settings: st.cfg.Settings, Rules: st.out.Rules, Lists: st.resolved}
}

// verifyAndRepair runs the scenarios, lets the judge attribute failures and
// probe for gaps, then repairs: corrected expectations for generated
// scenarios the judge blames, a rule patch for everything else, at most
// cfg.Repairs times.
func (st *serverState) verifyAndRepair(ctx context.Context) error {
	if err := st.execute(ctx); err != nil {
		return err
	}
	judge := verify.NewJudge(st.runner, st.judgeInput(), "initial")
	v, err := judge.Round(ctx, st.results)
	if err != nil {
		return err
	}
	st.verdict = v
	if err := st.addProbes(ctx, judge, v.Probes); err != nil {
		return err
	}
	for attempt := 1; ; attempt++ {
		failures := scenarios.Failures(st.results)
		if len(failures) == 0 {
			return nil
		}
		ruleBlamed := st.applyCorrections(failures)
		if err := st.execute(ctx); err != nil {
			return err
		}
		failures = scenarios.Failures(st.results)
		if len(failures) == 0 {
			return nil
		}
		if len(ruleBlamed) == 0 {
			// Only scenario-blamed failures whose corrections did not make
			// them pass remain: nothing a rule patch should chase.
			ruleBlamed = failures
		}
		if attempt > st.cfg.Repairs {
			return nil
		}
		st.log("repairing", "attempt", attempt, "failures", len(failures))
		out, err := st.session.Repair(ctx, st.out, stillFailing(ruleBlamed, failures), st.verdict.Analysis, attempt)
		if err != nil {
			return err
		}
		st.out = out
		st.repairs = attempt
		if err := st.resolveLists(ctx); err != nil {
			return err
		}
		if err := st.execute(ctx); err != nil {
			return err
		}
		if len(scenarios.Failures(st.results)) == 0 {
			return nil
		}
		judge = verify.NewJudge(st.runner, st.judgeInput(), fmt.Sprintf("repair-%d", attempt))
		if st.verdict, err = judge.Round(ctx, st.results); err != nil {
			return err
		}
	}
}

// addProbes runs the judge's probes; failing ones get a second judge round
// for attribution.
func (st *serverState) addProbes(ctx context.Context, judge *verify.Judge, probes []scenarios.Scenario) error {
	if len(probes) == 0 {
		return nil
	}
	e, err := st.engine()
	if err != nil {
		return err
	}
	base := st.all()
	merged := scenarios.Merge(base, st.dropStructuralConflicts(ctx, e, probes)...)
	added := merged[len(base):]
	st.generated = append(st.generated, added...)
	st.probes += len(added)
	if len(added) == 0 {
		return nil
	}
	probeResults := st.verifier.Run(ctx, e, added)
	if len(scenarios.Failures(probeResults)) > 0 {
		v, err := judge.Round(ctx, probeResults)
		if err != nil {
			return err
		}
		for d, b := range v.Blames {
			st.verdict.Blames[d] = b
		}
		st.verdict.Analysis += "\n\n" + v.Analysis
		st.verdict.Pass = v.Pass
	}
	return st.execute(ctx)
}

// applyCorrections applies the judge's scenario blames to generated
// scenarios and returns the failures that are the rules' fault: blamed on
// the rule or on both, not attributed, or ground truth (a handwritten or
// invariant scenario is never corrected, whatever the judge says).
func (st *serverState) applyCorrections(failures []scenarios.Result) []scenarios.Result {
	var corrections []scenarios.Correction
	var ruleBlamed []scenarios.Result
	for _, f := range failures {
		b, ok := st.verdict.Blames[f.Scenario.Description]
		truth := f.Scenario.Source.GroundTruth()
		if ok && b.Kind != verify.BlameRule {
			if truth {
				st.refused = append(st.refused, fmt.Sprintf("%q: the judge blamed a %s scenario; the rules must change instead", f.Scenario.Description, f.Scenario.Source))
			} else if b.CorrectedDecision != "" {
				corrections = append(corrections, scenarios.Correction{Description: f.Scenario.Description, Decision: b.CorrectedDecision, Reasoning: b.CorrectedReasoning})
			}
		}
		if !ok || b.Kind != verify.BlameScenario || truth {
			ruleBlamed = append(ruleBlamed, f)
		}
	}
	corrected, _ := scenarios.Correct(st.generated, corrections)
	st.generated = corrected
	st.corrections += len(corrections)
	// Spent blames: a later failure of the same scenario needs a new verdict.
	for _, c := range corrections {
		delete(st.verdict.Blames, c.Description)
	}
	return ruleBlamed
}

// stillFailing keeps the blamed results that still fail, with their current
// decision.
func stillFailing(blamed, failures []scenarios.Result) []scenarios.Result {
	now := map[string]scenarios.Result{}
	for _, f := range failures {
		now[f.Scenario.Description] = f
	}
	var out []scenarios.Result
	for _, b := range blamed {
		if f, ok := now[b.Scenario.Description]; ok {
			out = append(out, f)
		}
	}
	if len(out) == 0 {
		return failures
	}
	return out
}

func (st *serverState) report() ServerReport {
	r := ServerReport{
		Server:      st.name,
		Rules:       len(st.out.Rules),
		Lists:       len(st.out.Lists),
		Invariant:   len(st.invariants),
		Handwritten: len(st.handwritten),
		Probes:      st.probes,
		Repairs:     st.repairs,
		Corrections: st.corrections,
		Dropped:     st.dropped,
		Refused:     st.refused,
		JudgePass:   st.verdict.Pass,
		Analysis:    st.verdict.Analysis,
		Failures:    scenarios.Failures(st.results),
		Err:         st.err,
	}
	r.Generated = len(st.generated) - st.probes
	return r
}

// resolve returns the dynamic lists of defs, resolving each list once per run.
func (lr *listResolver) resolve(ctx context.Context, defs []policy.ListDefinition) (*policy.DynamicLists, error) {
	out := &policy.DynamicLists{Lists: map[string]policy.ResolvedList{}}
	for _, d := range defs {
		key := d.Name + "\x00" + lists.InputHash(d)
		lr.mu.Lock()
		res := lr.done[key]
		if res == nil {
			res = &listResult{}
			lr.done[key] = res
		}
		lr.mu.Unlock()
		res.once.Do(func() {
			l, notes, err := lists.Resolve(ctx, lr.runner, []policy.ListDefinition{d}, lr.existing, lists.Options{Now: lr.now})
			if err != nil {
				res.err = err
				return
			}
			res.name, res.list = d.Name, l.Lists[d.Name]
			if len(notes) > 0 {
				res.note = notes[0]
			}
		})
		if res.err != nil {
			return nil, res.err
		}
		out.Lists[d.Name] = res.list
	}
	return out, nil
}

// notes returns what happened to every list resolved in the run, by name.
func (lr *listResolver) notes() []lists.Note {
	lr.mu.Lock()
	defer lr.mu.Unlock()
	var out []lists.Note
	for _, r := range lr.done {
		if r.name != "" {
			out = append(out, r.note)
		}
	}
	sort.Slice(out, func(i, j int) bool { return out[i].List < out[j].List })
	return out
}
