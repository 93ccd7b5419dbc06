package main

import (
	"context"
	"flag"
	"fmt"
	"os"

	"ironcurtain.dev/compiler/diff"
	"ironcurtain.dev/compiler/scenarios"
	"ironcurtain.dev/compiler/verify"
	"ironcurtain.dev/gateway/policy"
)

func runDiff(ctx context.Context, e env) int {
	fs := flag.NewFlagSet("policy-diff", flag.ContinueOnError)
	var (
		sf          settingsFlags
		annotations = fs.String("annotations", "", "tool-annotations.json for evaluating scenarios (default: each side's own)")
		scenFile    = fs.String("scenarios", "", "test-scenarios.json whose decisions to compare")
	)
	sf.register(fs)
	fs.Usage = func() {
		fmt.Fprintln(fs.Output(), "usage: ironcurtain-compile policy-diff [flags] OLD NEW   (directories or compiled-policy.json files)")
		fs.PrintDefaults()
	}
	if ok, code := parse(fs, reorder(e.args), e.stderr); !ok {
		return code
	}
	if fs.NArg() != 2 {
		fs.Usage()
		return exitUsage
	}
	oldPol, oldLists, oldAnn, err := loadPolicyDirLenient(fs.Arg(0), *annotations, *scenFile != "")
	if err != nil {
		return fail(e, "policy-diff", err)
	}
	newPol, newLists, newAnn, err := loadPolicyDirLenient(fs.Arg(1), *annotations, *scenFile != "")
	if err != nil {
		return fail(e, "policy-diff", err)
	}
	report := diff.Report{Rules: diff.Rules(oldPol, newPol), Lists: diff.Lists(oldLists, newLists)}
	if *scenFile != "" {
		settings, _, err := sf.settings()
		if err != nil {
			return fail(e, "policy-diff", err)
		}
		b, err := os.ReadFile(*scenFile)
		if err != nil {
			return fail(e, "policy-diff", usageErr("--scenarios: %v", err))
		}
		f, err := scenarios.Parse(*scenFile, b)
		if err != nil {
			return fail(e, "policy-diff", usageErr("--scenarios: %v", err))
		}
		v, err := verify.NewVerifier(ctx, settings)
		if err != nil {
			return fail(e, "policy-diff", err)
		}
		defer v.Close()
		oldE, err := v.EngineFromArtifacts(oldPol, oldLists, oldAnn)
		if err != nil {
			return fail(e, "policy-diff", fmt.Errorf("loading OLD: %w", err))
		}
		newE, err := v.EngineFromArtifacts(newPol, newLists, newAnn)
		if err != nil {
			return fail(e, "policy-diff", fmt.Errorf("loading NEW: %w", err))
		}
		report.Decisions = diff.Decisions(ctx, v, oldE, newE, f.Scenarios)
		report.Scenarios = len(f.Scenarios)
	}
	if err := report.Write(e.stdout); err != nil {
		return fail(e, "policy-diff", err)
	}
	if report.Empty() {
		return exitOK
	}
	return exitFailed
}

// loadPolicyDirLenient is loadPolicyDir where the annotations are needed
// only to evaluate scenarios.
func loadPolicyDirLenient(path, annPath string, needAnnotations bool) (*policy.CompiledPolicy, *policy.DynamicLists, *policy.Annotations, error) {
	if needAnnotations {
		return loadPolicyDir(path, annPath)
	}
	pol, lists, _, err := loadPolicyFiles(path)
	return pol, lists, nil, err
}

// reorder moves flags before positional arguments so that
// "policy-diff OLD NEW --scenarios f" works like the flag package expects.
func reorder(args []string) []string {
	var flags, pos []string
	for i := 0; i < len(args); i++ {
		a := args[i]
		if a == "--" {
			pos = append(pos, args[i+1:]...)
			break
		}
		if len(a) > 1 && a[0] == '-' {
			flags = append(flags, a)
			if !containsEq(a) && i+1 < len(args) && takesValue(a) {
				flags = append(flags, args[i+1])
				i++
			}
			continue
		}
		pos = append(pos, a)
	}
	return append(flags, pos...)
}

func containsEq(s string) bool {
	for i := 0; i < len(s); i++ {
		if s[i] == '=' {
			return true
		}
	}
	return false
}

// takesValue reports whether a flag of policy-diff takes a value.
func takesValue(flagArg string) bool {
	for len(flagArg) > 0 && flagArg[0] == '-' {
		flagArg = flagArg[1:]
	}
	switch flagArg {
	case "annotations", "scenarios", "gateway-config", "sandbox", "home", "protected-path", "protected-branch", "allow-domain", "sandbox-safe-role":
		return true
	}
	return false
}
