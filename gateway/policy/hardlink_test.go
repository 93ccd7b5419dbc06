package policy

import (
	"context"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"testing"
)

// TestHardLinksRealFS checks hard links on a real file system, including
// protected files that are re-created after the engine was loaded (new
// inodes) and a protected directory that contains the sandbox.
func TestHardLinksRealFS(t *testing.T) {
	tr := newTree(t)
	prot := filepath.Join(tr.outside, "protected")
	tr.apply(t, []op{
		{Write: "$OUTSIDE/protected/spool/0001.jsonl"},
		{Write: "$OUTSIDE/protected/policy/compiled-policy.json"},
		{Write: "$SANDBOX/a.txt"},
	})
	e := tr.engine(t, suite{Settings: settings{ProtectedPaths: []string{prot}}})
	read := func(p string) Decision {
		return e.Evaluate(context.Background(), Request{Server: "filesystem", Tool: "read_text_file", Args: map[string]any{"path": p}}).Decision
	}
	link := func(target, name string) {
		t.Helper()
		if err := os.Link(target, filepath.Join(tr.sandbox, name)); err != nil {
			t.Fatal(err)
		}
	}
	spool := filepath.Join(prot, "spool", "0001.jsonl")
	link(spool, "spool-link")
	if err := os.Symlink(filepath.Join(tr.sandbox, "spool-link"), filepath.Join(tr.sandbox, "sym-to-link")); err != nil {
		t.Fatal(err)
	}

	tests := []struct {
		name  string
		setup func()
		path  string
		want  Status
		rule  string
	}{
		{name: "hard link to a spool file", path: "spool-link", want: Deny, rule: RuleProtectedPath},
		{name: "symlink to the hard link", path: "sym-to-link", want: Deny, rule: RuleProtectedPath},
		{name: "hard link to a policy file", setup: func() { link(filepath.Join(prot, "policy", "compiled-policy.json"), "pol") },
			path: "pol", want: Deny, rule: RuleProtectedPath},
		{name: "protected file re-created after load", setup: func() {
			if err := os.Remove(spool); err != nil {
				t.Fatal(err)
			}
			if err := os.WriteFile(spool, []byte("new inode"), 0o600); err != nil {
				t.Fatal(err)
			}
			link(spool, "spool-link-2")
		}, path: "spool-link-2", want: Deny, rule: RuleProtectedPath},
		{name: "the old inode is no longer protected", path: "spool-link", want: Allow},
		{name: "single-link file", path: "a.txt", want: Allow},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			if tt.setup != nil {
				tt.setup()
			}
			d := read(tt.path)
			if d.Status != tt.want || (tt.rule != "" && d.Rule != tt.rule) {
				t.Fatalf("read %s = %s (%s: %s), want %s %s", tt.path, d.Status, d.Rule, d.Reason, tt.want, tt.rule)
			}
		})
	}
}

// TestHardLinksSandboxInsideProtected: a protected directory that contains
// the sandbox does not protect the sandbox's own files (as the
// protected-path invariant), but files beside the sandbox stay protected.
func TestHardLinksSandboxInsideProtected(t *testing.T) {
	tr := newTree(t)
	tr.apply(t, []op{{Write: "$SANDBOX/a.txt"}, {Write: "$ROOT/secret.key"},
		{Link: []string{"$SANDBOX/a2.txt", "$SANDBOX/a.txt"}},
		{Link: []string{"$SANDBOX/k", "$ROOT/secret.key"}}})
	e := tr.engine(t, suite{Settings: settings{ProtectedPaths: []string{tr.root}}})
	for _, tt := range []struct {
		path string
		want Status
	}{{path: "a2.txt", want: Allow}, {path: "k", want: Deny}} {
		d := e.Evaluate(context.Background(), Request{Server: "filesystem", Tool: "read_text_file", Args: map[string]any{"path": tt.path}}).Decision
		if d.Status != tt.want {
			t.Errorf("read %s = %s (%s: %s), want %s", tt.path, d.Status, d.Rule, d.Reason, tt.want)
		}
	}
}

// TestHardLinksWalkBound: with more files under the protected paths than
// the bound, a multiply-linked value is refused (it cannot be compared),
// while calls without one never walk the protected paths.
func TestHardLinksWalkBound(t *testing.T) {
	tr := newTree(t)
	big := filepath.Join(tr.outside, "big")
	if err := os.MkdirAll(big, 0o755); err != nil {
		t.Fatal(err)
	}
	for i := 0; i <= maxProtectedWalk; i++ {
		f, err := os.Create(filepath.Join(big, fmt.Sprint(i)))
		if err != nil {
			t.Fatal(err)
		}
		f.Close()
	}
	tr.apply(t, []op{{Write: "$SANDBOX/a.txt"}, {Link: []string{"$SANDBOX/a2.txt", "$SANDBOX/a.txt"}}, {Write: "$SANDBOX/b.txt"}})
	e := tr.engine(t, suite{Settings: settings{ProtectedPaths: []string{big}}})
	read := func(p string) Decision {
		return e.Evaluate(context.Background(), Request{Server: "filesystem", Tool: "read_text_file", Args: map[string]any{"path": p}}).Decision
	}
	if d := read("a2.txt"); d.Status != Deny || d.Rule != RuleProtectedPath || !strings.Contains(d.Reason, "could not be compared") {
		t.Fatalf("read of a hard link past the bound = %s (%s: %s), want deny", d.Status, d.Rule, d.Reason)
	}
	if d := read("b.txt"); d.Status != Allow {
		t.Fatalf("a call without a hard link = %s (%s: %s): it walked the protected paths", d.Status, d.Rule, d.Reason)
	}
}

// TestCanonicalIDLeaf: the identity is that of the final file, after
// symlinks, and zero for directories, missing files and anything a ".."
// moved away from.
func TestCanonicalIDLeaf(t *testing.T) {
	tr := newTree(t)
	tr.apply(t, []op{{Write: "$SANDBOX/dir/f"}, {Link: []string{"$SANDBOX/dir/g", "$SANDBOX/dir/f"}},
		{Symlink: []string{"$SANDBOX/s", "dir/g"}}})
	e := tr.engine(t, suite{})
	for _, tt := range []struct {
		raw   string
		nlink uint64
	}{
		{raw: "dir/f", nlink: 2}, {raw: "s", nlink: 2}, {raw: "dir", nlink: 0}, {raw: "dir/f/../g", nlink: 0},
		{raw: "dir/missing", nlink: 0}, {raw: "dir/g/..", nlink: 0}, {raw: ".", nlink: 0},
	} {
		_, id, err := e.canon.canonicalID(tr.sandbox + "/" + tt.raw)
		if err != nil {
			if tt.nlink == 0 {
				continue
			}
			t.Fatalf("canonicalID(%q): %v", tt.raw, err)
		}
		if id.nlink != tt.nlink {
			t.Errorf("canonicalID(%q) nlink = %d, want %d", tt.raw, id.nlink, tt.nlink)
		}
	}
}
