package gitexec

import (
	"context"
	"errors"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"ironcurtain.dev/gateway/internal/testenv"
)

// setupGit runs an unhardened git for test set-up only, isolated from the
// developer's own configuration.
func setupGit(t testing.TB, dir string, args ...string) string {
	t.Helper()
	cmd := exec.Command("git", args...)
	cmd.Dir = dir
	cmd.Env = append(os.Environ(), "GIT_CONFIG_NOSYSTEM=1", "GIT_CONFIG_GLOBAL=/dev/null",
		"GIT_AUTHOR_NAME=t", "GIT_AUTHOR_EMAIL=t@example.com", "GIT_COMMITTER_NAME=t", "GIT_COMMITTER_EMAIL=t@example.com")
	out, err := cmd.CombinedOutput()
	if err != nil {
		t.Fatalf("git %v: %v\n%s", args, err, out)
	}
	return strings.TrimSpace(string(out))
}

// newRepo creates a repository with one commit and returns it.
func newRepo(t *testing.T) Repo {
	t.Helper()
	testenv.Require(t, "git")
	root, err := filepath.EvalSymlinks(t.TempDir())
	if err != nil {
		t.Fatal(err)
	}
	dir := filepath.Join(root, "repo")
	if err := os.Mkdir(dir, 0o755); err != nil {
		t.Fatal(err)
	}
	setupGit(t, dir, "init", "-q", "-b", "main")
	if err := os.WriteFile(filepath.Join(dir, "a.txt"), []byte("a\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	setupGit(t, dir, "add", "a.txt")
	setupGit(t, dir, "commit", "-q", "-m", "first")
	r, err := FindRepo(dir, root)
	if err != nil {
		t.Fatal(err)
	}
	return r
}

// marker returns a path whose existence proves that agent code ran, and a
// shell script that creates it.
func marker(t *testing.T) (path, script string) {
	t.Helper()
	dir := t.TempDir()
	path = filepath.Join(dir, "pwned")
	script = filepath.Join(dir, "evil.sh")
	if err := os.WriteFile(script, []byte("#!/bin/sh\ntouch "+path+"\ncat\n"), 0o755); err != nil {
		t.Fatal(err)
	}
	return path, script
}

func assertNoMarker(t *testing.T, path string) {
	t.Helper()
	if _, err := os.Stat(path); err == nil {
		t.Fatalf("agent-controlled program ran (marker %s exists)", path)
	}
}

func TestRunHardened(t *testing.T) {
	r := newRepo(t)
	// The gateway's own GIT_* variables must not leak into the child.
	t.Setenv("GIT_DIR", "/nonexistent")
	t.Setenv("GIT_CONFIG_PARAMETERS", "'core.fsmonitor'='/bin/false'")
	res, err := Run(context.Background(), r.Options(), "rev-parse", "--git-dir")
	if err != nil {
		t.Fatal(err)
	}
	if got := strings.TrimSpace(string(res.Stdout)); got != r.GitDir {
		t.Fatalf("git dir = %q, want %q", got, r.GitDir)
	}
}

func TestRunNeverExecutesRepoCode(t *testing.T) {
	tests := []struct {
		name  string
		setup func(t *testing.T, r Repo, script string)
		args  []string
	}{
		{
			name: "fsmonitor on status",
			setup: func(t *testing.T, r Repo, script string) {
				setupGit(t, r.WorkTree, "config", "core.fsmonitor", script)
			},
			args: []string{"status", "--porcelain"},
		},
		{
			name: "pre-commit hook",
			setup: func(t *testing.T, r Repo, script string) {
				hook := filepath.Join(r.GitDir, "hooks", "pre-commit")
				if err := os.WriteFile(hook, []byte("#!/bin/sh\nexec "+script+" </dev/null\n"), 0o755); err != nil {
					t.Fatal(err)
				}
			},
			args: []string{"-c", "user.name=t", "-c", "user.email=t@example.com", "commit", "-q", "--allow-empty", "-m", "x"},
		},
		{
			name: "hooksPath in repo config",
			setup: func(t *testing.T, r Repo, script string) {
				dir := filepath.Join(r.WorkTree, "hooks")
				if err := os.Mkdir(dir, 0o755); err != nil {
					t.Fatal(err)
				}
				if err := os.WriteFile(filepath.Join(dir, "pre-commit"), []byte("#!/bin/sh\nexec "+script+" </dev/null\n"), 0o755); err != nil {
					t.Fatal(err)
				}
				setupGit(t, r.WorkTree, "config", "core.hooksPath", dir)
			},
			args: []string{"-c", "user.name=t", "-c", "user.email=t@example.com", "commit", "-q", "--allow-empty", "-m", "x"},
		},
		{
			name: "ext transport",
			setup: func(t *testing.T, r Repo, script string) {
				setupGit(t, r.WorkTree, "config", "protocol.ext.allow", "always")
			},
			args: []string{"ls-remote", "ext::" + "sh -c %S"},
		},
		{
			name: "ext transport as a remote URL",
			setup: func(t *testing.T, r Repo, script string) {
				setupGit(t, r.WorkTree, "config", "protocol.allow", "always")
				setupGit(t, r.WorkTree, "remote", "add", "evil", "ext::"+script)
			},
			args: []string{"fetch", "evil"},
		},
		{
			name: "fd transport",
			setup: func(t *testing.T, r Repo, script string) {
				setupGit(t, r.WorkTree, "config", "protocol.fd.allow", "always")
			},
			args: []string{"ls-remote", "fd::0"},
		},
		{
			name: "filter driver on add",
			setup: func(t *testing.T, r Repo, script string) {
				setupGit(t, r.WorkTree, "config", "filter.x.clean", script)
				if err := os.WriteFile(filepath.Join(r.WorkTree, ".gitattributes"), []byte("*.txt filter=x\n"), 0o644); err != nil {
					t.Fatal(err)
				}
				if err := os.WriteFile(filepath.Join(r.WorkTree, "b.txt"), []byte("b\n"), 0o644); err != nil {
					t.Fatal(err)
				}
			},
			// The hardening alone does not stop a configured filter: callers
			// must refuse the repository after ScanConfig (tested below).
			args: nil,
		},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			r := newRepo(t)
			m, script := marker(t)
			tt.setup(t, r, script)
			if tt.args == nil {
				err := RefuseExecutableConfig(context.Background(), r.Options())
				if !errors.Is(err, ErrExecutableConfig) {
					t.Fatalf("RefuseExecutableConfig = %v, want ErrExecutableConfig", err)
				}
				return
			}
			o := r.Options()
			o.Timeout = 10 * time.Second
			_, _ = Run(context.Background(), o, tt.args...)
			assertNoMarker(t, m)
		})
	}
}

func TestRunRefusesLocalTransports(t *testing.T) {
	r := newRepo(t)
	other := newRepo(t)
	for _, url := range []string{"file://" + other.WorkTree, other.WorkTree, "ext::sh -c true", "fd::0", "git://127.0.0.1:1/x", "http://127.0.0.1:1/x"} {
		t.Run(url, func(t *testing.T) {
			_, err := Run(context.Background(), r.Options(), "ls-remote", "--", url)
			var ge *Error
			if !errors.As(err, &ge) {
				t.Fatalf("ls-remote %s: err = %v, want a git error", url, err)
			}
		})
	}
}

func TestRunTimeout(t *testing.T) {
	r := newRepo(t)
	pr, pw, err := os.Pipe()
	if err != nil {
		t.Fatal(err)
	}
	defer pr.Close()
	defer pw.Close()
	o := r.Options()
	o.Timeout = 200 * time.Millisecond
	o.Stdin = pr // never closed: hash-object waits forever
	start := time.Now()
	_, err = Run(context.Background(), o, "hash-object", "--stdin")
	if !errors.Is(err, ErrTimeout) {
		t.Fatalf("err = %v, want ErrTimeout", err)
	}
	if d := time.Since(start); d > 5*time.Second {
		t.Fatalf("timeout took %v", d)
	}
}

func TestRunOutputLimit(t *testing.T) {
	r := newRepo(t)
	o := r.Options()
	o.MaxOutput = 16
	_, err := Run(context.Background(), o, "config", "--list")
	if !errors.Is(err, ErrOutputLimit) {
		t.Fatalf("err = %v, want ErrOutputLimit", err)
	}
}

func TestOptionsValidation(t *testing.T) {
	tests := []struct {
		name string
		o    Options
	}{
		{name: "no git dir", o: Options{}},
		{name: "override GIT_DIR", o: Options{GitDir: "/x", Env: []string{"GIT_DIR=/y"}}},
		{name: "override config count", o: Options{GitDir: "/x", Env: []string{"GIT_CONFIG_COUNT=1"}}},
		{name: "override config key", o: Options{GitDir: "/x", Env: []string{"GIT_CONFIG_KEY_0=core.pager"}}},
		{name: "override HOME", o: Options{GitDir: "/x", Env: []string{"HOME=/root"}}},
		{name: "env without =", o: Options{GitDir: "/x", Env: []string{"FOO"}}},
		{name: "config without =", o: Options{GitDir: "/x", Config: []string{"core.pager"}}},
		{name: "config as option", o: Options{GitDir: "/x", Config: []string{"--exec=x"}}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			if _, err := Command(context.Background(), tt.o, "status"); !errors.Is(err, ErrBadOption) {
				t.Fatalf("err = %v, want ErrBadOption", err)
			}
		})
	}
}

func TestCommandShape(t *testing.T) {
	cmd, err := Command(context.Background(), Options{GitDir: "/r/.git", WorkTree: "/r", Env: []string{"GIT_SSH_COMMAND=ssh -o X=y"}}, "push", "--", "x")
	if err != nil {
		t.Fatal(err)
	}
	args := strings.Join(cmd.Args, " ")
	for _, want := range []string{"-c core.fsmonitor=false", "-c core.hooksPath=/dev/null", "-c protocol.allow=never",
		"-c protocol.https.allow=always", "-c protocol.ssh.allow=always", "-c safe.bareRepository=explicit",
		"-c safe.directory=/r", "push -- x"} {
		if !strings.Contains(args, want) {
			t.Errorf("args %q lack %q", args, want)
		}
	}
	env := strings.Join(cmd.Env, "\n")
	for _, want := range []string{"GIT_DIR=/r/.git", "GIT_WORK_TREE=/r", "GIT_CONFIG_NOSYSTEM=1", "GIT_CONFIG_GLOBAL=/dev/null",
		"GIT_CEILING_DIRECTORIES=/", "GIT_TERMINAL_PROMPT=0", "GIT_SSH_COMMAND=ssh -o X=y"} {
		if !strings.Contains(env, want) {
			t.Errorf("env lacks %q", want)
		}
	}
	if cmd.Dir != "/r" {
		t.Errorf("dir = %q", cmd.Dir)
	}
}
