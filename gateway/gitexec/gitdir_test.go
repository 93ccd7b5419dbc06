package gitexec

import (
	"errors"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"syscall"
	"testing"
)

func gitSetup(t testing.TB, dir string, args ...string) {
	t.Helper()
	cmd := exec.Command("git", append([]string{"-c", "user.name=T", "-c", "user.email=t@e", "-c", "init.defaultBranch=main"}, args...)...)
	cmd.Dir = dir
	cmd.Env = append(os.Environ(), "GIT_CONFIG_NOSYSTEM=1", "GIT_CONFIG_GLOBAL=/dev/null")
	if out, err := cmd.CombinedOutput(); err != nil {
		t.Fatalf("git %v: %v\n%s", args, err, out)
	}
}

func newCheckedRepo(t testing.TB) (string, Repo) {
	t.Helper()
	base, err := filepath.EvalSymlinks(t.TempDir())
	if err != nil {
		t.Fatal(err)
	}
	dir := filepath.Join(base, "r")
	gitSetup(t, base, "init", "-q", dir)
	gitSetup(t, dir, "commit", "-q", "--allow-empty", "-m", "init")
	r, err := FindRepo(dir, base)
	if err != nil {
		t.Fatal(err)
	}
	return base, r
}

func TestCheckGitDir(t *testing.T) {
	cases := []struct {
		name  string
		setup func(t *testing.T, base string, r Repo)
		want  string // "" = accepted
	}{
		{name: "clean repository"},
		{name: "empty alternates file", setup: func(t *testing.T, _ string, r Repo) {
			if err := os.WriteFile(filepath.Join(r.GitDir, "objects", "info", "alternates"), nil, 0o644); err != nil {
				t.Fatal(err)
			}
		}},
		{name: "alternates", setup: func(t *testing.T, base string, r Repo) {
			if err := os.WriteFile(filepath.Join(r.GitDir, "objects", "info", "alternates"), []byte(base+"\n"), 0o644); err != nil {
				t.Fatal(err)
			}
		}, want: "borrows objects"},
		{name: "http alternates", setup: func(t *testing.T, _ string, r Repo) {
			if err := os.WriteFile(filepath.Join(r.GitDir, "objects", "info", "http-alternates"), []byte("https://x/\n"), 0o644); err != nil {
				t.Fatal(err)
			}
		}, want: "borrows objects"},
		{name: "symlinked refs dir", setup: func(t *testing.T, base string, r Repo) {
			if err := os.Symlink(base, filepath.Join(r.GitDir, "refs", "heads", "evil")); err != nil {
				t.Fatal(err)
			}
		}, want: "refs/heads/evil is a symbolic link"},
		{name: "symlinked HEAD", setup: func(t *testing.T, _ string, r Repo) {
			head := filepath.Join(r.GitDir, "HEAD")
			if err := os.Rename(head, head+".real"); err != nil {
				t.Fatal(err)
			}
			if err := os.Symlink(head+".real", head); err != nil {
				t.Fatal(err)
			}
		}, want: "HEAD is a symbolic link"},
		{name: "FIFO", setup: func(t *testing.T, _ string, r Repo) {
			if err := syscall.Mkfifo(filepath.Join(r.GitDir, "info", "fifo"), 0o644); err != nil {
				t.Skip("mkfifo unsupported")
			}
		}, want: "not a regular file"},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			base, r := newCheckedRepo(t)
			if tc.setup != nil {
				tc.setup(t, base, r)
			}
			err := CheckGitDir(r)
			if tc.want == "" {
				if err != nil {
					t.Fatal(err)
				}
				return
			}
			if !errors.Is(err, ErrUnsafeGitDir) || !strings.Contains(err.Error(), tc.want) {
				t.Fatalf("err = %v, want %q", err, tc.want)
			}
		})
	}
}

// TestCheckGitDirLinkedWorktree: a linked worktree's git directory lives
// inside the common directory; both are checked, neither twice.
func TestCheckGitDirLinkedWorktree(t *testing.T) {
	base, r := newCheckedRepo(t)
	wt := filepath.Join(base, "wt")
	gitSetup(t, r.WorkTree, "worktree", "add", "-q", wt)
	lr, err := FindRepo(wt, base)
	if err != nil {
		t.Fatal(err)
	}
	if lr.GitDir == lr.CommonDir {
		t.Fatal("not a linked worktree")
	}
	if err := CheckGitDir(lr); err != nil {
		t.Fatal(err)
	}
	if err := os.Symlink(base, filepath.Join(lr.GitDir, "evil")); err != nil {
		t.Fatal(err)
	}
	if err := CheckGitDir(lr); !errors.Is(err, ErrUnsafeGitDir) {
		t.Fatalf("symlink in the worktree's git dir not found: %v", err)
	}
}

func BenchmarkCheckGitDir(b *testing.B) {
	_, r := newCheckedRepo(b)
	for i := 0; i < 50; i++ {
		gitSetup(b, r.WorkTree, "commit", "-q", "--allow-empty", "-m", "c")
	}
	b.ReportAllocs()
	for b.Loop() {
		if err := CheckGitDir(r); err != nil {
			b.Fatal(err)
		}
	}
}
