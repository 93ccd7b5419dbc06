package policy

import (
	"context"
	"errors"
	"fmt"
	"io/fs"
	"sync"
	"sync/atomic"
)

// RuleSessionSandbox denies a call whose Request.Sandbox the engine cannot
// judge against (not a directory strictly below Settings.SessionSandboxRoot,
// or no such root configured).
const RuleSessionSandbox = "structural-session-sandbox"

// maxViews bounds the session views an engine keeps; past it the cache is
// emptied and views are rebuilt on use (a view costs one engine build).
const maxViews = 1024

// engineSource is what an engine was built from: its session views are
// built from the same artifacts with another sandbox.
type engineSource struct {
	pol   *CompiledPolicy // rules rebased to the configured sandbox
	anns  []AnnotationSource
	lists *DynamicLists
	files fileNames
}

// sessionRoot is Settings.SessionSandboxRoot, absolute (lex) and resolved
// (real).
type sessionRoot struct{ lex, real string }

// compileSessionRoot checks Settings.SessionSandboxRoot and protects it: no
// caller judged by e itself may name a session's files. A session's view
// (ForSandbox) keeps its own directory usable, since a protected path that
// contains the sandbox leaves the sandbox usable (checkProtected).
func (e *Engine) compileSessionRoot(s Settings) error {
	if s.SessionSandboxRoot == "" {
		return nil
	}
	const field = "session_sandbox_root"
	if e.canon.sandbox == "" {
		return settingsErr(field, errors.New("needs a sandbox: per-session sandboxes stand in for it"))
	}
	lex, err := cleanAbs(s.SessionSandboxRoot, e.canon.home)
	if err != nil {
		return settingsErr(field, err)
	}
	if lex == "/" {
		return settingsErr(field, errors.New("cannot be the root directory"))
	}
	real, err := e.canon.canonical(lex)
	if err != nil {
		return settingsErr(field, err)
	}
	sb, sbLex := e.canon.sandbox, e.canon.sandboxLex
	for _, p := range []string{lex, real} {
		for _, q := range []string{sb, sbLex} {
			if within(p, q) || within(q, p) {
				return settingsErr(field, fmt.Errorf("%q overlaps the sandbox %q: sessions would see each other's or the static session's files", s.SessionSandboxRoot, q))
			}
		}
	}
	e.sessions = sessionRoot{lex: lex, real: real}
	e.protectAdd(lex, real)
	return nil
}

// protectAdd adds protected paths (already canonical or lexical absolute).
func (e *Engine) protectAdd(ps ...string) {
	for _, p := range ps {
		if !contains(e.protect, p) {
			e.protect = append(e.protect, p)
		}
	}
}

// ForSandbox returns the engine's view for a session sandbox: dir (an
// existing directory, not a symlink, strictly below
// Settings.SessionSandboxRoot) is the sandbox, and
//   - a path the agent names under the configured sandbox (as the agent
//     sees its own workspace, /workspace/x) means the same path under dir;
//   - compiled rules and protected paths within the configured sandbox are
//     rebased to dir;
//   - the session root stays protected except dir itself, and the
//     configured sandbox is protected, so no spelling of another session's
//     or of the static sandbox's files is allowed;
//   - the shadow policy, if any, is viewed the same way.
//
// The view reports the engine's version and rebase origin. Evaluate with
// Request.Sandbox uses a cached view, so its cost per call is one lookup.
func (e *Engine) ForSandbox(dir string) (*Engine, error) {
	if e.sessions.lex == "" {
		return nil, errors.New("no session sandbox root is configured")
	}
	if e.src == nil || e.views == nil {
		return nil, errors.New("the engine is already a session view")
	}
	lex, err := cleanAbs(dir, "")
	if err != nil || lex != dir {
		return nil, fmt.Errorf("session sandbox %q: must be a clean absolute path", dir)
	}
	if !strictlyUnder(lex, e.sessions.lex) && !strictlyUnder(lex, e.sessions.real) {
		return nil, fmt.Errorf("session sandbox %q: not below the session sandbox root %q", dir, e.sessions.lex)
	}
	// A recorded engine (LoadDirRecorded) sees no file system: it judges
	// recorded calls of a session lexically, like every other path.
	if _, recorded := e.fs.(absentFS); !recorded {
		mode, err := e.fs.Lstat(lex)
		if err != nil {
			return nil, fmt.Errorf("session sandbox %q: %w", dir, err)
		}
		if mode&fs.ModeSymlink != 0 || !mode.IsDir() {
			return nil, fmt.Errorf("session sandbox %q: not a directory (%v)", dir, mode.Type())
		}
	}
	v, err := e.buildView(lex)
	if err != nil {
		return nil, err
	}
	if e.shadow != nil {
		sv, err := e.shadow.ForSandbox(lex)
		if err != nil {
			return nil, fmt.Errorf("viewing the shadow policy: %w", err)
		}
		v.shadow = sv
	}
	return v, nil
}

// SessionSandboxRoot returns the realpath of Settings.SessionSandboxRoot
// ("" when none is set): a minted session's sandbox is the directory below
// it named by the session's id.
func (e *Engine) SessionSandboxRoot() string { return e.sessions.real }

// strictlyUnder reports whether p lies below root (not root itself).
func strictlyUnder(p, root string) bool { return p != root && within(p, root) }

// buildView builds the engine for sandbox dir from e's sources.
func (e *Engine) buildView(dir string) (*Engine, error) {
	s := e.settings
	s.Sandbox = dir
	s.ProtectedPaths = make([]string, 0, len(e.settings.ProtectedPaths))
	for _, pp := range e.settings.ProtectedPaths {
		if lex, err := cleanAbs(pp, e.canon.home); err == nil {
			if rest, ok := under(lex, e.canon.sandboxLex); ok {
				pp = join(dir, rest)
			} else if lex == e.canon.sandboxLex {
				pp = dir
			}
		}
		s.ProtectedPaths = append(s.ProtectedPaths, pp)
	}
	pol := e.src.pol.RebaseWithin(e.canon.sandboxLex, dir)
	v := &Engine{tools: map[string]*tool{}, trusted: map[string]bool{}, allow: map[string]domainSet{}, fs: e.fs, remotes: e.remotes}
	if err := v.compileSettings(s); err != nil {
		return nil, fmt.Errorf("building the view of session sandbox %q: %w", dir, err)
	}
	v.canon.alias = e.canon.sandboxLex
	v.sessions = e.sessions
	v.protectAdd(e.sessions.lex, e.sessions.real, e.canon.sandbox, e.canon.sandboxLex)
	if err := v.compileAnnotations(e.src.anns, s.Annotations); err != nil {
		return nil, fmt.Errorf("building the view of session sandbox %q: %w", dir, err)
	}
	if err := v.compileRules(pol, e.src.lists, e.src.files); err != nil {
		return nil, fmt.Errorf("building the view of session sandbox %q: %w", dir, err)
	}
	v.checkReach()
	v.content, v.version = e.content, e.version
	v.rebase = Rebase{From: e.rebase.From, To: dir, Recorded: e.rebase.Recorded, Rules: e.rebase.Rules}
	return v, nil
}

// evaluateInSandbox judges r with the view for r.Sandbox (cached).
func (e *Engine) evaluateInSandbox(ctx context.Context, r Request) Evaluation {
	v, err := e.views.get(e, r.Sandbox)
	if err != nil {
		ev := deny(RuleSessionSandbox, "the session's sandbox cannot be used")
		ev.Decision.Detail = err.Error()
		return ev
	}
	r.Sandbox = ""
	return v.Evaluate(ctx, r)
}

// viewCache holds an engine's session views by sandbox directory.
type viewCache struct {
	m sync.Map // dir → *viewEntry
	n atomic.Int64
}

type viewEntry struct {
	once sync.Once
	v    *Engine
	err  error
}

func newViewCache() *viewCache { return &viewCache{} }

// get returns e's view for dir, building it once. A failed build is not
// kept, so a directory created after a refused call works on the next one.
func (c *viewCache) get(e *Engine, dir string) (*Engine, error) {
	if c == nil {
		return nil, errors.New("the engine is already a session view")
	}
	if x, ok := c.m.Load(dir); ok {
		ent := x.(*viewEntry)
		ent.once.Do(func() { ent.v, ent.err = e.ForSandbox(dir) })
		if ent.err == nil {
			return ent.v, nil
		}
	}
	if c.n.Add(1) > maxViews {
		c.m.Clear()
		c.n.Store(1)
	}
	x, _ := c.m.LoadOrStore(dir, &viewEntry{})
	ent := x.(*viewEntry)
	ent.once.Do(func() { ent.v, ent.err = e.ForSandbox(dir) })
	if ent.err != nil {
		c.m.CompareAndDelete(dir, ent)
		return nil, ent.err
	}
	return ent.v, nil
}
