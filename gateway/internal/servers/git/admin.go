package git

import (
	"context"
	"fmt"
	"os"
	"path/filepath"
	"strings"

	"ironcurtain.dev/gateway/gitexec"
	"ironcurtain.dev/gateway/internal/servers"
	"ironcurtain.dev/gateway/internal/servers/toolargs"
	"ironcurtain.dev/gateway/policy"
)

// remoteURL is a remote location the server may contact: a network remote
// parsed by the policy package, or (UnsafeAllowLocalRemotes only) a local
// bare repository.
type remoteURL struct {
	url   string // what git is given: the canonical URL form, or the local path
	local bool
}

// parseRemoteURL accepts https and ssh remotes as the policy parses them,
// and local paths or file:// URLs only with UnsafeAllowLocalRemotes.
func (s *Server) parseRemoteURL(arg, raw string) (remoteURL, error) {
	if strings.HasPrefix(raw, "-") {
		return remoteURL{}, refuse("%s may not start with '-'", arg)
	}
	if s.unsafeLocal {
		if p, ok := localRemotePath(raw); ok {
			return remoteURL{url: p, local: true}, nil
		}
	}
	u, err := policy.ParseGitRemoteURL(raw)
	if err != nil {
		return remoteURL{}, &toolError{msg: fmt.Sprintf("%s refused (only https and ssh remotes are allowed)", arg), err: err}
	}
	return remoteURL{url: u.URL()}, nil
}

// localRemotePath recognises an absolute local path or a file:// URL.
func localRemotePath(raw string) (string, bool) {
	p := strings.TrimPrefix(raw, "file://")
	if !filepath.IsAbs(p) || filepath.Clean(p) != p || strings.ContainsAny(p, "\x00\n\r") {
		return "", false
	}
	return p, true
}

func (s *Server) remote(ctx context.Context, c *toolargs.Args) (servers.Result, error) {
	r, op, err := s.openRepoFor(ctx, c, "list")
	if err != nil {
		return servers.Result{}, err
	}
	if op != "list" {
		if err := checkRemoteName("name", c.Str("name")); err != nil {
			return servers.Result{}, err
		}
	}
	name := c.Str("name")
	switch op {
	case "list":
		res, err := s.run(ctx, r, "remote", "--verbose")
		if err != nil {
			return servers.Result{}, &toolError{msg: "git remote list failed", err: err}
		}
		return textResult(res.Stdout, "(no remotes)"), nil
	case "add":
		raw := c.Str("url")
		if _, err := s.parseRemoteURL("url", raw); err != nil {
			return servers.Result{}, err
		}
		// The URL is stored as given: git reads it exactly as the policy's
		// parser did (the parser refuses anything two readers could read
		// differently).
		if _, err := s.run(ctx, r, "remote", "add", "--", name, raw); err != nil {
			return servers.Result{}, &toolError{msg: "git remote add failed", err: err}
		}
		return servers.Text("added remote " + name), nil
	case "remove":
		if _, err := s.run(ctx, r, "remote", "remove", "--", name); err != nil {
			return servers.Result{}, &toolError{msg: "git remote remove failed", err: err}
		}
		return servers.Text("removed remote " + name), nil
	default: // get_url
		fetch, err := s.run(ctx, r, "remote", "get-url", "--all", "--", name)
		if err != nil {
			return servers.Result{}, &toolError{msg: "git remote get-url failed", err: err}
		}
		push, err := s.run(ctx, r, "remote", "get-url", "--push", "--all", "--", name)
		if err != nil {
			return servers.Result{}, &toolError{msg: "git remote get-url failed", err: err}
		}
		var sb strings.Builder
		for _, l := range strings.Fields(string(fetch.Stdout)) {
			sb.WriteString("fetch: " + l + "\n")
		}
		for _, l := range strings.Fields(string(push.Stdout)) {
			sb.WriteString("push: " + l + "\n")
		}
		return servers.Text(gitexec.CleanText(strings.TrimSuffix(sb.String(), "\n"))), nil
	}
}

func (s *Server) worktree(ctx context.Context, c *toolargs.Args) (servers.Result, error) {
	r, op, err := s.openRepoFor(ctx, c, "list")
	if err != nil {
		return servers.Result{}, err
	}
	var args []string
	switch op {
	case "list":
		args = []string{"worktree", "list", "--porcelain"}
	case "prune":
		args = []string{"worktree", "prune", "--verbose"}
	case "add", "remove":
		wt, err := s.sandboxPath("worktree_path", c.Str("worktree_path"))
		if err != nil {
			return servers.Result{}, err
		}
		if wt == s.sandbox || within(wt, r.repo.CommonDir) || within(r.repo.CommonDir, wt) {
			return servers.Result{}, refuse("worktree_path may not be the sandbox or overlap the git directory")
		}
		if op == "remove" {
			args = []string{"worktree", "remove", "--", wt}
			break
		}
		args = []string{"worktree", "add"}
		if c.Bool("create_branch") {
			if err := checkRefName("branch", c.Str("branch")); err != nil {
				return servers.Result{}, err
			}
			args = append(args, "-b", c.Str("branch"), "--end-of-options", wt)
			if c.Has("start_point") {
				if err := checkRevision("start_point", c.Str("start_point")); err != nil {
					return servers.Result{}, err
				}
				args = append(args, c.Str("start_point"))
			}
		} else {
			args = append(args, "--end-of-options", wt)
			if c.Has("branch") {
				if err := checkRevision("branch", c.Str("branch")); err != nil {
					return servers.Result{}, err
				}
				args = append(args, c.Str("branch"))
			}
		}
	}
	res, err := s.run(ctx, r, args...)
	if err != nil {
		return servers.Result{}, &toolError{msg: "git worktree " + op + " failed", err: err}
	}
	return textResult(append(res.Stdout, res.Stderr...), "done"), nil
}

// initRepo creates a repository at path (created if missing). An existing
// repository is refused rather than re-initialised.
func (s *Server) initRepo(ctx context.Context, c *toolargs.Args) (servers.Result, error) {
	dir, err := s.prepareNewRepoDir(c.Str("path"))
	if err != nil {
		return servers.Result{}, err
	}
	args := []string{"init", "--quiet"}
	if c.Has("initial_branch") {
		if err := checkRefName("initial_branch", c.Str("initial_branch")); err != nil {
			return servers.Result{}, err
		}
		args = append(args, "--initial-branch="+c.Str("initial_branch"))
	}
	if _, err := gitexec.Run(ctx, s.newRepoOptions(dir), args...); err != nil {
		return servers.Result{}, &toolError{msg: "git init failed", err: err}
	}
	return servers.Text("Initialized empty Git repository in " + dir), nil
}

// prepareNewRepoDir checks a directory argument for init or clone, creates
// it through the sandbox root if missing, and refuses an existing
// repository or (for clone) a non-empty directory.
func (s *Server) prepareNewRepoDir(p string) (string, error) {
	dir, err := s.sandboxPath("path", p)
	if err != nil {
		return "", err
	}
	if dir == s.sandbox {
		return "", refuse("path may not be the sandbox itself; name a directory inside it")
	}
	root, err := os.OpenRoot(s.sandbox)
	if err != nil {
		return "", fmt.Errorf("opening sandbox: %w", err)
	}
	defer root.Close()
	rel, _ := filepath.Rel(s.sandbox, dir)
	if err := root.MkdirAll(rel, 0o755); err != nil {
		return "", &toolError{msg: "creating the directory failed", err: err}
	}
	// The directory must be exactly where the path says (no symlink on the
	// way: the root would have refused one leading outside, and one leading
	// elsewhere inside makes the path non-canonical).
	real, err := filepath.EvalSymlinks(dir)
	if err != nil || real != dir {
		return "", refuse("path is not canonical")
	}
	if _, err := root.Lstat(filepath.Join(rel, ".git")); err == nil {
		return "", refuse("path is already a git repository")
	}
	return dir, nil
}

// newRepoOptions runs git init in dir.
func (s *Server) newRepoOptions(dir string) gitexec.Options {
	h := &repoHandle{repo: gitexec.Repo{WorkTree: dir, GitDir: filepath.Join(dir, ".git"), CommonDir: filepath.Join(dir, ".git")}, dir: dir}
	o := s.wsOptions(h)
	o.Dir = dir
	return o
}
