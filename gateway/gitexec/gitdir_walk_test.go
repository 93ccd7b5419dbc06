package gitexec

import (
	"errors"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"syscall"
	"testing"
)

// TestCheckTreeMatchesWalkDir: the system-call walker (checkTree) and the
// portable filepath.WalkDir walker (walkTree) agree on every tree: the
// same verdict, naming the same entry, and the same number of entries.
func TestCheckTreeMatchesWalkDir(t *testing.T) {
	tests := []struct {
		name    string
		setup   func(t *testing.T, root string)
		wantErr string // "" when the tree is acceptable
	}{
		{name: "plain tree", setup: func(t *testing.T, root string) {}},
		{name: "deep symlink", setup: func(t *testing.T, root string) {
			mustSymlink(t, "/etc/passwd", filepath.Join(root, "objects", "ab", "cd", "ef"))
		}, wantErr: "objects/ab/cd/ef is a symbolic link"},
		{name: "dangling symlink", setup: func(t *testing.T, root string) {
			mustSymlink(t, filepath.Join(root, "nowhere"), filepath.Join(root, "refs", "heads", "x"))
		}, wantErr: "refs/heads/x is a symbolic link"},
		{name: "symlinked directory", setup: func(t *testing.T, root string) {
			mustSymlink(t, "/", filepath.Join(root, "refs", "tags"))
		}, wantErr: "refs/tags is a symbolic link"},
		{name: "FIFO deep down", setup: func(t *testing.T, root string) {
			if err := syscall.Mkfifo(filepath.Join(root, "logs", "refs", "heads", "p"), 0o644); err != nil {
				t.Skip("mkfifo:", err)
			}
		}, wantErr: "logs/refs/heads/p is not a regular file or directory"},
		{name: "alternates", setup: func(t *testing.T, root string) {
			mustWrite(t, filepath.Join(root, "objects", "info", "alternates"), "/elsewhere/objects\n")
		}, wantErr: "borrows objects"},
		{name: "many entries in one directory", setup: func(t *testing.T, root string) {
			for i := 0; i < 700; i++ { // several getdents buffers
				mustWrite(t, filepath.Join(root, "objects", "ab", strings.Repeat("x", 30)+string(rune('a'+i%26))+strconv.Itoa(i)), "")
			}
		}},
		{name: "symlink after many entries", setup: func(t *testing.T, root string) {
			for i := 0; i < 700; i++ {
				mustWrite(t, filepath.Join(root, "objects", "ab", strings.Repeat("y", 30)+strconv.Itoa(i)), "")
			}
			mustSymlink(t, "/etc/passwd", filepath.Join(root, "objects", "ab", "zz-link"))
		}, wantErr: "objects/ab/zz-link is a symbolic link"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			root := t.TempDir()
			for _, d := range []string{"objects/ab/cd", "objects/info", "refs/heads", "logs/refs/heads"} {
				if err := os.MkdirAll(filepath.Join(root, d), 0o755); err != nil {
					t.Fatal(err)
				}
			}
			mustWrite(t, filepath.Join(root, "HEAD"), "ref: refs/heads/main\n")
			tt.setup(t, root)
			var fastCount, slowCount int
			fast := checkTree(root, map[string]bool{root: true}, &fastCount)
			slow := walkTree(root, map[string]bool{root: true}, &slowCount)
			for _, err := range []error{fast, slow} {
				if tt.wantErr == "" && err != nil || tt.wantErr != "" && (!errors.Is(err, ErrUnsafeGitDir) || !strings.Contains(err.Error(), tt.wantErr)) {
					t.Fatalf("checkTree: %v; walkTree: %v; want %q", fast, slow, tt.wantErr)
				}
			}
			if tt.wantErr == "" && fastCount != slowCount {
				t.Fatalf("checkTree saw %d entries, walkTree %d", fastCount, slowCount)
			}
		})
	}
}

func TestDirentModeUnknownType(t *testing.T) {
	root := t.TempDir()
	mustWrite(t, filepath.Join(root, "f"), "")
	mustSymlink(t, "f", filepath.Join(root, "l"))
	tests := []struct {
		name string
		want os.FileMode
	}{
		{name: "f", want: 0},
		{name: "l", want: os.ModeSymlink},
		{name: ".", want: os.ModeDir},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			got, err := direntMode(0 /* DT_UNKNOWN */, filepath.Join(root, tt.name))
			if err != nil || got != tt.want {
				t.Fatalf("direntMode = %v, %v; want %v", got, err, tt.want)
			}
		})
	}
}

func mustSymlink(t *testing.T, target, link string) {
	t.Helper()
	if err := os.Symlink(target, link); err != nil {
		t.Fatal(err)
	}
}

func mustWrite(t *testing.T, path, content string) {
	t.Helper()
	if err := os.MkdirAll(filepath.Dir(path), 0o755); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(path, []byte(content), 0o644); err != nil {
		t.Fatal(err)
	}
}
