package git

import (
	"context"
	"crypto/sha256"
	"encoding/hex"
	"errors"
	"os"
	"path/filepath"
	"strings"

	"ironcurtain.dev/gateway/gitexec"
	"ironcurtain.dev/gateway/internal/gitmirror"
	"ironcurtain.dev/gateway/internal/servers"
	"ironcurtain.dev/gateway/internal/servers/toolargs"
)

// fetchSource is where a fetch, pull or clone reads from.
type fetchSource struct {
	name string      // remote name ("" for a URL)
	urls []remoteURL // all URLs of the remote (git fetches from the first)
}

// boundFetchSource resolves the remote argument (resolveFetchSource) and
// binds the call to its URLs (bindURLs), as fetch and pull do before they
// reach it.
func (s *Server) boundFetchSource(ctx context.Context, r *repoHandle, remote string) (fetchSource, error) {
	src, err := s.resolveFetchSource(ctx, r, remote)
	if err != nil {
		return fetchSource{}, err
	}
	if err := s.bindURLs(ctx, "remote", src.urls); err != nil {
		return fetchSource{}, err
	}
	return src, nil
}

// resolveFetchSource resolves the remote argument: a URL, a remote name or
// "" for the default remote (branch.<current>.remote, then origin). Named
// remotes are resolved by the push checker's resolver (strict URL
// parsing, executable config refused, legacy remote files refused).
func (s *Server) resolveFetchSource(ctx context.Context, r *repoHandle, remote string) (fetchSource, error) {
	if remote != "" && !isRemoteName(remote) {
		u, err := s.parseRemoteURL("remote", remote)
		if err != nil {
			return fetchSource{}, err
		}
		return fetchSource{urls: []remoteURL{u}}, nil
	}
	res, err := s.push.Resolver.Resolve(ctx, r.dir, s.sandbox, remote, false)
	if err != nil {
		if s.unsafeLocal {
			if src, lerr := s.resolveLocalRemote(ctx, r, remote); lerr == nil {
				return src, nil
			}
		}
		return fetchSource{}, &toolError{msg: "cannot resolve the remote", err: err}
	}
	src := fetchSource{name: res.Remote}
	for _, u := range res.URLs {
		src.urls = append(src.urls, remoteURL{url: u.URL()})
	}
	return src, nil
}

// resolveLocalRemote resolves a remote whose URL is a local path
// (UnsafeAllowLocalRemotes only).
func (s *Server) resolveLocalRemote(ctx context.Context, r *repoHandle, name string) (fetchSource, error) {
	if name == "" {
		name = "origin"
		if b, err := s.currentBranch(ctx, r); err == nil && b != "" {
			if out, err := s.run(ctx, r, "config", "--get", "branch."+b+".remote"); err == nil {
				if n := strings.TrimSpace(string(out.Stdout)); isRemoteName(n) {
					name = n
				}
			}
		}
	}
	out, err := s.run(ctx, r, "remote", "get-url", "--all", "--", name)
	if err != nil {
		return fetchSource{}, err
	}
	src := fetchSource{name: name}
	for _, l := range strings.Fields(string(out.Stdout)) {
		u, err := s.parseRemoteURL("remote", l)
		if err != nil {
			return fetchSource{}, err
		}
		src.urls = append(src.urls, u)
	}
	if len(src.urls) == 0 {
		return fetchSource{}, errors.New("remote has no URL")
	}
	return src, nil
}

// bindURLs refuses a network operation whose URLs are not all among those
// the policy judged for arg (servers.CallInfo.PolicyArgs): a remote
// re-pointed after the decision is never contacted.
func (s *Server) bindURLs(ctx context.Context, arg string, urls []remoteURL) error {
	if s.unsafeUnbound {
		return nil
	}
	info, _ := servers.CallInfoFrom(ctx)
	approved := map[string]bool{}
	switch v := info.PolicyArgs[arg].(type) {
	case string:
		approved[v] = true
	case []any:
		for _, e := range v {
			if s, ok := e.(string); ok {
				approved[s] = true
			}
		}
	case []string:
		for _, e := range v {
			approved[e] = true
		}
	}
	if len(approved) == 0 {
		return refuse("network operation refused: the call carries no policy decision on %s", arg)
	}
	for _, u := range urls {
		if !approved[u.url] {
			return refuse("network operation refused: the remote now resolves to %s, which is not what the policy approved", u.url)
		}
	}
	return nil
}

// currentBranch returns the current branch's short name ("" when detached).
func (s *Server) currentBranch(ctx context.Context, r *repoHandle) (string, error) {
	out, err := s.run(ctx, r, "symbolic-ref", "--quiet", "--short", "HEAD")
	if err != nil {
		var ge *gitexec.Error
		if errors.As(err, &ge) && ge.ExitCode == 1 {
			return "", nil
		}
		return "", err
	}
	return strings.TrimSpace(string(out.Stdout)), nil
}

// fetchNamespace is where a remote's refs live in a mirror.
func fetchNamespace(url string) string {
	sum := sha256.Sum256([]byte(url))
	return "refs/ironcurtain/fetch/" + hex.EncodeToString(sum[:8])
}

// intoMirror fetches branch (every branch when "") and optionally the tags
// of url into the mirror's namespace for url.
func (s *Server) intoMirror(ctx context.Context, mirror string, u remoteURL, branch string, tags bool) (string, error) {
	ns := fetchNamespace(u.url)
	src := "*"
	if branch != "" {
		src = branch
	}
	args := []string{"fetch", "--prune", "--no-write-fetch-head", "--no-recurse-submodules", "--no-tags", "--quiet",
		"--", u.url, "+refs/heads/" + src + ":" + ns + "/heads/" + src}
	if tags {
		args = append(args, "+refs/tags/*:"+ns+"/tags/*")
	}
	o := s.mirrors.Options(mirror)
	if u.local {
		o = gitmirror.LocalTransfer(o, u.url)
	}
	err := s.networkOp(ctx, "fetch", u, func() error {
		_, err := gitexec.Run(ctx, o, args...)
		return err
	})
	if err != nil {
		var te *toolError
		if errors.As(err, &te) {
			return "", err
		}
		return "", &toolError{msg: "fetching from the remote failed", err: err}
	}
	return ns, nil
}

// fetchHeadRef is where a fetch from a URL (no remote name) leaves the
// fetched commit in the workspace before FETCH_HEAD points at it.
const fetchHeadRef = "refs/ironcurtain/fetch-head"

// fromMirror moves the mirror namespace ns into the workspace: into
// refs/remotes/<name>/ for a named remote, into FETCH_HEAD for a URL.
//
// The gateway's mirror pushes into the workspace rather than the workspace
// fetching from the mirror: the git process that resolves the transfer's
// URL then reads only the gateway's config, so no url.<x>.insteadOf (or
// anything else) the agent put in .git/config can redirect it, even if
// written between the config scan and the run. On the workspace side only
// receive-pack runs, with the hardened settings (hooks off) passed down.
// It returns a report of the updated refs.
func (s *Server) fromMirror(ctx context.Context, r *repoHandle, mirror, ns string, src fetchSource, branch string, tags, prune bool) (string, error) {
	b := "*"
	if branch != "" {
		b = branch
	}
	o := gitmirror.LocalTransfer(s.mirrors.Options(mirror), r.repo.WorkTree, r.repo.GitDir, r.repo.CommonDir)
	o.Timeout = s.netTimeout
	args := []string{"push", "--porcelain", "--no-verify", "--recurse-submodules=no"}
	if prune && src.name != "" {
		args = append(args, "--prune")
	}
	args = append(args, "--", r.repo.CommonDir)
	if src.name != "" {
		args = append(args, "+"+ns+"/heads/"+b+":refs/remotes/"+src.name+"/"+b)
	} else {
		args = append(args, "+"+ns+"/heads/"+b+":"+fetchHeadRef)
	}
	if tags {
		args = append(args, ns+"/tags/*:refs/tags/*")
	}
	res, err := gitexec.Run(ctx, o, args...)
	report := transferReport(string(res.Stdout), ns, src)
	if err != nil {
		return report, &toolError{msg: "updating the repository from the gateway mirror failed", err: withReport(err, report)}
	}
	if src.name == "" {
		out, err := s.run(ctx, r, "rev-parse", "--verify", "--quiet", "--end-of-options", fetchHeadRef)
		if err != nil {
			return report, &toolError{msg: "reading the fetched commit failed", err: err}
		}
		oid := strings.TrimSpace(string(out.Stdout))
		if _, err := s.run(ctx, r, "update-ref", "--no-deref", "FETCH_HEAD", oid); err != nil {
			return report, &toolError{msg: "setting FETCH_HEAD failed", err: err}
		}
		_, _ = s.run(ctx, r, "update-ref", "-d", fetchHeadRef)
	}
	return report, nil
}

// transferReport renders git push --porcelain lines of a mirror-to-
// workspace transfer as fetch-style lines ("[new branch] main ->
// origin/main").
func transferReport(porcelain, ns string, src fetchSource) string {
	var lines []string
	for _, l := range strings.Split(gitexec.CleanText(porcelain), "\n") {
		parts := strings.Split(l, "\t")
		if len(parts) < 3 {
			continue
		}
		from, to, _ := strings.Cut(parts[1], ":")
		from = strings.TrimPrefix(strings.TrimPrefix(strings.TrimPrefix(from, ns+"/"), "heads/"), "tags/")
		to = strings.TrimPrefix(strings.TrimPrefix(to, "refs/remotes/"), "refs/tags/")
		if to == fetchHeadRef {
			to = "FETCH_HEAD"
		}
		summary := parts[2]
		if parts[0] == "=" {
			continue // up to date
		}
		if parts[0] == "-" {
			from = "(deleted)"
		}
		lines = append(lines, " "+summary+" "+from+" -> "+to)
	}
	if len(lines) == 0 {
		return ""
	}
	return "From " + src.urls[0].url + "\n" + strings.Join(lines, "\n")
}

// fetchRefs runs the whole fetch: remote → mirror → workspace.
func (s *Server) fetchRefs(ctx context.Context, r *repoHandle, src fetchSource, branch string, tags, prune bool) (string, error) {
	mirror := s.mirrors.For(r.repo.CommonDir)
	unlock := s.mirrors.Lock(mirror)
	defer unlock()
	if err := s.mirrors.Ensure(ctx, mirror); err != nil {
		return "", err
	}
	ns, err := s.intoMirror(ctx, mirror, src.urls[0], branch, tags)
	if err != nil {
		return "", err
	}
	return s.fromMirror(ctx, r, mirror, ns, src, branch, tags, prune)
}

func (s *Server) fetch(ctx context.Context, c *toolargs.Args) (servers.Result, error) {
	r, err := s.openRepo(ctx, "path", c.Str("path"))
	if err != nil {
		return servers.Result{}, err
	}
	src, err := s.boundFetchSource(ctx, r, c.Str("remote"))
	if err != nil {
		return servers.Result{}, err
	}
	branch := c.Str("branch")
	if c.Has("branch") {
		if err := checkRefName("branch", branch); err != nil {
			return servers.Result{}, err
		}
	} else if src.name == "" {
		return servers.Result{}, refuse("fetching from a URL needs branch")
	}
	report, err := s.fetchRefs(ctx, r, src, branch, c.Bool("tags"), c.Bool("prune"))
	if err != nil {
		return servers.Result{}, err
	}
	if report == "" {
		report = "up to date"
	}
	return servers.Text(s.redact(report)), nil
}

func (s *Server) pull(ctx context.Context, c *toolargs.Args) (servers.Result, error) {
	r, err := s.openRepo(ctx, "path", c.Str("path"))
	if err != nil {
		return servers.Result{}, err
	}
	if c.Bool("rebase") && c.Bool("ff_only") {
		return servers.Result{}, refuse("rebase and ff_only exclude each other")
	}
	src, err := s.boundFetchSource(ctx, r, c.Str("remote"))
	if err != nil {
		return servers.Result{}, err
	}
	branch := c.Str("branch")
	if c.Has("branch") {
		if err := checkRefName("branch", branch); err != nil {
			return servers.Result{}, err
		}
	} else {
		branch, err = s.upstreamBranch(ctx, r)
		if err != nil {
			return servers.Result{}, err
		}
	}
	report, err := s.fetchRefs(ctx, r, src, branch, false, false)
	if err != nil {
		return servers.Result{}, err
	}
	target := "FETCH_HEAD"
	if src.name != "" {
		target = "refs/remotes/" + src.name + "/" + branch
	}
	var args []string
	switch {
	case c.Bool("rebase"):
		args = []string{"rebase", "--no-autosquash", "--no-verify", "--no-gpg-sign", "--no-update-refs", "--end-of-options", target}
	default:
		args = []string{"merge", "--no-edit", "--no-verify", "--no-gpg-sign", "--no-stat"}
		if c.Bool("ff_only") {
			args = append(args, "--ff-only")
		}
		args = append(args, "--end-of-options", target)
	}
	res, err := s.run(ctx, r, args...)
	if err != nil {
		return servers.Result{}, gitFailure("git pull failed after fetching", res, err)
	}
	out := strings.TrimSpace(report + "\n" + gitexec.CleanText(string(res.Stdout)+string(res.Stderr)))
	return servers.Text(s.redact(out)), nil
}

// upstreamBranch is the branch pull merges when none is named: the current
// branch's configured merge branch, else the same name.
func (s *Server) upstreamBranch(ctx context.Context, r *repoHandle) (string, error) {
	cur, err := s.currentBranch(ctx, r)
	if err != nil {
		return "", &toolError{msg: "reading the current branch failed", err: err}
	}
	if cur == "" {
		return "", refuse("HEAD is detached; name branch")
	}
	out, err := s.run(ctx, r, "config", "--get", "branch."+cur+".merge")
	if err == nil {
		if b, ok := strings.CutPrefix(strings.TrimSpace(string(out.Stdout)), "refs/heads/"); ok && checkRefName("branch", b) == nil {
			return b, nil
		}
	}
	if err := checkRefName("branch", cur); err != nil {
		return "", err
	}
	return cur, nil
}

// clone creates a repository at path from url: the remote is fetched into
// the new repository's mirror, the repository is initialised by the
// gateway (so its config holds no settings from the remote) and filled from
// the mirror.
func (s *Server) clone(ctx context.Context, c *toolargs.Args) (servers.Result, error) {
	u, err := s.parseRemoteURL("url", c.Str("url"))
	if err != nil {
		return servers.Result{}, err
	}
	if err := s.bindURLs(ctx, "url", []remoteURL{u}); err != nil {
		return servers.Result{}, err
	}
	branch := c.Str("branch")
	if c.Has("branch") {
		if err := checkRefName("branch", branch); err != nil {
			return servers.Result{}, err
		}
	}
	dir, err := s.sandboxPath("path", c.Str("path"))
	if err != nil {
		return servers.Result{}, err
	}
	if entries, err := os.ReadDir(dir); err == nil && len(entries) > 0 {
		return servers.Result{}, refuse("path exists and is not empty")
	}
	_, statErr := os.Lstat(dir)
	created := errors.Is(statErr, os.ErrNotExist)
	dir, err = s.prepareNewRepoDir(dir)
	if err != nil {
		return servers.Result{}, err
	}
	res, err := s.cloneInto(ctx, dir, u, branch)
	if err != nil {
		s.removeFailedClone(dir, created)
		return servers.Result{}, err
	}
	return res, nil
}

func (s *Server) cloneInto(ctx context.Context, dir string, u remoteURL, branch string) (servers.Result, error) {
	gitDir := filepath.Join(dir, ".git")
	mirror := s.mirrors.For(gitDir)
	unlock := s.mirrors.Lock(mirror)
	defer unlock()
	if err := s.mirrors.Ensure(ctx, mirror); err != nil {
		return servers.Result{}, err
	}
	if branch == "" {
		b, err := s.remoteHead(ctx, mirror, u)
		if err != nil {
			return servers.Result{}, err
		}
		branch = b
	}
	ns, err := s.intoMirror(ctx, mirror, u, "", true)
	if err != nil {
		return servers.Result{}, err
	}
	initArgs := []string{"init", "--quiet"}
	if branch != "" {
		initArgs = append(initArgs, "--initial-branch="+branch)
	}
	if _, err := gitexec.Run(ctx, s.newRepoOptions(dir), initArgs...); err != nil {
		return servers.Result{}, &toolError{msg: "git init failed", err: err}
	}
	r := &repoHandle{repo: gitexec.Repo{WorkTree: dir, GitDir: gitDir, CommonDir: gitDir}, dir: dir}
	if _, err := s.run(ctx, r, "remote", "add", "--", "origin", u.url); err != nil {
		return servers.Result{}, &toolError{msg: "git remote add failed", err: err}
	}
	src := fetchSource{name: "origin", urls: []remoteURL{u}}
	if _, err := s.fromMirror(ctx, r, mirror, ns, src, "", true, false); err != nil {
		return servers.Result{}, err
	}
	msg := "Cloned " + u.url + " into " + dir
	if branch == "" {
		return servers.Text(msg + " (empty repository)"), nil
	}
	if _, err := s.run(ctx, r, "rev-parse", "--verify", "--quiet", "--end-of-options", "refs/remotes/origin/"+branch); err != nil {
		return servers.Result{}, refuse("the remote has no branch %s", branch)
	}
	if _, err := s.run(ctx, r, "switch", "--quiet", "--force-create", branch, "--track=direct", "--end-of-options", "origin/"+branch); err != nil {
		return servers.Result{}, &toolError{msg: "checking out the cloned branch failed", err: err}
	}
	_, _ = s.run(ctx, r, "symbolic-ref", "refs/remotes/origin/HEAD", "refs/remotes/origin/"+branch)
	return servers.Text(msg + " (branch " + branch + ")"), nil
}

// remoteHead asks the remote for its default branch ("" for an empty
// repository).
func (s *Server) remoteHead(ctx context.Context, mirror string, u remoteURL) (string, error) {
	o := s.mirrors.Options(mirror)
	if u.local {
		o = gitmirror.LocalTransfer(o, u.url)
	}
	var out gitexec.Result
	err := s.networkOp(ctx, "ls-remote", u, func() error {
		var err error
		out, err = gitexec.Run(ctx, o, "ls-remote", "--symref", "--", u.url, "HEAD")
		return err
	})
	if err != nil {
		var te *toolError
		if errors.As(err, &te) {
			return "", err
		}
		return "", &toolError{msg: "reading the remote failed", err: err}
	}
	for _, line := range strings.Split(string(out.Stdout), "\n") {
		if ref, ok := strings.CutPrefix(line, "ref: refs/heads/"); ok {
			b, _, _ := strings.Cut(ref, "\t")
			if checkRefName("branch", b) != nil {
				return "", refuse("the remote's default branch name is not acceptable")
			}
			return b, nil
		}
	}
	return "", nil
}

// removeFailedClone deletes what a failed clone created, through the
// sandbox root (never following a symlink out).
func (s *Server) removeFailedClone(dir string, created bool) {
	root, err := os.OpenRoot(s.sandbox)
	if err != nil {
		return
	}
	defer root.Close()
	rel, err := filepath.Rel(s.sandbox, dir)
	if err != nil || rel == "." || strings.HasPrefix(rel, "..") {
		return
	}
	// The directory was missing or empty before the clone: empty it again.
	_ = root.RemoveAll(rel)
	if !created {
		_ = root.Mkdir(rel, 0o755)
	}
}
