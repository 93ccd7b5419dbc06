// Package gitremote resolves the named remotes of repositories inside a
// sandbox for the policy engine (policy.RemoteResolver) and the git server:
// it reads a repository's config natively (gitexec.NativeConfig) and falls
// back to hardened git when unsure. It links os/exec through gitexec, which
// is why it lives outside the pure policy package.
package gitremote

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	"ironcurtain.dev/gateway/gitexec"
	"ironcurtain.dev/gateway/gitref"
	"ironcurtain.dev/gateway/policy"
)

// DefaultTimeout bounds each git run made to resolve a remote.
const DefaultTimeout = 5 * time.Second

// Resolution cache parameters. An entry is reused only while every file it
// depends on has the same inode, size, mtime and ctime; entries whose files
// changed less than racyWindow before the resolution started are never
// stored (a write inside one timestamp tick could otherwise go unnoticed,
// the "racy git" problem).
const (
	maxResolverCache = 256
	racyWindow       = 2 * time.Second
)

// Options configure a Resolver. The zero value is what a deployment uses.
type Options struct {
	// Timeout bounds each git run (DefaultTimeout when zero).
	Timeout time.Duration
	// NoCache resolves every time (benchmarks and tests of the cold path).
	NoCache bool
	// NoNative always reads the config by running git, the fallback
	// (benchmarks and tests comparing both readers).
	NoNative bool
	// Now is the clock the cache's racy window is measured with (time.Now
	// when nil).
	Now func() time.Time
}

// Stats count what a Resolver did (benchmarks report them).
type Stats struct {
	// Lstats are the fingerprint lstats of cache lookups.
	Lstats int64
	// Native and Fallback count the cold resolutions whose config was read
	// by gitexec.NativeConfig and by running git.
	Native, Fallback int64
}

// Resolver resolves named remotes of repositories inside a sandbox,
// refusing repositories whose config defines executable settings. It reads
// the repository's config natively (gitexec.NativeConfig) and computes the
// remote's URLs as `git remote get-url` would (gitexec.RemoteURLs); whenever
// the native reader is unsure it runs hardened git instead (no shell, a
// timeout, system and global config off). It caches results keyed by the
// files they depend on. It is safe for concurrent use. Every failure wraps
// policy.policy.ErrRemote.
type Resolver struct {
	timeout  time.Duration
	run      func(ctx context.Context, o gitexec.Options, args ...string) (gitexec.Result, error)
	now      func() time.Time
	noCache  bool         // tests and benchmarks of the cold path
	noNative bool         // tests and benchmarks of the git fallback
	stats    atomic.Int64 // fingerprint lstats (reported by benchmarks)
	// native and fallback count the cold resolutions whose config was read
	// by gitexec.NativeConfig and by running git.
	native, fallback atomic.Int64

	mu    sync.Mutex
	cache map[resolveKey]*resolveEntry
}

var _ policy.RemoteResolver = (*Resolver)(nil)

// New returns a resolver configured by o.
func New(o Options) *Resolver {
	if o.Timeout <= 0 {
		o.Timeout = DefaultTimeout
	}
	if o.Now == nil {
		o.Now = time.Now
	}
	return &Resolver{timeout: o.Timeout, run: gitexec.Run, now: o.Now, noCache: o.NoCache, noNative: o.NoNative,
		cache: map[resolveKey]*resolveEntry{}}
}

// Stats returns the counters so far.
func (g *Resolver) Stats() Stats {
	return Stats{Lstats: g.stats.Load(), Native: g.native.Load(), Fallback: g.fallback.Load()}
}

type resolveKey struct {
	repoDir, sandbox  string
	name              string
	push, inspectOnly bool
}

type resolveEntry struct {
	res   policy.RemoteResolution
	files []string
	fps   []fingerprint
}

// Resolve resolves name (a remote name, or "" for the default) in the
// repository containing repoDir.
func (g *Resolver) Resolve(ctx context.Context, repoDir, sandbox, name string, push bool) (policy.RemoteResolution, error) {
	return g.lookup(ctx, repoDir, sandbox, name, push, false)
}

// Inspect checks the repository containing repoDir (inside sandbox, no
// executable config, a safe git directory) and reads its current branch,
// without resolving any remote: for a push to an explicit URL.
func (g *Resolver) Inspect(ctx context.Context, repoDir, sandbox string) (policy.RemoteResolution, error) {
	return g.lookup(ctx, repoDir, sandbox, "", true, true)
}

func (g *Resolver) lookup(ctx context.Context, repoDir, sandbox, name string, push, inspectOnly bool) (policy.RemoteResolution, error) {
	if name != "" && !gitref.IsRemoteName(name) {
		return policy.RemoteResolution{}, fmt.Errorf("%w: %s is not a remote name", policy.ErrRemote, gitref.Quote(name))
	}
	if sandbox == "" {
		return policy.RemoteResolution{}, fmt.Errorf("%w: no sandbox is configured", policy.ErrRemote)
	}
	key := resolveKey{repoDir: repoDir, sandbox: sandbox, name: name, push: push, inspectOnly: inspectOnly}
	if res, ok := g.cached(key); ok {
		return res, nil
	}
	start := g.now()
	repo, err := gitexec.FindRepo(repoDir, sandbox)
	if err != nil {
		return policy.RemoteResolution{}, fmt.Errorf("%w: %w", policy.ErrRemote, err)
	}
	if !repo.Within(sandbox) {
		return policy.RemoteResolution{}, fmt.Errorf("%w: the repository's git directory is outside the sandbox", policy.ErrRemote)
	}
	// The same refusal as the git server: no symlinks, alternates or
	// special files in the git directories (git would read through them).
	if err := gitexec.CheckGitDir(repo); err != nil {
		return policy.RemoteResolution{}, fmt.Errorf("%w: %w", policy.ErrRemote, err)
	}
	res, files, err := g.resolve(ctx, repo, name, push, inspectOnly)
	if err != nil {
		return policy.RemoteResolution{}, err
	}
	// The result also depends on which repository repoDir belongs to: the
	// .git entries from repoDir up to the work tree and the commondir link.
	for d := repoDir; ; d = filepath.Dir(d) {
		files = append(files, filepath.Join(d, ".git"))
		if d == repo.WorkTree || d == sandbox || d == "/" {
			break
		}
	}
	files = append(files, filepath.Join(repo.GitDir, "commondir"))
	if !g.noCache {
		g.store(key, res, dedupe(files), start)
	}
	return res, nil
}

func dedupe(s []string) []string {
	out := s[:0]
	for i, v := range s {
		if !slices.Contains(s[:i], v) {
			out = append(out, v)
		}
	}
	return out
}

func (g *Resolver) cached(key resolveKey) (policy.RemoteResolution, bool) {
	g.mu.Lock()
	e := g.cache[key]
	g.mu.Unlock()
	if e == nil {
		return policy.RemoteResolution{}, false
	}
	for i, f := range e.files {
		g.stats.Add(1)
		fp, ok := statFingerprint(f)
		if !ok || fp != e.fps[i] {
			return policy.RemoteResolution{}, false
		}
	}
	return e.res, true
}

func (g *Resolver) store(key resolveKey, res policy.RemoteResolution, files []string, start time.Time) {
	fps := make([]fingerprint, len(files))
	limit := start.Add(-racyWindow).UnixNano()
	for i, f := range files {
		fp, ok := statFingerprint(f)
		if !ok || fp.racy(limit) || fp.symlink() {
			return // a symlink's target can change without the link changing
		}
		fps[i] = fp
	}
	g.mu.Lock()
	defer g.mu.Unlock()
	if len(g.cache) >= maxResolverCache {
		for k := range g.cache { // evict an arbitrary entry
			delete(g.cache, k)
			break
		}
	}
	g.cache[key] = &resolveEntry{res: res, files: files, fps: fps}
}

// resolve does the work and returns the files the result depends on.
func (g *Resolver) resolve(ctx context.Context, repo gitexec.Repo, name string, push, inspectOnly bool) (policy.RemoteResolution, []string, error) {
	o := repo.Options()
	o.Timeout = g.timeout
	res := policy.RemoteResolution{}
	files := []string{filepath.Join(repo.GitDir, "HEAD"), filepath.Join(repo.CommonDir, "config"),
		filepath.Join(repo.GitDir, "config.worktree"), filepath.Join(repo.CommonDir, "config.worktree")}

	entries, native, err := g.readConfig(ctx, repo, o)
	if err != nil {
		return res, nil, err
	}
	if findings := gitexec.CheckConfig(entries); len(findings) > 0 {
		keys := make([]string, len(findings))
		for i, f := range findings {
			keys[i] = f.Key
		}
		return res, nil, fmt.Errorf("%w: %w: %s", policy.ErrRemote, gitexec.ErrExecutableConfig, strings.Join(keys, ", "))
	}
	cfg := configView(entries)

	res.Branch, err = g.currentBranch(ctx, o, repo, cfg)
	if err != nil {
		return res, nil, fmt.Errorf("%w: %w", policy.ErrRemote, err)
	}
	if inspectOnly {
		return res, files, nil
	}
	if name == "" {
		name = defaultRemote(cfg, res.Branch, push)
	}
	res.Remote = name
	legacy := []string{filepath.Join(repo.CommonDir, "remotes", name), filepath.Join(repo.CommonDir, "branches", name)}
	for _, f := range legacy {
		if _, err := os.Lstat(f); err == nil {
			return res, nil, fmt.Errorf("%w: remote %q is defined by a legacy file (.git/%s), which is not supported", policy.ErrRemote, name, filepath.Base(filepath.Dir(f)))
		}
	}
	files = append(files, legacy...)
	if b, ok := cfg.last("remote." + name + ".mirror"); ok && gitBool(b) {
		res.Mirror = true
	}
	res.PushRefspecs = cfg.all("remote." + name + ".push")

	var urls []string
	if native {
		urls, err = gitexec.RemoteURLs(entries, name, push)
		if errors.Is(err, gitexec.ErrUnsure) {
			native = false // cannot happen after NativeConfig; git decides
		} else if err != nil {
			return res, nil, fmt.Errorf("%w: %q: %w", policy.ErrRemote, name, err)
		}
	}
	if !native {
		if urls, err = g.remoteGetURL(ctx, o, name, push); err != nil {
			return res, nil, err
		}
	}
	for _, line := range urls {
		if line == "" {
			continue // as git's output is read: an empty URL is no URL
		}
		u, err := policy.ParseGitRemoteURL(line)
		if err != nil {
			return res, nil, fmt.Errorf("%w: remote %q: %w", policy.ErrRemote, name, err)
		}
		res.URLs = append(res.URLs, u)
	}
	if len(res.URLs) == 0 {
		return res, nil, fmt.Errorf("%w: remote %q has no URL", policy.ErrRemote, name)
	}
	return res, files, nil
}

// readConfig returns the repository's config entries: natively when
// gitexec.NativeConfig is sure (native true), else from
// `git config --list -z --show-scope --no-includes`.
func (g *Resolver) readConfig(ctx context.Context, repo gitexec.Repo, o gitexec.Options) ([]gitexec.Entry, bool, error) {
	if !g.noNative {
		entries, err := gitexec.NativeConfig(repo, o)
		if err == nil {
			g.native.Add(1)
			return entries, true, nil
		}
		// Whatever the native reader is unsure about (or fails on), git
		// itself decides.
	}
	g.fallback.Add(1)
	out, err := g.run(ctx, o, "config", "--list", "-z", "--show-scope", "--no-includes")
	if err != nil {
		var ge *gitexec.Error
		if !errors.As(err, &ge) || ge.ExitCode != 1 || len(out.Stdout) != 0 {
			return nil, false, fmt.Errorf("%w: reading the repository config: %w", policy.ErrRemote, err)
		}
		return nil, false, nil
	}
	entries, err := gitexec.ParseConfigList(out.Stdout)
	if err != nil {
		return nil, false, fmt.Errorf("%w: %w", policy.ErrRemote, err)
	}
	return entries, false, nil
}

// remoteGetURL runs `git remote get-url --all [--push] -- name` and returns
// its lines.
func (g *Resolver) remoteGetURL(ctx context.Context, o gitexec.Options, name string, push bool) ([]string, error) {
	args := []string{"remote", "get-url", "--all"}
	if push {
		args = append(args, "--push")
	}
	out, err := g.run(ctx, o, append(args, "--", name)...)
	if err != nil {
		return nil, fmt.Errorf("%w: %q: %w", policy.ErrRemote, name, err)
	}
	return strings.Split(strings.TrimRight(string(out.Stdout), "\n"), "\n"), nil
}

// currentBranch reads HEAD. With the files ref backend HEAD is a small file
// "ref: refs/heads/<b>" (or an object id when detached); other backends are
// asked through git symbolic-ref.
func (g *Resolver) currentBranch(ctx context.Context, o gitexec.Options, repo gitexec.Repo, cfg configView) (string, error) {
	if v, ok := cfg.last("extensions.refstorage"); ok && !strings.EqualFold(v, "files") {
		out, err := g.run(ctx, o, "symbolic-ref", "-q", "HEAD")
		if err != nil {
			var ge *gitexec.Error
			if errors.As(err, &ge) && ge.ExitCode == 1 {
				return "", nil
			}
			return "", fmt.Errorf("reading HEAD: %w", err)
		}
		return branchFromRef(strings.TrimSpace(string(out.Stdout)))
	}
	// Never through a symbolic link, never a FIFO (opened without
	// blocking), at most 1 KiB.
	b, ok, err := gitexec.ReadRegularFile(filepath.Join(repo.GitDir, "HEAD"), 1024)
	if err != nil || !ok {
		return "", errors.New("HEAD is missing or not a regular file")
	}
	s := string(bytes.TrimRight(b, "\n"))
	if ref, ok := strings.CutPrefix(s, "ref: "); ok {
		return branchFromRef(ref)
	}
	if gitref.IsHexID(s) {
		return "", nil
	}
	return "", errors.New("HEAD is malformed")
}

func branchFromRef(ref string) (string, error) {
	b, ok := strings.CutPrefix(ref, "refs/heads/")
	if !ok || !gitref.ValidName(b, true, false) {
		return "", errors.New("HEAD does not point to a branch")
	}
	return b, nil
}

// defaultRemote picks the remote git uses when none is named.
func defaultRemote(cfg configView, branch string, push bool) string {
	if branch != "" && push {
		if v, ok := cfg.last("branch." + branch + ".pushremote"); ok && gitref.IsRemoteName(v) {
			return v
		}
	}
	if push {
		if v, ok := cfg.last("remote.pushdefault"); ok && gitref.IsRemoteName(v) {
			return v
		}
	}
	if branch != "" {
		if v, ok := cfg.last("branch." + branch + ".remote"); ok && gitref.IsRemoteName(v) {
			return v
		}
	}
	return "origin"
}

// configView looks values up in `git config --list` entries. Keys are
// compared with the section and variable name case-insensitive and the
// subsection exact, as git does.
type configView []gitexec.Entry

func (c configView) all(key string) []string {
	var out []string
	for _, e := range c {
		if e.Scope != "command" && sameKey(e.Key, key) {
			out = append(out, e.Value)
		}
	}
	return out
}

func (c configView) last(key string) (string, bool) {
	v := c.all(key)
	if len(v) == 0 {
		return "", false
	}
	return v[len(v)-1], true
}

func sameKey(a, b string) bool {
	ai, aj := strings.IndexByte(a, '.'), strings.LastIndexByte(a, '.')
	bi, bj := strings.IndexByte(b, '.'), strings.LastIndexByte(b, '.')
	if ai < 0 || bi < 0 {
		return strings.EqualFold(a, b)
	}
	return strings.EqualFold(a[:ai], b[:bi]) && strings.EqualFold(a[aj:], b[bj:]) && a[ai:aj] == b[bi:bj]
}

func gitBool(v string) bool {
	switch strings.ToLower(strings.TrimSpace(v)) {
	case "true", "yes", "on", "1":
		return true
	}
	return false
}
