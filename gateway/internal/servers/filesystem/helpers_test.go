package filesystem

import (
	"context"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"ironcurtain.dev/gateway/internal/servers"
)

// env is a sandbox next to a directory the agent must never reach. The
// sibling "sandbox2" exists for the string-prefix trick.
type env struct {
	srv      *Server
	sandbox  string // realpath of the sandbox
	outside  string // realpath of a directory outside it
	sandbox2 string // realpath of <parent>/sandbox2
}

const secret = "TOP-SECRET-OUTSIDE"

func newEnv(t testing.TB) *env {
	t.Helper()
	base, err := filepath.EvalSymlinks(t.TempDir())
	if err != nil {
		t.Fatal(err)
	}
	e := &env{
		sandbox:  filepath.Join(base, "sandbox"),
		outside:  filepath.Join(base, "outside"),
		sandbox2: filepath.Join(base, "sandbox2"),
	}
	for _, d := range []string{e.sandbox, e.outside, e.sandbox2} {
		if err := os.Mkdir(d, 0o755); err != nil {
			t.Fatal(err)
		}
	}
	mustWrite(t, filepath.Join(e.outside, "secret"), secret)
	mustWrite(t, filepath.Join(e.sandbox2, "secret"), secret)
	mustWrite(t, filepath.Join(e.sandbox, "movable"), "m")
	srv, err := New(Config{Root: e.sandbox})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { srv.Close() })
	e.srv = srv
	return e
}

// in returns the absolute path of rel inside the sandbox.
func (e *env) in(rel string) string { return filepath.Join(e.sandbox, filepath.FromSlash(rel)) }

func (e *env) call(t testing.TB, tool string, args map[string]any) servers.Result {
	t.Helper()
	res, err := e.srv.Call(context.Background(), tool, args)
	if err != nil {
		t.Fatalf("%s: unexpected Go error: %v", tool, err)
	}
	return res
}

func text(r servers.Result) string {
	var sb strings.Builder
	for _, c := range r.Content {
		sb.WriteString(c.Text)
	}
	return sb.String()
}

func mustWrite(t testing.TB, p, content string) {
	t.Helper()
	if err := os.WriteFile(p, []byte(content), 0o644); err != nil {
		t.Fatal(err)
	}
}

func mustRead(t testing.TB, p string) string {
	t.Helper()
	b, err := os.ReadFile(p)
	if err != nil {
		t.Fatal(err)
	}
	return string(b)
}

func exists(p string) bool {
	_, err := os.Lstat(p)
	return err == nil
}

// assertOutsideIntact fails if anything outside the sandbox changed: the
// secret keeps its content and no other file appeared there.
func (e *env) assertOutsideIntact(t testing.TB) {
	t.Helper()
	for _, dir := range []string{e.outside, e.sandbox2} {
		if got := mustRead(t, filepath.Join(dir, "secret")); got != secret {
			t.Fatalf("%s/secret was modified: %q", dir, got)
		}
		ents, err := os.ReadDir(dir)
		if err != nil {
			t.Fatal(err)
		}
		if len(ents) != 1 {
			names := []string{}
			for _, en := range ents {
				names = append(names, en.Name())
			}
			t.Fatalf("files appeared outside the sandbox in %s: %v", dir, names)
		}
	}
}
