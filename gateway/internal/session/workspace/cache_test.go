package workspace

import (
	"io/fs"
	"os"
	"path/filepath"
	"testing"
)

func TestCache(t *testing.T) {
	root, err := filepath.EvalSymlinks(t.TempDir())
	if err != nil {
		t.Fatal(err)
	}
	for _, d := range []string{"a", "b/c"} {
		if err := os.MkdirAll(filepath.Join(root, d), 0o755); err != nil {
			t.Fatal(err)
		}
	}
	if err := os.WriteFile(filepath.Join(root, "file"), nil, 0o644); err != nil {
		t.Fatal(err)
	}
	if err := os.Symlink(filepath.Join(root, "a"), filepath.Join(root, "link")); err != nil {
		t.Fatal(err)
	}
	builds := 0
	c := NewCache(root, func(dir string, fi fs.FileInfo) (string, error) {
		builds++
		return "server for " + filepath.Base(dir), nil
	})
	for _, bad := range []string{root, filepath.Join(root, "b", "c"), root + "/a/", root + "/./a", filepath.Join(root, "file"),
		filepath.Join(root, "link"), filepath.Join(root, "missing"), "/elsewhere/a"} {
		if v, err := c.Get(bad); err == nil {
			t.Errorf("Get(%q) = %q, want an error", bad, v)
		}
	}
	a := filepath.Join(root, "a")
	for range 2 {
		if v, err := c.Get(a); err != nil || v != "server for a" {
			t.Fatalf("Get(a) = %q, %v", v, err)
		}
	}
	if builds != 1 {
		t.Fatalf("%d builds, want 1 (cached)", builds)
	}
	if got := c.Drain(); len(got) != 1 || got[0] != "server for a" {
		t.Fatalf("Drain = %q", got)
	}
	if _, err := c.Get(a); err != nil || builds != 2 {
		t.Fatalf("after Drain: %v, %d builds", err, builds)
	}
}
