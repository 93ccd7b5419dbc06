package minted

import (
	"context"
	"os"
	"path/filepath"
	"testing"

	"ironcurtain.dev/gateway/internal/session/workspace"
)

// TestWorkspacesLifecycle: with workspaces, each minted session gets its
// own directory at mint, named by its id; authentication names it; a
// revocation removes it; a mint that fails leaves nothing behind; the
// sweeper removes the workspaces of expired sessions only.
func TestWorkspacesLifecycle(t *testing.T) {
	st, db := newStore(t)
	m, err := workspace.Open(filepath.Join(t.TempDir(), "ws"), false)
	if err != nil {
		t.Fatal(err)
	}
	defer m.Close()
	st.WithWorkspaces(m, nil)
	ctx := context.Background()
	a, tokA := mint(t, st, Spec{Name: "a"})
	if want := filepath.Join(m.Root(), a.ID); a.Workspace != want {
		t.Fatalf("Mint: workspace %q, want %q", a.Workspace, want)
	}
	if got, err := st.Get(ctx, a.ID); err != nil || got.Workspace != a.Workspace {
		t.Fatalf("Get: workspace %q (%v), want %q", got.Workspace, err, a.Workspace)
	}
	b, tokB := mint(t, st, Spec{Name: "b"})
	c, _ := mint(t, st, Spec{Name: "c"})
	for _, s := range []struct {
		id  string
		tok Token
	}{{a.ID, tokA}, {b.ID, tokB}} {
		got, err := st.Authenticate(ctx, string(s.tok))
		if err != nil {
			t.Fatal(err)
		}
		want := filepath.Join(m.Root(), s.id)
		if got.Workspace != want {
			t.Fatalf("session %s: workspace %q, want %q", s.id, got.Workspace, want)
		}
		if fi, err := os.Lstat(want); err != nil || !fi.IsDir() {
			t.Fatalf("session %s: workspace not created: %v", s.id, err)
		}
	}
	if _, _, err := st.Revoke(ctx, a.ID, "alice", "done"); err != nil {
		t.Fatal(err)
	}
	if _, err := os.Lstat(filepath.Join(m.Root(), a.ID)); !os.IsNotExist(err) {
		t.Fatalf("revoked session's workspace still there: %v", err)
	}
	// A mint that fails after the workspace was created discards it.
	cancelled, cancel := context.WithCancel(ctx)
	cancel()
	if _, _, err := st.Mint(cancelled, Spec{Name: "x"}, "alice"); err == nil {
		t.Fatal("mint with a cancelled context succeeded")
	}
	ids, err := m.List()
	if err != nil {
		t.Fatal(err)
	}
	if len(ids) != 2 {
		t.Fatalf("workspaces after a failed mint: %v", ids)
	}
	// c expires; the sweeper removes its workspace and keeps b's.
	if _, err := db.Pool.Exec(ctx, `UPDATE agent_sessions SET created_at = now() - interval '2 hours', expires_at = now() - interval '1 second' WHERE id = $1`, c.ID); err != nil {
		t.Fatal(err)
	}
	done, err := m.Sweep(func(ids []string) (map[string]bool, error) { return st.ActiveIDs(ctx, ids) })
	if err != nil {
		t.Fatal(err)
	}
	if len(done) != 1 || done[0] != c.ID {
		t.Fatalf("swept %v, want [%s]", done, c.ID)
	}
	if _, err := os.Lstat(filepath.Join(m.Root(), b.ID)); err != nil {
		t.Fatalf("active session's workspace swept: %v", err)
	}
}
