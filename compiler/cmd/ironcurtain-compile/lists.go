package main

import (
	"context"
	"flag"
	"fmt"
	"os"
	"path/filepath"

	"ironcurtain.dev/compiler/artifact"
	"ironcurtain.dev/compiler/lists"
	"ironcurtain.dev/gateway/policy"
)

func runResolveLists(ctx context.Context, e env) int {
	fs := flag.NewFlagSet("resolve-lists", flag.ContinueOnError)
	var (
		mf      modelFlags
		dir     = fs.String("dir", "", "policy directory with compiled-policy.json; dynamic-lists.json is read and rewritten there (required)")
		refresh = fs.Bool("refresh", false, "ask the model again even for unchanged lists")
		only    multiFlag
	)
	fs.Var(&only, "list", "resolve only this list (repeatable; implies --refresh for it)")
	mf.register(fs, e.getenv)
	if ok, code := parse(fs, e.args, e.stderr); !ok {
		return code
	}
	if *dir == "" || fs.NArg() > 0 {
		fmt.Fprintln(e.stderr, "ironcurtain-compile resolve-lists: --dir is required")
		return exitUsage
	}
	path := filepath.Join(*dir, artifact.CompiledPolicyFile)
	b, err := os.ReadFile(path)
	if err != nil {
		return fail(e, "resolve-lists", usageErr("--dir: %v", err))
	}
	pol, err := policy.ParseCompiledPolicy(path, b)
	if err != nil {
		return fail(e, "resolve-lists", usageErr("--dir: %v", err))
	}
	defined := map[string]bool{}
	for _, d := range pol.ListDefinitions {
		defined[d.Name] = true
	}
	for _, n := range only {
		if !defined[n] {
			return fail(e, "resolve-lists", usageErr("--list: %s defines no list %q", path, n))
		}
	}
	if len(pol.ListDefinitions) == 0 {
		fmt.Fprintf(e.stdout, "%s defines no dynamic lists\n", path)
		return exitOK
	}
	existing, err := readLists(filepath.Join(*dir, artifact.DynamicListsFile))
	if err != nil {
		return fail(e, "resolve-lists", err)
	}
	sess, err := mf.open(e, *dir, newLogger(e.stderr))
	if err != nil {
		return fail(e, "resolve-lists", err)
	}
	resolved, notes, err := lists.Resolve(ctx, sess.runner, pol.ListDefinitions, existing, lists.Options{Refresh: *refresh, Only: only, Now: e.now})
	if cerr := sess.close(); cerr != nil && err == nil {
		err = cerr
	}
	if err != nil {
		return fail(e, "resolve-lists", err)
	}
	if err := artifact.Write(*dir, artifact.DynamicListsFile, resolved); err != nil {
		return fail(e, "resolve-lists", err)
	}
	for _, n := range notes {
		fmt.Fprintf(e.stdout, "@%s: %s, %d values", n.List, n.Status, n.Values)
		if n.Detail != "" {
			fmt.Fprintf(e.stdout, " (%s)", n.Detail)
		}
		fmt.Fprintln(e.stdout)
	}
	fmt.Fprintf(e.stdout, "wrote %s (model: %d calls, %d from cache)\n", filepath.Join(*dir, artifact.DynamicListsFile), sess.runner.Stats().ModelCalls, sess.runner.Stats().CacheHits)
	return exitOK
}
