// Package pipeline runs compile-policy: for every tool server, concurrently,
// compile the constitution into rules, resolve the dynamic lists they
// reference, generate scenarios, verify with the real engine and a model
// judge, and repair (at most twice); then merge the servers' results and
// verify the merged artifacts exactly as the gateway will load them.
package pipeline

import (
	"context"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"sort"
	"sync"
	"time"

	"golang.org/x/sync/errgroup"

	"ironcurtain.dev/compiler/lists"
	"ironcurtain.dev/compiler/model"
	"ironcurtain.dev/compiler/scenarios"
	"ironcurtain.dev/compiler/structured"
	"ironcurtain.dev/compiler/toolset"
	"ironcurtain.dev/compiler/verify"
	"ironcurtain.dev/gateway/policy"
)

// MaxRepairs is the most repair rounds a server gets.
const MaxRepairs = 2

// Config is one compile-policy run.
type Config struct {
	// Constitution is the base constitution followed by the user's.
	Constitution string
	// Annotations are the tool annotations (built-in and external servers).
	Annotations *policy.Annotations
	// Settings are the engine settings verification runs with.
	Settings policy.Settings
	// Handwritten are the operator's ground-truth scenarios (placeholders
	// already expanded); the shipped ones are added by Run.
	Handwritten []scenarios.Scenario
	// ExistingLists is the current dynamic-lists.json (manual additions and
	// removals are kept); may be nil.
	ExistingLists *policy.DynamicLists
	// Servers restricts compilation to these servers; empty means all.
	Servers []string
	// Repairs is the repair budget per server (0..MaxRepairs); negative
	// means MaxRepairs.
	Repairs int
	// BatchSize is the tools per scenario-generation prompt.
	BatchSize int
	// Now is the clock for generatedAt and resolvedAt.
	Now func() time.Time
	// Logger receives progress; nil discards it.
	Logger *slog.Logger
}

// Result is the outcome of a run.
type Result struct {
	Policy    *policy.CompiledPolicy
	Lists     *policy.DynamicLists // nil when no rule references a list
	Scenarios *scenarios.File
	Servers   []ServerReport
	// Final are the results of every scenario against the merged artifacts.
	Final []scenarios.Result
	// Verified is true when every server compiled and every scenario passes
	// against the merged artifacts.
	Verified bool
	// VerifierNote explains a degraded verification set-up.
	VerifierNote string
	// ListNotes say how each dynamic list was resolved.
	ListNotes []lists.Note
	// Stats are the model calls and cache hits of the run.
	Stats structured.Stats
}

// ServerReport says what happened to one server.
type ServerReport struct {
	Server      string
	Rules       int
	Lists       int
	Invariant   int
	Handwritten int
	Generated   int
	Probes      int
	Repairs     int
	Corrections int
	// Dropped are generated scenarios discarded before verification, with why.
	Dropped []string
	// Refused are judge corrections aimed at ground truth (ignored).
	Refused []string
	// JudgePass is the judge's last opinion (advisory).
	JudgePass bool
	// Analysis is the judge's last analysis.
	Analysis string
	// Failures are the scenarios still failing after the repair loop.
	Failures []scenarios.Result
	// Err is set when the server could not be compiled; its tools are then
	// denied by default.
	Err error
}

// Run compiles, verifies and repairs every server. A server whose model
// replies never validate does not stop the others: it gets no rules (default
// deny) and the run is not verified. An unreachable endpoint or a rejected
// key stops the run with that error.
func Run(ctx context.Context, r *structured.Runner, cfg Config) (*Result, error) {
	if cfg.Annotations == nil || len(cfg.Annotations.Servers) == 0 {
		return nil, errors.New("compiling policy: no tool annotations (run annotate-tools or pass --annotations)")
	}
	if cfg.Now == nil {
		cfg.Now = time.Now
	}
	if cfg.Logger == nil {
		cfg.Logger = slog.New(slog.NewTextHandler(io.Discard, nil))
	}
	if cfg.Repairs < 0 || cfg.Repairs > MaxRepairs {
		cfg.Repairs = MaxRepairs
	}
	ts := toolset.NewTools(cfg.Annotations)
	servers, err := selectServers(ts, cfg.Servers)
	if err != nil {
		return nil, err
	}
	builtin, err := scenarios.BuiltinHandwritten(ts, cfg.Settings.Sandbox, cfg.Settings.Home)
	if err != nil {
		return nil, fmt.Errorf("compiling policy: %w", err)
	}
	handwritten := scenarios.Merge(builtin, cfg.Handwritten...)
	invariants := scenarios.Invariants(ts, cfg.Settings)

	v, err := verify.NewVerifier(ctx, cfg.Settings)
	if err != nil {
		return nil, fmt.Errorf("compiling policy: %w", err)
	}
	defer v.Close()
	if v.Note != "" {
		cfg.Logger.Warn("verification", "note", v.Note)
	}

	lr := &listResolver{runner: r, existing: cfg.ExistingLists, now: cfg.Now, done: map[string]*listResult{}}
	reports := make([]ServerReport, len(servers))
	states := make([]*serverState, len(servers))
	g, gctx := errgroup.WithContext(ctx)
	for i, name := range servers {
		g.Go(func() error {
			st := &serverState{
				name:        name,
				cfg:         &cfg,
				runner:      r,
				verifier:    v,
				lists:       lr,
				tools:       ts.Server(name),
				invariants:  forServer(invariants, name),
				handwritten: forServer(handwritten, name),
			}
			st.run(gctx)
			if err := gctx.Err(); err != nil {
				return err // cancelled: stop everything
			}
			if errors.Is(st.err, model.ErrUnreachable) || errors.Is(st.err, model.ErrRejectedKey) {
				return st.err // no server can succeed: stop the run
			}
			states[i], reports[i] = st, st.report()
			return nil
		})
	}
	if err := g.Wait(); err != nil {
		return nil, fmt.Errorf("compiling policy: %w", err)
	}
	res, err := merge(ctx, cfg, v, states, reports, invariants, handwritten, lr)
	if err != nil {
		return nil, err
	}
	res.VerifierNote = v.Note
	res.Stats = r.Stats()
	return res, nil
}

func selectServers(ts toolset.Tools, want []string) ([]string, error) {
	all := ts.Servers()
	if len(want) == 0 {
		return all, nil
	}
	have := map[string]bool{}
	for _, s := range all {
		have[s] = true
	}
	var out []string
	for _, w := range want {
		if !have[w] {
			return nil, fmt.Errorf("compiling policy: server %q has no annotations (annotated: %v)", w, all)
		}
		out = append(out, w)
	}
	sort.Strings(out)
	return out, nil
}

func forServer(list []scenarios.Scenario, server string) []scenarios.Scenario {
	var out []scenarios.Scenario
	for _, s := range list {
		if s.Request.ServerName == server {
			out = append(out, s)
		}
	}
	return out
}

// listResolver resolves each list definition once per run even when several
// servers define the same list, and merges the results.
type listResolver struct {
	runner   *structured.Runner
	existing *policy.DynamicLists
	now      func() time.Time

	mu   sync.Mutex
	done map[string]*listResult
}

type listResult struct {
	once sync.Once
	name string
	list policy.ResolvedList
	note lists.Note
	err  error
}
