package main

import (
	"context"
	"errors"
	"flag"
	"fmt"
	"io"
	"io/fs"
	"os"
	"path/filepath"
	"strings"

	"ironcurtain.dev/compiler/artifact"
	shipped "ironcurtain.dev/compiler/constitution"
	"ironcurtain.dev/compiler/pipeline"
	"ironcurtain.dev/compiler/scenarios"
	"ironcurtain.dev/gateway/policy"
)

// DefaultUserConstitution is read when --user is not given and it exists.
const DefaultUserConstitution = "~/.ironcurtain/constitution-user.md"

// UnverifiedDir is where artifacts go when verification fails.
const UnverifiedDir = "unverified"

func runCompile(ctx context.Context, e env) int {
	fs := flag.NewFlagSet("compile-policy", flag.ContinueOnError)
	var (
		mf          modelFlags
		sf          settingsFlags
		out         = fs.String("out", "", "policy directory to write compiled-policy.json, dynamic-lists.json and test-scenarios.json to (required)")
		base        = fs.String("constitution", "", "base constitution (default: the shipped base.md built into the binary)")
		user        = fs.String("user", "", "user constitution appended to the base (default "+DefaultUserConstitution+" when it exists)")
		noUser      = fs.Bool("no-user", false, "ignore the user constitution")
		annotations = fs.String("annotations", "", "tool-annotations.json (default: <out>/tool-annotations.json)")
		handwritten = fs.String("handwritten", "", "extra handwritten scenarios ({\"scenarios\": [...]}, ${SANDBOX} and ${HOME} expanded)")
		repairs     = fs.Int("repairs", pipeline.MaxRepairs, "repair rounds per server (0-2)")
		batch       = fs.Int("batch-size", 0, "tools per scenario-generation prompt (default 25)")
		unsafeWrite = fs.Bool("unsafe-write-unverified", false, "write artifacts into --out even when verification fails (default: <out>/"+UnverifiedDir+"/)")
		servers     multiFlag
	)
	fs.Var(&servers, "server", "compile only this server (repeatable; for debugging: the output then holds only these servers' rules)")
	mf.register(fs, e.getenv)
	sf.register(fs)
	if ok, code := parse(fs, e.args, e.stderr); !ok {
		return code
	}
	if *out == "" || fs.NArg() > 0 {
		fmt.Fprintln(e.stderr, "ironcurtain-compile compile-policy: --out is required and no positional arguments are accepted")
		return exitUsage
	}
	if *repairs < 0 || *repairs > pipeline.MaxRepairs {
		return fail(e, "compile-policy", usageErr("--repairs must be between 0 and %d", pipeline.MaxRepairs))
	}
	settings, _, err := sf.settings()
	if err != nil {
		return fail(e, "compile-policy", err)
	}
	text, sources, err := constitution(*base, *user, *noUser, e.getenv("HOME"))
	if err != nil {
		return fail(e, "compile-policy", err)
	}
	annPath := *annotations
	if annPath == "" {
		annPath = filepath.Join(*out, artifact.AnnotationsFile)
	}
	ann, err := readAnnotations(annPath)
	if err != nil {
		return fail(e, "compile-policy", usageErr("--annotations: %v", err))
	}
	var hw []scenarios.Scenario
	if *handwritten != "" {
		if hw, err = scenarios.LoadHandwritten(*handwritten, settings.Sandbox, settings.Home); err != nil {
			return fail(e, "compile-policy", usageErr("--handwritten: %v", err))
		}
	}
	existing, err := readLists(filepath.Join(*out, artifact.DynamicListsFile))
	if err != nil {
		return fail(e, "compile-policy", err)
	}
	logger := newLogger(e.stderr)
	sess, err := mf.open(e, *out, logger)
	if err != nil {
		return fail(e, "compile-policy", err)
	}
	res, err := pipeline.Run(ctx, sess.runner, pipeline.Config{
		Constitution:  text,
		Annotations:   ann,
		Settings:      settings,
		Handwritten:   hw,
		ExistingLists: existing,
		Servers:       servers,
		Repairs:       *repairs,
		BatchSize:     *batch,
		Now:           e.now,
		Logger:        logger,
	})
	if cerr := sess.close(); cerr != nil && err == nil {
		err = cerr
	}
	if err != nil {
		return fail(e, "compile-policy", err)
	}
	dir := *out
	if !res.Verified && !*unsafeWrite {
		dir = filepath.Join(*out, UnverifiedDir)
	}
	if err := res.Write(dir); err != nil {
		return fail(e, "compile-policy", err)
	}
	printSummary(e.stdout, res, sources, dir, mf)
	if !res.Verified {
		return exitFailed
	}
	return exitOK
}

// constitution reads the base constitution and appends the user's.
func constitution(base, user string, noUser bool, home string) (text string, sources []string, err error) {
	text, sources = strings.TrimSpace(shipped.Base), []string{"built-in base.md"}
	if base != "" {
		b, err := os.ReadFile(base)
		if err != nil {
			return "", nil, usageErr("--constitution: %v", err)
		}
		text, sources = strings.TrimSpace(string(b)), []string{base}
	}
	if noUser {
		return text + "\n", sources, nil
	}
	explicit := user != ""
	if !explicit {
		user = DefaultUserConstitution
	}
	if strings.HasPrefix(user, "~/") {
		if home == "" {
			if explicit {
				return "", nil, usageErr("--user: $HOME is not set to expand %s", user)
			}
			return text + "\n", sources, nil
		}
		user = filepath.Join(home, user[2:])
	}
	u, err := os.ReadFile(user)
	switch {
	case errors.Is(err, fs.ErrNotExist) && !explicit:
		return text + "\n", sources, nil
	case err != nil:
		return "", nil, usageErr("--user: %v", err)
	}
	if ut := strings.TrimSpace(string(u)); ut != "" {
		text += "\n\n# User constitution\n\n" + ut
		sources = append(sources, user)
	}
	return text + "\n", sources, nil
}

func readLists(path string) (*policy.DynamicLists, error) {
	b, err := artifact.ReadOptional(path)
	if err != nil || b == nil {
		return nil, err
	}
	l, err := policy.ParseDynamicLists(path, b)
	if err != nil {
		return nil, fmt.Errorf("reading existing lists: %w", err)
	}
	return l, nil
}

func printSummary(w io.Writer, res *pipeline.Result, sources []string, dir string, mf modelFlags) {
	status := "VERIFIED"
	if !res.Verified {
		status = "NOT VERIFIED"
	}
	fmt.Fprintf(w, "policy %s\n", status)
	fmt.Fprintf(w, "  constitution: %s (sha256 %s)\n", strings.Join(sources, " + "), res.Policy.ConstitutionHash[:12])
	for _, s := range res.Servers {
		if s.Err != nil {
			fmt.Fprintf(w, "  %s: FAILED, every call denied: %v\n", s.Server, s.Err)
			continue
		}
		fmt.Fprintf(w, "  %s: %d rules; scenarios %d invariant, %d handwritten, %d generated, %d probes; %d repairs, %d corrections; %d failing\n",
			s.Server, s.Rules, s.Invariant, s.Handwritten, s.Generated, s.Probes, s.Repairs, s.Corrections, len(s.Failures))
		for _, d := range s.Dropped {
			fmt.Fprintf(w, "    dropped %s\n", d)
		}
		for _, d := range s.Refused {
			fmt.Fprintf(w, "    refused correction %s\n", d)
		}
	}
	for _, n := range res.ListNotes {
		fmt.Fprintf(w, "  list @%s: %s, %d values", n.List, n.Status, n.Values)
		if n.Detail != "" {
			fmt.Fprintf(w, " (%s)", n.Detail)
		}
		fmt.Fprintln(w)
	}
	failing := scenarios.Failures(res.Final)
	fmt.Fprintf(w, "  merged policy: %d rules, %d scenarios run through the engine, %d pass\n", len(res.Policy.Rules), len(res.Final), len(res.Final)-len(failing))
	for _, f := range failing {
		fmt.Fprintf(w, "    FAIL [%s] %s: expected %s, got %s (%s)\n", f.Scenario.Source, f.Scenario.Description, f.Scenario.ExpectedDecision, f.Decision.Status, f.Decision.Rule)
	}
	fmt.Fprintf(w, "  model: %s, %d calls, %d steps from cache, concurrency %d\n", mf.spec, res.Stats.ModelCalls, res.Stats.CacheHits, mf.concurrency)
	fmt.Fprintf(w, "  wrote %s\n", dir)
}
