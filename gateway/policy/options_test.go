package policy

import (
	"context"
	"strings"
	"testing"
)

// TestNoRemoteResolver: an engine built without a resolver cannot read a
// repository's remotes, so a push (which needs them) is denied.
func TestNoRemoteResolver(t *testing.T) {
	s := suite{Setup: pushSetup()}
	tr := newTree(t)
	tr.apply(t, s.Setup)
	e := tr.engineWith(t, s)
	r := Request{Server: "git", Tool: "push", Args: map[string]any{"path": tr.sandbox + "/app", "remote": "origin", "branch": "feature"}}
	d := e.Evaluate(context.Background(), r).Decision
	if d.Status != Deny || d.Rule != RuleGitPush || !strings.Contains(d.Reason, "no git remote resolver") {
		t.Fatalf("decision %+v, want a denial for want of a resolver", d)
	}
	if d := tr.engine(t, s).Evaluate(context.Background(), r).Decision; d.Status != Allow {
		t.Fatalf("with the resolver: %+v, want allow", d)
	}
}

// TestWithFileSystem: the engine canonicalises paths through the file
// system it is given.
func TestWithFileSystem(t *testing.T) {
	s := suite{Setup: []op{{Write: "$SANDBOX/a.txt"}}}
	tr := newTree(t)
	tr.apply(t, s.Setup)
	cfs := &countFS{inner: osFS{}}
	e := tr.engineWith(t, s, withGit(t), WithFileSystem(cfs))
	cfs.n.Store(0)
	r := Request{Server: "filesystem", Tool: "read_text_file", Args: map[string]any{"path": tr.sandbox + "/a.txt"}}
	if d := e.Evaluate(context.Background(), r).Decision; d.Status != Allow {
		t.Fatalf("decision %+v, want allow", d)
	}
	if cfs.n.Load() == 0 {
		t.Fatal("the engine did not use the file system it was given")
	}
}
