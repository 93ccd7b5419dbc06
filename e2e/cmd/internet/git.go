package main

import (
	"bytes"
	"context"
	"crypto/subtle"
	"fmt"
	"net/http"
	"net/http/cgi"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"strings"
)

// repoName is what -git-repos accepts (it becomes a directory name, under
// an owner's directory for owner/name).
var repoName = regexp.MustCompile(`^([a-z][a-z0-9-]{0,40}/)?[a-z][a-z0-9-]{0,40}$`)

// gitRemote serves bare repositories under root over git's smart HTTP
// protocol (fetch and push), for clients that present token as the basic
// auth password.
type gitRemote struct {
	root    string
	backend string
	token   string
}

func (g *gitRemote) serve(w http.ResponseWriter, r *http.Request) string {
	_, pass, ok := r.BasicAuth()
	if !ok {
		w.Header().Set("WWW-Authenticate", `Basic realm="ironcurtain-e2e-git"`)
		http.Error(w, "authentication required", http.StatusUnauthorized)
		return "git: no credentials"
	}
	if subtle.ConstantTimeCompare([]byte(pass), []byte(g.token)) != 1 {
		w.Header().Set("WWW-Authenticate", `Basic realm="ironcurtain-e2e-git"`)
		http.Error(w, "bad credentials", http.StatusUnauthorized)
		return "git: wrong token"
	}
	h := &cgi.Handler{
		Path: g.backend,
		Root: "/",
		Env: []string{
			"GIT_PROJECT_ROOT=" + g.root,
			"GIT_HTTP_EXPORT_ALL=1",
			"REMOTE_USER=e2e",
			"GIT_CONFIG_NOSYSTEM=1",
			"HOME=" + g.root,
		},
	}
	h.ServeHTTP(w, r)
	return "git: token ok " + gitService(r)
}

// gitService names the protocol step of a request for the log.
func gitService(r *http.Request) string {
	if s := r.URL.Query().Get("service"); s != "" {
		return s
	}
	return filepath.Base(r.URL.Path)
}

// createRepo makes root/name.git, a bare repository whose main branch has
// one commit, with pushes over HTTP enabled.
func createRepo(ctx context.Context, root, name string) error {
	if !repoName.MatchString(name) {
		return fmt.Errorf("creating repository %q: not a plain name", name)
	}
	dir := filepath.Join(root, name+".git")
	if err := os.MkdirAll(dir, 0o755); err != nil {
		return fmt.Errorf("creating repository %s: %w", name, err)
	}
	git := func(stdin string, args ...string) (string, error) {
		cmd := exec.CommandContext(ctx, "git", append([]string{"--git-dir", dir}, args...)...)
		cmd.Env = []string{"PATH=/usr/bin:/bin", "HOME=" + root, "GIT_CONFIG_NOSYSTEM=1",
			"GIT_AUTHOR_NAME=e2e", "GIT_AUTHOR_EMAIL=e2e@internet.test",
			"GIT_COMMITTER_NAME=e2e", "GIT_COMMITTER_EMAIL=e2e@internet.test"}
		cmd.Stdin = strings.NewReader(stdin)
		var out, errb bytes.Buffer
		cmd.Stdout, cmd.Stderr = &out, &errb
		if err := cmd.Run(); err != nil {
			return "", fmt.Errorf("creating repository %s: git %s: %w: %s", name, args[0], err, strings.TrimSpace(errb.String()))
		}
		return strings.TrimSpace(out.String()), nil
	}
	if _, err := git("", "init", "--bare", "--quiet", "--initial-branch=main"); err != nil {
		return err
	}
	if _, err := git("", "config", "http.receivepack", "true"); err != nil {
		return err
	}
	blob, err := git("# "+name+"\n\nServed by the IronCurtain e2e internet.\n", "hash-object", "-w", "--stdin")
	if err != nil {
		return err
	}
	tree, err := git("100644 blob "+blob+"\tREADME.md\n", "mktree")
	if err != nil {
		return err
	}
	commit, err := git("initial commit\n", "commit-tree", tree)
	if err != nil {
		return err
	}
	_, err = git("", "update-ref", "refs/heads/main", commit)
	return err
}
