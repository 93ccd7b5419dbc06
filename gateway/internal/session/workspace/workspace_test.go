package workspace

import (
	"errors"
	"os"
	"path/filepath"
	"strings"
	"testing"
)

func open(t *testing.T, keep bool) (*Manager, string) {
	t.Helper()
	base, err := filepath.EvalSymlinks(t.TempDir())
	if err != nil {
		t.Fatal(err)
	}
	m, err := Open(filepath.Join(base, "workspaces"), keep)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { m.Close() })
	return m, base
}

func TestCreateRelease(t *testing.T) {
	for _, keep := range []bool{false, true} {
		m, _ := open(t, keep)
		p, err := m.Create("sess_a")
		if err != nil {
			t.Fatal(err)
		}
		fi, err := os.Lstat(p)
		if err != nil || !fi.IsDir() || fi.Mode().Perm() != DirMode {
			t.Fatalf("created %s: %v %v", p, fi.Mode(), err)
		}
		if fi, err := os.Stat(m.Root()); err != nil || fi.Mode().Perm() != RootMode {
			t.Fatalf("root mode %v %v", fi.Mode(), err)
		}
		if _, err := m.Create("sess_a"); err == nil {
			t.Fatal("creating an existing workspace again succeeded")
		}
		if err := os.WriteFile(filepath.Join(p, "f"), []byte("x"), 0o644); err != nil {
			t.Fatal(err)
		}
		if err := m.Release("sess_a"); err != nil {
			t.Fatal(err)
		}
		_, err = os.Lstat(p)
		if keep != (err == nil) {
			t.Fatalf("keep=%v: after release lstat err = %v", keep, err)
		}
		if err := m.Release("sess_missing"); err != nil {
			t.Fatalf("releasing a missing workspace: %v", err)
		}
	}
}

// TestInvalidIDs: an id never names anything but one directory in the root.
func TestInvalidIDs(t *testing.T) {
	m, _ := open(t, false)
	for _, id := range []string{"", ".", "..", "../x", "a/b", "/abs", "sess_\x00", "sess a", "ｓｅｓｓ", strings.Repeat("a", MaxIDLen+1)} {
		if _, err := m.Path(id); !errors.Is(err, ErrInvalidID) {
			t.Errorf("Path(%q): err = %v", id, err)
		}
		if _, err := m.Create(id); !errors.Is(err, ErrInvalidID) {
			t.Errorf("Create(%q): err = %v", id, err)
		}
		if err := m.Discard(id); !errors.Is(err, ErrInvalidID) {
			t.Errorf("Discard(%q): err = %v", id, err)
		}
	}
}

// TestPlantedSymlinks: a symlink planted with a session's name is not used
// as its workspace, and removing a workspace removes links inside it, never
// what they point to.
func TestPlantedSymlinks(t *testing.T) {
	m, base := open(t, false)
	outside := filepath.Join(base, "outside")
	if err := os.MkdirAll(outside, 0o755); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(filepath.Join(outside, "keep.txt"), []byte("x"), 0o644); err != nil {
		t.Fatal(err)
	}
	if err := os.Symlink(outside, filepath.Join(m.Root(), "sess_planted")); err != nil {
		t.Fatal(err)
	}
	if _, err := m.Create("sess_planted"); err == nil {
		t.Fatal("Create used a planted symlink")
	}
	p, err := m.Create("sess_b")
	if err != nil {
		t.Fatal(err)
	}
	if err := os.Symlink(outside, filepath.Join(p, "out")); err != nil {
		t.Fatal(err)
	}
	for _, id := range []string{"sess_b", "sess_planted"} {
		if err := m.Discard(id); err != nil {
			t.Fatal(err)
		}
	}
	if _, err := os.Stat(filepath.Join(outside, "keep.txt")); err != nil {
		t.Fatalf("a file outside the root was removed: %v", err)
	}
}

func TestSweep(t *testing.T) {
	m, _ := open(t, false)
	for _, id := range []string{"sess_live", "sess_ended", "sess_unknown"} {
		if _, err := m.Create(id); err != nil {
			t.Fatal(err)
		}
	}
	if err := os.WriteFile(filepath.Join(m.Root(), "not-a-dir"), nil, 0o644); err != nil {
		t.Fatal(err)
	}
	if _, err := m.Sweep(func([]string) (map[string]bool, error) { return nil, errors.New("db down") }); err == nil {
		t.Fatal("sweep with a failing lookup succeeded")
	}
	if ids, _ := m.List(); len(ids) != 3 {
		t.Fatalf("a failed sweep removed something: %v", ids)
	}
	done, err := m.Sweep(func(ids []string) (map[string]bool, error) { return map[string]bool{"sess_live": true}, nil })
	if err != nil {
		t.Fatal(err)
	}
	if strings.Join(done, ",") != "sess_ended,sess_unknown" {
		t.Fatalf("swept %v", done)
	}
	if ids, _ := m.List(); strings.Join(ids, ",") != "sess_live" {
		t.Fatalf("left %v", ids)
	}
	kept, _ := open(t, true)
	if _, err := kept.Create("sess_x"); err != nil {
		t.Fatal(err)
	}
	if done, err := kept.Sweep(func([]string) (map[string]bool, error) { return nil, nil }); err != nil || len(done) != 0 {
		t.Fatalf("keep: swept %v, %v", done, err)
	}
}

// FuzzPath: whatever the id, Path either refuses it or names a direct
// child of the root.
func FuzzPath(f *testing.F) {
	for _, s := range []string{"sess_abc", "..", "a/b", "", "\x00", "ＡＢ"} {
		f.Add(s)
	}
	m, err := Open(filepath.Join(f.TempDir(), "w"), false)
	if err != nil {
		f.Fatal(err)
	}
	f.Fuzz(func(t *testing.T, id string) {
		p, err := m.Path(id)
		if err != nil {
			return
		}
		if filepath.Dir(p) != m.Root() || filepath.Clean(p) != p || filepath.Base(p) != id {
			t.Fatalf("Path(%q) = %q, not a child of %q", id, p, m.Root())
		}
	})
}
