package verify

import (
	"context"
	"errors"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"time"

	"ironcurtain.dev/compiler/artifact"
	"ironcurtain.dev/compiler/scenarios"
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
	v := &Verifier{settings: settings, engine: settings, scratch: dir}
	v.engine.Sandbox = dir
	if err := initRepo(ctx, dir); err != nil {
		v.Note = "the scratch sandbox is not a git repository (" + err.Error() + "): git push scenarios are denied structurally"
	}
	return v, nil
}

func initRepo(ctx context.Context, dir string) error {
	ctx, cancel := context.WithTimeout(ctx, 10*time.Second)
	defer cancel()
	for _, args := range [][]string{
		{"init", "-q", "-b", "main"},
		{"-c", "user.name=ironcurtain", "-c", "user.email=verify@ironcurtain.invalid", "commit", "-q", "--allow-empty", "-m", "scratch"},
	} {
		cmd := exec.CommandContext(ctx, "git", args...)
		cmd.Dir = dir
		cmd.Env = []string{"GIT_CONFIG_NOSYSTEM=1", "GIT_CONFIG_GLOBAL=/dev/null", "HOME=" + dir, "PATH=" + os.Getenv("PATH")}
		if out, err := cmd.CombinedOutput(); err != nil {
			return fmt.Errorf("git %s: %w: %s", args[0], err, out)
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

// Engine builds an engine from in-memory artifacts.
func (v *Verifier) Engine(pol *policy.CompiledPolicy, l *policy.DynamicLists, ann *policy.Annotations) (*policy.Engine, error) {
	return policy.New(pol, ann, l, v.engine)
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
	e, err := policy.New(p2, a2, l2, v.engine)
	if err != nil {
		return nil, fmt.Errorf("verifying policy: %w", err)
	}
	return e, nil
}

// Run evaluates list with e, translating the sandbox.
func (v *Verifier) Run(ctx context.Context, e *policy.Engine, list []scenarios.Scenario) []scenarios.Result {
	return scenarios.Evaluator{Engine: e, Logical: v.settings.Sandbox, Actual: v.scratch}.Run(ctx, list)
}
