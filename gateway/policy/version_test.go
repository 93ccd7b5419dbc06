package policy

import (
	"context"
	"os"
	"path/filepath"
	"testing"
)

func TestVersion(t *testing.T) {
	base := writeDir(t, okPolicy, okAnn, okLists)
	load := func(t *testing.T, dir string, s Settings) string {
		t.Helper()
		e, err := LoadDir(dir, s)
		if err != nil {
			t.Fatalf("LoadDir: %v", err)
		}
		v := e.Version()
		if len(v) != VersionLen {
			t.Fatalf("Version() = %q, want %d hex digits", v, VersionLen)
		}
		return v
	}
	v0 := load(t, base, Settings{})
	if again := load(t, base, Settings{}); again != v0 {
		t.Errorf("reloading the same directory changed the version: %s then %s", v0, again)
	}
	// Reformatting a file (same content) keeps the version when the
	// directory is the same.
	if err := os.WriteFile(filepath.Join(base, CompiledPolicyFile), []byte("{\n  \"rules\": [ {\"reason\": \"x\", \"then\": \"allow\", \"if\": {}, \"name\": \"r\"} ]\n}\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	if v := load(t, base, Settings{}); v != v0 {
		t.Errorf("reformatting compiled-policy.json changed the version: %s then %s", v0, v)
	}

	changes := []struct {
		name string
		edit func(dir string)
		s    Settings
	}{
		{name: "rule decision", edit: func(dir string) {
			write(t, dir, CompiledPolicyFile, `{"rules": [{"name": "r", "if": {}, "then": "deny", "reason": "x"}]}`)
		}},
		{name: "rule name", edit: func(dir string) {
			write(t, dir, CompiledPolicyFile, `{"rules": [{"name": "r2", "if": {}, "then": "allow", "reason": "x"}]}`)
		}},
		{name: "annotation role", edit: func(dir string) {
			write(t, dir, AnnotationsFile, `{"servers": {"s": {"tools": [{"toolName": "t", "serverName": "s", "args": {"a": ["read-path"]}}]}}}`)
		}},
		{name: "dynamic list", edit: func(dir string) {
			write(t, dir, DynamicListsFile, `{"lists": {"x": {"values": ["a.example"]}}}`)
		}},
		{name: "settings: protected branches", s: Settings{ProtectedBranches: []string{"release"}}},
		{name: "settings: trusted server", s: Settings{TrustedServers: []string{"s"}}},
		{name: "settings: domain allowlist", s: Settings{DomainAllowlists: map[string][]string{"s": {"x.example"}}}},
	}
	for _, tt := range changes {
		t.Run(tt.name, func(t *testing.T) {
			if tt.edit == nil {
				if v := load(t, base, tt.s); v == v0 {
					t.Errorf("version %s unchanged", v)
				}
				return
			}
			dir := t.TempDir()
			for _, f := range []string{CompiledPolicyFile, AnnotationsFile, DynamicListsFile} {
				b, err := os.ReadFile(filepath.Join(base, f))
				if err != nil {
					t.Fatal(err)
				}
				write(t, dir, f, string(b))
			}
			// Same content in another directory: the directory is a
			// protected path, so compare against that directory's own
			// version before the edit.
			before := load(t, dir, Settings{})
			tt.edit(dir)
			if after := load(t, dir, Settings{}); after == before {
				t.Errorf("version %s unchanged by the edit", after)
			}
		})
	}

	t.Run("shadow", func(t *testing.T) {
		shadowDir := writeDir(t, `{"rules": [{"name": "s", "if": {}, "then": "deny", "reason": "x"}]}`, okAnn, okLists)
		e, err := LoadDir(base, Settings{ShadowPolicyDir: shadowDir})
		if err != nil {
			t.Fatal(err)
		}
		if e.Version() == v0 {
			t.Error("attaching a shadow policy kept the version")
		}
		plain, err := LoadDir(base, Settings{})
		if err != nil {
			t.Fatal(err)
		}
		with := plain.WithShadow(e.Shadow())
		if with.Version() == plain.Version() || with.Version() != plain.WithShadow(e.Shadow()).Version() {
			t.Errorf("WithShadow: version %s (plain %s), want a different, stable version", with.Version(), plain.Version())
		}
	})
}

func write(t *testing.T, dir, name, content string) {
	t.Helper()
	if err := os.WriteFile(filepath.Join(dir, name), []byte(content), 0o644); err != nil {
		t.Fatal(err)
	}
}

// TestLoadDirRecorded: a recorded engine takes paths lexically, so a
// symlink in today's sandbox does not change the decision on a recorded
// (already canonical) path.
func TestLoadDirRecorded(t *testing.T) {
	sb := t.TempDir()
	outside := t.TempDir()
	if err := os.Symlink(outside, filepath.Join(sb, "link")); err != nil {
		t.Fatal(err)
	}
	ann := `{"servers": {"filesystem": {"tools": [{"toolName": "read_file", "serverName": "filesystem", "args": {"path": ["read-path"]}}]}}}`
	dir := writeDir(t, `{"rules": [{"name": "deny-rest", "if": {}, "then": "deny", "reason": "x"}]}`, ann, okLists)
	s := Settings{Sandbox: sb}
	live, err := LoadDir(dir, s)
	if err != nil {
		t.Fatal(err)
	}
	rec, err := LoadDirRecorded(dir, s)
	if err != nil {
		t.Fatal(err)
	}
	req := Request{Server: "filesystem", Tool: "read_file", Args: map[string]any{"path": filepath.Join(sb, "link", "f")}}
	if d := live.Evaluate(context.Background(), req).Decision; d.Status != Deny {
		t.Errorf("live engine: %s (%s), want deny: the symlink leaves the sandbox", d.Status, d.Rule)
	}
	if d := rec.Evaluate(context.Background(), req).Decision; d.Status != Allow || d.Rule != RuleSandboxAllow {
		t.Errorf("recorded engine: %s (%s), want allow by %s: the recorded path is taken as written", d.Status, d.Rule, RuleSandboxAllow)
	}
	if live.Version() != rec.Version() {
		t.Errorf("the recorded engine has version %s, the live one %s: same artifacts and settings", rec.Version(), live.Version())
	}
}

// TestVersionProtectedPathsAreASet: the order and repeats of protected
// paths do not change the version (the gateway and `policy replay` add
// the same paths in different orders).
func TestVersionProtectedPathsAreASet(t *testing.T) {
	dir := writeDir(t, okPolicy, okAnn, okLists)
	a, err := LoadDir(dir, Settings{ProtectedPaths: []string{"/etc/a", "/etc/b"}})
	if err != nil {
		t.Fatal(err)
	}
	b, err := LoadDir(dir, Settings{ProtectedPaths: []string{"/etc/b", dir, "/etc/a", "/etc/b"}})
	if err != nil {
		t.Fatal(err)
	}
	if a.Version() != b.Version() {
		t.Errorf("versions %s and %s for the same set of protected paths", a.Version(), b.Version())
	}
	c, err := LoadDir(dir, Settings{ProtectedPaths: []string{"/etc/a"}})
	if err != nil {
		t.Fatal(err)
	}
	if c.Version() == a.Version() {
		t.Error("removing a protected path kept the version")
	}
}
