package gitremote

import (
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"

	"ironcurtain.dev/gateway/internal/testenv"
)

// tree is a fresh temporary directory with a sandbox and a directory
// outside it, in which the tests build git repositories.
type tree struct{ root, sandbox, outside string }

// op is one set-up step; exactly one field is set.
type op struct {
	File    []string // [path, content]
	GitRepo string   // init with branch main and one commit
	Git     []string // [dir, args...]
}

func newTree(t testing.TB) tree {
	t.Helper()
	root, err := filepath.EvalSymlinks(t.TempDir())
	if err != nil {
		t.Fatal(err)
	}
	tr := tree{root: root, sandbox: filepath.Join(root, "sandbox"), outside: filepath.Join(root, "outside")}
	for _, d := range []string{tr.sandbox, tr.outside} {
		if err := os.MkdirAll(d, 0o755); err != nil {
			t.Fatal(err)
		}
	}
	return tr
}

func (tr tree) expand(s string) string {
	return strings.NewReplacer("$SANDBOX", tr.sandbox, "$OUTSIDE", tr.outside, "$ROOT", tr.root).Replace(s)
}

// testGit runs git for set-up, isolated from the developer's configuration.
func testGit(t testing.TB, dir string, args ...string) {
	t.Helper()
	cmd := exec.Command("git", args...)
	cmd.Dir = dir
	cmd.Env = append(os.Environ(), "GIT_CONFIG_NOSYSTEM=1", "GIT_CONFIG_GLOBAL=/dev/null", "GIT_TERMINAL_PROMPT=0",
		"GIT_AUTHOR_NAME=t", "GIT_AUTHOR_EMAIL=t@example.com", "GIT_COMMITTER_NAME=t", "GIT_COMMITTER_EMAIL=t@example.com")
	if out, err := cmd.CombinedOutput(); err != nil {
		t.Fatalf("git %v in %s: %v\n%s", args, dir, err, out)
	}
}

func (tr tree) apply(t testing.TB, ops []op) {
	t.Helper()
	for _, o := range ops {
		switch {
		case len(o.File) == 2:
			p := tr.expand(o.File[0])
			if err := os.MkdirAll(filepath.Dir(p), 0o755); err != nil {
				t.Fatal(err)
			}
			if err := os.WriteFile(p, []byte(tr.expand(o.File[1])), 0o644); err != nil {
				t.Fatal(err)
			}
		case o.GitRepo != "":
			dir := tr.expand(o.GitRepo)
			if err := os.MkdirAll(dir, 0o755); err != nil {
				t.Fatal(err)
			}
			testenv.Require(t, "git")
			testGit(t, dir, "init", "-q", "-b", "main")
			testGit(t, dir, "commit", "-q", "--allow-empty", "-m", "initial")
		case len(o.Git) >= 2:
			args := make([]string, len(o.Git)-1)
			for i, a := range o.Git[1:] {
				args[i] = tr.expand(a)
			}
			testGit(t, tr.expand(o.Git[0]), args...)
		default:
			t.Fatalf("empty or malformed set-up step %+v", o)
		}
	}
}
