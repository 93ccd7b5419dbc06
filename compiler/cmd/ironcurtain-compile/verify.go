package main

import (
	"context"
	"flag"
	"fmt"
	"os"
	"path/filepath"

	"ironcurtain.dev/compiler/artifact"
	"ironcurtain.dev/compiler/scenarios"
	"ironcurtain.dev/compiler/toolset"
	"ironcurtain.dev/compiler/verify"
	"ironcurtain.dev/gateway/policy"
)

func runVerify(ctx context.Context, e env) int {
	fs := flag.NewFlagSet("verify", flag.ContinueOnError)
	var (
		sf          settingsFlags
		dir         = fs.String("dir", "", "policy directory (required)")
		annotations = fs.String("annotations", "", "tool-annotations.json (default: <dir>/tool-annotations.json)")
		scenFile    = fs.String("scenarios", "", "scenarios to run (default: <dir>/test-scenarios.json)")
		handwritten = fs.String("handwritten", "", "extra handwritten scenarios")
	)
	sf.register(fs)
	if ok, code := parse(fs, e.args, e.stderr); !ok {
		return code
	}
	if *dir == "" || fs.NArg() > 0 {
		fmt.Fprintln(e.stderr, "ironcurtain-compile verify: --dir is required")
		return exitUsage
	}
	settings, _, err := sf.settings()
	if err != nil {
		return fail(e, "verify", err)
	}
	pol, lists, ann, err := loadPolicyDir(*dir, *annotations)
	if err != nil {
		return fail(e, "verify", err)
	}
	ts := toolset.NewTools(ann)
	list := scenarios.Invariants(ts, settings)
	builtin, err := scenarios.BuiltinHandwritten(ts, settings.Sandbox, settings.Home)
	if err != nil {
		return fail(e, "verify", err)
	}
	list = scenarios.Merge(list, builtin...)
	if *handwritten != "" {
		hw, err := scenarios.LoadHandwritten(*handwritten, settings.Sandbox, settings.Home)
		if err != nil {
			return fail(e, "verify", usageErr("--handwritten: %v", err))
		}
		list = scenarios.Merge(list, hw...)
	}
	sp := *scenFile
	if sp == "" {
		sp = filepath.Join(*dir, artifact.ScenariosFile)
	}
	if b, err := artifact.ReadOptional(sp); err != nil {
		return fail(e, "verify", err)
	} else if b != nil {
		f, err := scenarios.Parse(sp, b)
		if err != nil {
			return fail(e, "verify", usageErr("--scenarios: %v", err))
		}
		list = scenarios.Merge(list, f.Scenarios...)
	} else if *scenFile != "" {
		return fail(e, "verify", usageErr("--scenarios: %s does not exist", sp))
	}
	v, err := verify.NewVerifier(ctx, settings)
	if err != nil {
		return fail(e, "verify", err)
	}
	defer v.Close()
	if v.Note != "" {
		fmt.Fprintf(e.stderr, "note: %s\n", v.Note)
	}
	engine, err := v.EngineFromArtifacts(pol, lists, ann)
	if err != nil {
		return fail(e, "verify", err)
	}
	results := v.Run(ctx, engine, list)
	failing := scenarios.Failures(results)
	for _, f := range failing {
		fmt.Fprintf(e.stdout, "FAIL [%s] %s: expected %s, got %s (%s)\n", f.Scenario.Source, f.Scenario.Description, f.Scenario.ExpectedDecision, f.Decision.Status, f.Decision.Rule)
	}
	fmt.Fprintf(e.stdout, "%d scenarios, %d pass, %d fail\n", len(results), len(results)-len(failing), len(failing))
	if len(failing) > 0 {
		return exitFailed
	}
	return exitOK
}

// loadPolicyDir reads a policy directory (or a compiled-policy.json path);
// annPath overrides the location of the annotations.
func loadPolicyDir(path, annPath string) (*policy.CompiledPolicy, *policy.DynamicLists, *policy.Annotations, error) {
	pol, lists, dir, err := loadPolicyFiles(path)
	if err != nil {
		return nil, nil, nil, err
	}
	if annPath == "" {
		annPath = filepath.Join(dir, artifact.AnnotationsFile)
	}
	ann, err := readAnnotations(annPath)
	if err != nil {
		return nil, nil, nil, usageErr("--annotations: %v", err)
	}
	return pol, lists, ann, nil
}

// loadPolicyFiles reads compiled-policy.json and dynamic-lists.json from a
// directory, or from the directory of a compiled-policy.json path.
func loadPolicyFiles(path string) (*policy.CompiledPolicy, *policy.DynamicLists, string, error) {
	dir := path
	if st, err := os.Stat(path); err == nil && !st.IsDir() {
		dir = filepath.Dir(path)
	} else {
		path = filepath.Join(dir, artifact.CompiledPolicyFile)
	}
	b, err := os.ReadFile(path)
	if err != nil {
		return nil, nil, "", usageErr("reading policy: %v", err)
	}
	pol, err := policy.ParseCompiledPolicy(path, b)
	if err != nil {
		return nil, nil, "", usageErr("reading policy: %v", err)
	}
	lists, err := readLists(filepath.Join(dir, artifact.DynamicListsFile))
	if err != nil {
		return nil, nil, "", err
	}
	return pol, lists, dir, nil
}
