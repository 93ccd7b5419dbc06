package git

import (
	"context"
	"errors"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"syscall"
	"time"

	"ironcurtain.dev/gateway/gitexec"
	"ironcurtain.dev/gateway/internal/servers/toolargs"
)

// workspaceConfig is passed with -c to every command run in an agent
// repository, after gitexec's hardening. Command-line settings win over the
// repository's own, so these cannot be undone by editing .git/config, even
// between the config scan and the run:
//   - no network transport at all (workspace commands never talk to a
//     remote; only the mirror does);
//   - no file read from a path the repository config names (a host file
//     outside the sandbox: attributes, ignore rules, mailmap, blame ignore
//     list, commit template, init template);
//   - no external diff, no automatic gc or maintenance, no signature
//     verification (gpg).
var workspaceConfig = []string{
	"protocol.https.allow=never",
	"protocol.ssh.allow=never",
	"core.attributesFile=/dev/null",
	"core.excludesFile=/dev/null",
	"mailmap.file=",
	"mailmap.blob=",
	"blame.ignoreRevsFile=",
	"commit.template=",
	"init.templateDir=",
	"diff.external=",
	"diff.orderFile=/dev/null",
	"gc.auto=0",
	"maintenance.auto=false",
	"log.showSignature=false",
	"core.alternateRefsCommand=",
	"advice.detachedHead=false",
	"advice.statusHints=false",
}

// repoHandle is an agent repository that passed the checks.
type repoHandle struct {
	repo gitexec.Repo
	dir  string // canonical directory the call named
}

// openRepoFor opens the repository named by the "path" argument of a tool
// with operations, and returns it with the "operation" argument (def when
// absent).
func (s *Server) openRepoFor(ctx context.Context, c *toolargs.Args, def string) (*repoHandle, string, error) {
	r, err := s.openRepo(ctx, "path", c.Str("path"))
	if err != nil {
		return nil, "", err
	}
	op := c.Str("operation")
	if op == "" {
		op = def
	}
	return r, op, nil
}

// openRepo finds and checks the repository containing the directory arg.
func (s *Server) openRepo(ctx context.Context, arg, p string) (*repoHandle, error) {
	dir, err := s.sandboxPath(arg, p)
	if err != nil {
		return nil, err
	}
	repo, err := gitexec.FindRepo(dir, s.sandbox)
	if err != nil {
		return nil, &toolError{msg: "not a git repository inside the sandbox", err: err}
	}
	if repo.WorkTree == "" {
		return nil, refuse("bare repositories are not supported")
	}
	if !repo.Within(s.sandbox) {
		return nil, refuse("access denied: the repository's git directory is outside the sandbox")
	}
	if err := gitexec.CheckGitDir(repo); err != nil {
		return nil, err
	}
	if err := s.scanCache.check(ctx, repo, s.scanOptions(repo)); err != nil {
		return nil, err
	}
	return &repoHandle{repo: repo, dir: dir}, nil
}

// scanOptions are the options of the config scan (no extra config, so the
// scan sees exactly the repository's own settings).
func (s *Server) scanOptions(repo gitexec.Repo) gitexec.Options {
	o := repo.Options()
	o.Timeout = s.timeout
	o.Git = s.git
	return o
}

// wsOptions are the options of a command in an agent repository.
func (s *Server) wsOptions(r *repoHandle) gitexec.Options {
	o := r.repo.Options()
	o.Dir = r.repo.WorkTree
	o.Timeout = s.timeout
	o.MaxOutput = s.maxOutput
	o.Git = s.git
	o.Config = append(append([]string(nil), workspaceConfig...),
		"user.name="+s.authorName, "user.email="+s.authorMail, "user.useConfigOnly=false")
	o.Env = []string{"GIT_LITERAL_PATHSPECS=1"}
	return o
}

// run runs git in an agent repository.
func (s *Server) run(ctx context.Context, r *repoHandle, args ...string) (gitexec.Result, error) {
	return gitexec.Run(ctx, s.wsOptions(r), args...)
}

// runStdin runs git in an agent repository with stdin.
func (s *Server) runStdin(ctx context.Context, r *repoHandle, stdin string, args ...string) (gitexec.Result, error) {
	o := s.wsOptions(r)
	o.Stdin = strings.NewReader(stdin)
	return gitexec.Run(ctx, o, args...)
}

// scanCache remembers repositories whose config passed the executable
// settings scan, keyed by the identity of their config files. An entry is
// reused only while every file has the same inode, size, mtime and ctime,
// and never stored when a file changed within racyWindow of the scan (a
// write inside one timestamp tick could go unnoticed).
type scanCache struct {
	mu      sync.Mutex
	entries map[string][]fingerprint
}

const (
	racyWindow   = 2 * time.Second
	maxScanCache = 256
)

type fingerprint struct {
	exists      bool
	dev, ino    uint64
	size        int64
	mtime, ctim int64
}

func configFiles(repo gitexec.Repo) []string {
	return []string{
		filepath.Join(repo.CommonDir, "config"),
		filepath.Join(repo.CommonDir, "config.worktree"),
		filepath.Join(repo.GitDir, "config.worktree"),
	}
}

func fingerprintOf(p string) (fingerprint, error) {
	fi, err := os.Lstat(p)
	if errors.Is(err, os.ErrNotExist) {
		return fingerprint{}, nil
	}
	if err != nil {
		return fingerprint{}, err
	}
	st, ok := fi.Sys().(*syscall.Stat_t)
	if !ok {
		return fingerprint{}, errors.New("no stat data")
	}
	return fingerprint{exists: true, dev: uint64(st.Dev), ino: st.Ino, size: fi.Size(),
		mtime: fi.ModTime().UnixNano(), ctim: st.Ctim.Nano()}, nil
}

func fingerprints(repo gitexec.Repo) ([]fingerprint, bool) {
	files := configFiles(repo)
	fps := make([]fingerprint, len(files))
	for i, f := range files {
		fp, err := fingerprintOf(f)
		if err != nil {
			return nil, false
		}
		fps[i] = fp
	}
	return fps, true
}

// check scans the repository config unless an unchanged clean result is
// cached. Any scan failure refuses.
func (c *scanCache) check(ctx context.Context, repo gitexec.Repo, o gitexec.Options) error {
	key := repo.CommonDir + "\x00" + repo.GitDir
	before, ok := fingerprints(repo)
	if ok {
		c.mu.Lock()
		cached, hit := c.entries[key]
		c.mu.Unlock()
		if hit && equalFingerprints(cached, before) {
			return nil
		}
	}
	start := time.Now()
	if err := gitexec.RefuseExecutableConfig(ctx, o); err != nil {
		return err
	}
	after, ok2 := fingerprints(repo)
	if !ok || !ok2 || !equalFingerprints(before, after) {
		return nil // changed during the scan: do not cache
	}
	limit := start.Add(-racyWindow).UnixNano()
	for _, fp := range after {
		if fp.exists && (fp.mtime > limit || fp.ctim > limit) {
			return nil
		}
	}
	c.mu.Lock()
	defer c.mu.Unlock()
	if c.entries == nil {
		c.entries = map[string][]fingerprint{}
	}
	if len(c.entries) >= maxScanCache {
		for k := range c.entries {
			delete(c.entries, k)
			break
		}
	}
	c.entries[key] = after
	return nil
}

func equalFingerprints(a, b []fingerprint) bool {
	if len(a) != len(b) {
		return false
	}
	for i := range a {
		if a[i] != b[i] {
			return false
		}
	}
	return true
}
