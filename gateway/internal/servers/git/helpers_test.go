package git

import (
	"context"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"

	"ironcurtain.dev/gateway/gitexec"
	"ironcurtain.dev/gateway/internal/audit/audittest"
	"ironcurtain.dev/gateway/internal/servers"
)

// genv is a sandbox, a directory outside it and a gateway-private mirror
// directory. marker is the file every attack payload tries to create.
type genv struct {
	t       testing.TB
	base    string
	sandbox string
	outside string
	mirror  string
	marker  string
	srv     *Server
	egress  *audittest.Sink // the server's audit sink (Config.Sink)
}

func newGenv(t testing.TB, mod func(*Config)) *genv {
	t.Helper()
	base, err := filepath.EvalSymlinks(t.TempDir())
	if err != nil {
		t.Fatal(err)
	}
	g := &genv{t: t, base: base, sandbox: filepath.Join(base, "sandbox"), outside: filepath.Join(base, "outside"),
		mirror: filepath.Join(base, "mirror")}
	g.marker = filepath.Join(g.outside, "MARKER")
	for _, d := range []string{g.sandbox, g.outside} {
		if err := os.Mkdir(d, 0o755); err != nil {
			t.Fatal(err)
		}
	}
	g.egress = &audittest.Sink{}
	cfg := Config{Sandbox: g.sandbox, MirrorDir: g.mirror, Timeout: 20e9, NetworkTimeout: 30e9, Sink: g.egress}
	if mod != nil {
		mod(&cfg)
	}
	g.srv, err = New(cfg)
	if err != nil {
		t.Fatal(err)
	}
	return g
}

// rawGit runs the host's git for test setup, outside any hardening.
func rawGit(t testing.TB, dir string, args ...string) string {
	t.Helper()
	// Hooks are off: tests plant hooks that only the server must not run.
	cmd := exec.Command("git", append([]string{"-c", "user.name=Test", "-c", "user.email=test@example.com",
		"-c", "init.defaultBranch=main", "-c", "protocol.file.allow=always", "-c", "core.hooksPath=/dev/null"}, args...)...)
	cmd.Dir = dir
	cmd.Env = append(os.Environ(), "GIT_CONFIG_NOSYSTEM=1", "GIT_CONFIG_GLOBAL=/dev/null", "HOME=/nonexistent")
	out, err := cmd.CombinedOutput()
	if err != nil {
		t.Fatalf("git %v: %v\n%s", args, err, out)
	}
	return strings.TrimSpace(string(out))
}

// rawGitMayFail is rawGit for commands expected to fail (to leave a
// repository in the middle of an operation).
func rawGitMayFail(t testing.TB, dir string, args ...string) {
	t.Helper()
	cmd := exec.Command("git", append([]string{"-c", "user.name=Test", "-c", "user.email=test@example.com", "-c", "core.hooksPath=/dev/null"}, args...)...)
	cmd.Dir = dir
	cmd.Env = append(os.Environ(), "GIT_CONFIG_NOSYSTEM=1", "GIT_CONFIG_GLOBAL=/dev/null", "HOME=/nonexistent")
	_ = cmd.Run()
}

// repo creates a repository at rel inside the sandbox with one commit on
// main and returns its path.
func (g *genv) repo(rel string) string {
	g.t.Helper()
	dir := filepath.Join(g.sandbox, rel)
	if err := os.MkdirAll(dir, 0o755); err != nil {
		g.t.Fatal(err)
	}
	rawGit(g.t, dir, "init", "-q")
	writeFile(g.t, filepath.Join(dir, "README"), "hello\n")
	rawGit(g.t, dir, "add", "README")
	rawGit(g.t, dir, "commit", "-q", "-m", "initial")
	return dir
}

// bare creates a bare repository outside the sandbox seeded from src's main.
func (g *genv) bare(name, src string) string {
	g.t.Helper()
	dir := filepath.Join(g.outside, name)
	rawGit(g.t, g.outside, "init", "-q", "--bare", dir)
	if src != "" {
		rawGit(g.t, src, "push", "-q", dir, "main:main")
	}
	return dir
}

// payload writes an executable script outside the sandbox that creates
// the marker, and returns its path.
func (g *genv) payload() string {
	g.t.Helper()
	p := filepath.Join(g.outside, "pwn.sh")
	writeFile(g.t, p, "#!/bin/sh\ntouch '"+g.marker+"'\ncat\n")
	if err := os.Chmod(p, 0o755); err != nil {
		g.t.Fatal(err)
	}
	return p
}

func (g *genv) assertNoMarker() {
	g.t.Helper()
	if _, err := os.Lstat(g.marker); err == nil {
		g.t.Fatal("attacker-controlled code ran in the gateway: the marker file exists")
	}
}

func (g *genv) call(tool string, args map[string]any) servers.Result {
	g.t.Helper()
	return g.callInfo(servers.CallInfo{}, tool, args)
}

func (g *genv) callInfo(ci servers.CallInfo, tool string, args map[string]any) servers.Result {
	g.t.Helper()
	ctx := servers.WithCallInfo(context.Background(), ci)
	res, err := g.srv.Call(ctx, tool, args)
	if err != nil {
		g.t.Fatalf("%s: unexpected Go error: %v", tool, err)
	}
	return res
}

func mustFindRepo(t testing.TB, dir, sandbox string) gitexec.Repo {
	t.Helper()
	r, err := gitexec.FindRepo(dir, sandbox)
	if err != nil {
		t.Fatal(err)
	}
	return r
}

func writeFile(t testing.TB, p, content string) {
	t.Helper()
	if err := os.MkdirAll(filepath.Dir(p), 0o755); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(p, []byte(content), 0o644); err != nil {
		t.Fatal(err)
	}
}

func text(r servers.Result) string {
	var sb strings.Builder
	for _, c := range r.Content {
		sb.WriteString(c.Text)
	}
	return sb.String()
}

func mustOK(t testing.TB, r servers.Result) string {
	t.Helper()
	if r.IsError {
		t.Fatalf("unexpected tool error: %s", text(r))
	}
	return text(r)
}

func mustFail(t testing.TB, r servers.Result, want string) string {
	t.Helper()
	if !r.IsError {
		t.Fatalf("expected a tool error containing %q, got success: %s", want, text(r))
	}
	if !strings.Contains(text(r), want) {
		t.Fatalf("error %q does not contain %q", text(r), want)
	}
	return text(r)
}
