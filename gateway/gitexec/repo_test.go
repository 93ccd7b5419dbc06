package gitexec

import (
	"errors"
	"os"
	"path/filepath"
	"testing"
)

func TestFindRepo(t *testing.T) {
	r := newRepo(t)
	root := filepath.Dir(r.WorkTree)
	sub := filepath.Join(r.WorkTree, "src", "pkg")
	if err := os.MkdirAll(sub, 0o755); err != nil {
		t.Fatal(err)
	}
	wt := filepath.Join(root, "wt")
	setupGit(t, r.WorkTree, "worktree", "add", "-q", "-b", "side", wt)
	outside := t.TempDir()
	linked := filepath.Join(root, "linked")
	if err := os.Mkdir(linked, 0o755); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(filepath.Join(linked, ".git"), []byte("gitdir: "+outside+"\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	bad := filepath.Join(root, "bad")
	if err := os.Mkdir(bad, 0o755); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(filepath.Join(bad, ".git"), []byte("nonsense\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	plain := filepath.Join(root, "plain")
	if err := os.Mkdir(plain, 0o755); err != nil {
		t.Fatal(err)
	}

	tests := []struct {
		name       string
		dir        string
		ceiling    string
		wantWork   string
		wantCommon string
		wantErr    error
		wantWithin bool
	}{
		{name: "top", dir: r.WorkTree, ceiling: root, wantWork: r.WorkTree, wantCommon: r.GitDir, wantWithin: true},
		{name: "subdirectory", dir: sub, ceiling: root, wantWork: r.WorkTree, wantCommon: r.GitDir, wantWithin: true},
		{name: "linked worktree", dir: wt, ceiling: root, wantWork: wt, wantCommon: r.GitDir, wantWithin: true},
		{name: "gitdir file pointing outside", dir: linked, ceiling: root, wantWork: linked, wantCommon: outside, wantWithin: false},
		{name: "malformed .git file", dir: bad, ceiling: root, wantErr: ErrNoRepo},
		{name: "no repository below ceiling", dir: plain, ceiling: plain, wantErr: ErrNoRepo},
		{name: "dir outside ceiling", dir: root, ceiling: r.WorkTree, wantErr: ErrNoRepo},
		{name: "relative", dir: "repo", ceiling: root, wantErr: ErrBadOption},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			got, err := FindRepo(tt.dir, tt.ceiling)
			if tt.wantErr != nil {
				if !errors.Is(err, tt.wantErr) {
					t.Fatalf("err = %v, want %v", err, tt.wantErr)
				}
				return
			}
			if err != nil {
				t.Fatal(err)
			}
			if got.WorkTree != tt.wantWork || got.CommonDir != tt.wantCommon {
				t.Fatalf("got %+v, want work %s common %s", got, tt.wantWork, tt.wantCommon)
			}
			if w := got.Within(root); w != tt.wantWithin {
				t.Fatalf("Within(%s) = %v, want %v", root, w, tt.wantWithin)
			}
		})
	}
}

func TestWithin(t *testing.T) {
	tests := []struct {
		root, p string
		want    bool
	}{
		{root: "/sandbox", p: "/sandbox", want: true},
		{root: "/sandbox", p: "/sandbox/a", want: true},
		{root: "/sandbox", p: "/sandbox2", want: false},
		{root: "/sandbox", p: "/sandbox-evil/a", want: false},
		{root: "/sandbox", p: "/", want: false},
		{root: "/", p: "/x", want: true},
	}
	for _, tt := range tests {
		t.Run(tt.root+" "+tt.p, func(t *testing.T) {
			if got := within(tt.root, tt.p); got != tt.want {
				t.Fatalf("within(%q, %q) = %v", tt.root, tt.p, got)
			}
		})
	}
}

func writeFile(name, content string) error { return os.WriteFile(name, []byte(content), 0o644) }
