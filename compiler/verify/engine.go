package verify

import (
	"context"
	"errors"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"

	"ironcurtain.dev/compiler/artifact"
	"ironcurtain.dev/compiler/scenarios"
	"ironcurtain.dev/gateway/gitremote"
	"ironcurtain.dev/gateway/policy"
)

// Verifier builds engines and runs scenarios for verification. The engine's
// sandbox is a scratch git repository standing in for the deployment's
// sandbox (settings.Sandbox): git tools need a real repository to resolve
// push destinations, and the compiling machine rarely has the deployment's
// workspace. Scenarios keep the deployment's paths; the Evaluator moves
// them into the scratch directory when they are evaluated.
type Verifier struct {
	settings policy.Settings
	engine   policy.Settings
	remotes  policy.Option // the gateway's git remote resolver
	scratch  string
	// Note explains a degraded set-up (no git: git pushes cannot verify).
	Note string
}

// NewVerifier creates the scratch sandbox for settings. Close removes it.
func NewVerifier(ctx context.Context, settings policy.Settings) (*Verifier, error) {
	dir, err := os.MkdirTemp("", "ironcurtain-verify-*")
	if err != nil {
		return nil, fmt.Errorf("creating scratch sandbox: %w", err)
	}
	dir, err = filepath.EvalSymlinks(dir)
	if err != nil {
		return nil, fmt.Errorf("creating scratch sandbox: %w", err)
	}
	v := &Verifier{settings: settings, engine: settings, scratch: dir,
		remotes: policy.WithRemoteResolver(gitremote.New(gitremote.Options{}))}
	v.engine.Sandbox = dir
	if err := initRepo(dir); err != nil {
		os.RemoveAll(dir)
		return nil, fmt.Errorf("creating scratch sandbox: %w", err)
	}
	if _, err := exec.LookPath("git"); err != nil {
		v.Note = "git is not installed: the engine cannot resolve push destinations, so git push scenarios are denied structurally"
	}
	return v, nil
}

// initRepo makes dir an empty git repository on branch main by writing the
// few files git needs (no git process: it is faster, and the machine
// compiling a policy need not have git for this step).
func initRepo(dir string) error {
	files := map[string]string{
		".git/HEAD":   "ref: refs/heads/main\n",
		".git/config": "[core]\n\trepositoryformatversion = 0\n\tfilemode = true\n\tbare = false\n",
	}
	for _, d := range []string{".git/objects/info", ".git/objects/pack", ".git/refs/heads", ".git/refs/tags"} {
		if err := os.MkdirAll(filepath.Join(dir, d), 0o755); err != nil {
			return err
		}
	}
	for name, body := range files {
		if err := os.WriteFile(filepath.Join(dir, name), []byte(body), 0o644); err != nil {
			return err
		}
	}
	return nil
}

// Close removes the scratch sandbox.
func (v *Verifier) Close() error {
	if v == nil || v.scratch == "" {
		return nil
	}
	return os.RemoveAll(v.scratch)
}

// Settings are the deployment's settings (for prompts).
func (v *Verifier) Settings() policy.Settings { return v.settings }

// Engine builds an engine from in-memory artifacts. Rules whose
// paths.within names the deployment's sandbox are rebased onto the scratch
// sandbox for evaluation (the artifacts themselves are not changed).
func (v *Verifier) Engine(pol *policy.CompiledPolicy, l *policy.DynamicLists, ann *policy.Annotations) (*policy.Engine, error) {
	return policy.New(v.rebase(pol), ann, l, v.engine, v.remotes)
}

func (v *Verifier) rebase(pol *policy.CompiledPolicy) *policy.CompiledPolicy {
	if pol == nil || v.settings.Sandbox == "" {
		return pol
	}
	return pol.RebaseWithin(v.settings.Sandbox, v.scratch)
}

// EngineFromArtifacts encodes the artifacts, parses them back with the
// engine's own parsers and builds the engine the gateway would build from
// those files.
func (v *Verifier) EngineFromArtifacts(pol *policy.CompiledPolicy, l *policy.DynamicLists, ann *policy.Annotations) (*policy.Engine, error) {
	b, err := artifact.Encode(pol)
	if err != nil {
		return nil, fmt.Errorf("encoding %s: %w", artifact.CompiledPolicyFile, err)
	}
	p2, err := policy.ParseCompiledPolicy(artifact.CompiledPolicyFile, b)
	if err != nil {
		return nil, fmt.Errorf("verifying %s: %w", artifact.CompiledPolicyFile, err)
	}
	var l2 *policy.DynamicLists
	if l != nil {
		if b, err = artifact.Encode(l); err != nil {
			return nil, fmt.Errorf("encoding %s: %w", artifact.DynamicListsFile, err)
		}
		if l2, err = policy.ParseDynamicLists(artifact.DynamicListsFile, b); err != nil {
			return nil, fmt.Errorf("verifying %s: %w", artifact.DynamicListsFile, err)
		}
	}
	if ann == nil {
		return nil, errors.New("verifying policy: no tool annotations")
	}
	if b, err = artifact.Encode(ann); err != nil {
		return nil, fmt.Errorf("encoding %s: %w", artifact.AnnotationsFile, err)
	}
	a2, err := policy.ParseAnnotations(artifact.AnnotationsFile, b)
	if err != nil {
		return nil, fmt.Errorf("verifying %s: %w", artifact.AnnotationsFile, err)
	}
	e, err := policy.New(v.rebase(p2), a2, l2, v.engine, v.remotes)
	if err != nil {
		return nil, fmt.Errorf("verifying policy: %w", err)
	}
	return e, nil
}

// Run evaluates list with e, translating the sandbox.
func (v *Verifier) Run(ctx context.Context, e *policy.Engine, list []scenarios.Scenario) []scenarios.Result {
	return scenarios.Evaluator{Engine: e, Logical: v.settings.Sandbox, Actual: v.scratch}.Run(ctx, list)
}
