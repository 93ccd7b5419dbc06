package main

import (
	"context"
	"io"
	"log/slog"
	"net/http/httptest"
	"net/url"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"

	"ironcurtain.dev/e2e/internal/testenv"
)

const backendPath = "/usr/lib/git-core/git-http-backend"

// TestGitRemote clones from and pushes to the fixture's git remote over
// HTTP with the host's git, with and without the token.
func TestGitRemote(t *testing.T) {
	// In CI a missing git fails: .ci/run installs it (git-http-backend comes with it).
	testenv.Require(t, "git")
	if _, err := os.Stat(backendPath); err != nil {
		testenv.Missing(t, "git http-backend is not installed: %v", err)
	}
	ctx := context.Background()
	root := t.TempDir()
	if err := createRepo(ctx, root, "project"); err != nil {
		t.Fatal(err)
	}
	if err := createRepo(ctx, root, "acme/app"); err != nil {
		t.Fatal(err)
	}
	for _, bad := range []string{"../escape", "acme/../escape", "a/b/c", "/abs"} {
		if err := createRepo(ctx, root, bad); err == nil {
			t.Fatalf("createRepo accepted %q as a name", bad)
		}
	}
	h := &handler{log: slog.New(slog.NewTextHandler(io.Discard, nil)), git: &gitRemote{root: root, backend: backendPath, token: "git-secret"}}
	srv := httptest.NewServer(h)
	defer srv.Close()
	u, _ := url.Parse(srv.URL)

	git := func(dir string, args ...string) (string, error) {
		cmd := exec.Command("git", args...)
		cmd.Dir = dir
		cmd.Env = []string{"PATH=" + os.Getenv("PATH"), "HOME=" + t.TempDir(), "GIT_CONFIG_NOSYSTEM=1", "GIT_TERMINAL_PROMPT=0",
			"GIT_AUTHOR_NAME=t", "GIT_AUTHOR_EMAIL=t@t", "GIT_COMMITTER_NAME=t", "GIT_COMMITTER_EMAIL=t@t"}
		out, err := cmd.CombinedOutput()
		return strings.TrimSpace(string(out)), err
	}
	remote := func(user *url.Userinfo) string {
		r := *u
		r.User = user
		r.Host = "git.internet.test:" + u.Port()
		return r.String() + "/project.git"
	}
	// The handler routes on the Host header, which git takes from the
	// URL: resolve git.internet.test to the test server with curl's
	// resolve option.
	resolve := []string{"-c", "http.curloptResolve=git.internet.test:" + u.Port() + ":127.0.0.1"}

	work := t.TempDir()
	if out, err := git(work, append(resolve, "clone", remote(nil), "anon")...); err == nil {
		t.Fatalf("clone without credentials succeeded: %s", out)
	}
	if out, err := git(work, append(resolve, "clone", remote(url.UserPassword("x", "wrong")), "wrong")...); err == nil {
		t.Fatalf("clone with a wrong token succeeded: %s", out)
	}
	if out, err := git(work, append(resolve, "clone", remote(url.UserPassword("x", "git-secret")), "ok")...); err != nil {
		t.Fatalf("clone with the token: %v: %s", err, out)
	}
	clone := filepath.Join(work, "ok")
	if b, err := os.ReadFile(filepath.Join(clone, "README.md")); err != nil || !strings.Contains(string(b), "# project") {
		t.Fatalf("cloned README: %q %v", b, err)
	}
	if err := os.WriteFile(filepath.Join(clone, "f.txt"), []byte("x\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	for _, args := range [][]string{{"add", "f.txt"}, {"commit", "-qm", "feature"}, {"checkout", "-qb", "feature"}} {
		if out, err := git(clone, args...); err != nil {
			t.Fatalf("git %v: %v: %s", args, err, out)
		}
	}
	if out, err := git(clone, append(resolve, "push", "origin", "feature")...); err != nil {
		t.Fatalf("push: %v: %s", err, out)
	}
	out, err := git(root, "--git-dir", filepath.Join(root, "project.git"), "log", "-1", "--format=%s", "feature")
	if err != nil || out != "feature" {
		t.Fatalf("pushed branch on the remote: %q %v", out, err)
	}
}
