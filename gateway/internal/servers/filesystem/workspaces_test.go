package filesystem

import (
	"context"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"testing"

	"ironcurtain.dev/gateway/internal/session"
)

// wsEnv is a static sandbox and two session workspaces, A and B, below a
// workspace root, served by one server.
type wsEnv struct {
	srv        *Server
	sandbox    string
	root, a, b string
}

const otherSecret = "OTHER-SESSION-SECRET"

func newWSEnv(t *testing.T) *wsEnv {
	t.Helper()
	base, err := filepath.EvalSymlinks(t.TempDir())
	if err != nil {
		t.Fatal(err)
	}
	e := &wsEnv{sandbox: filepath.Join(base, "sandbox"), root: filepath.Join(base, "workspaces")}
	e.a, e.b = filepath.Join(e.root, "sess_a"), filepath.Join(e.root, "sess_b")
	for _, d := range []string{e.sandbox, e.a, e.b} {
		if err := os.MkdirAll(d, 0o755); err != nil {
			t.Fatal(err)
		}
	}
	mustWrite(t, filepath.Join(e.sandbox, "static.txt"), otherSecret)
	for _, p := range [][2]string{{e.a, e.b}, {e.b, e.a}} {
		own, other := p[0], p[1]
		mustWrite(t, filepath.Join(own, "secret.txt"), otherSecret)
		mustWrite(t, filepath.Join(own, "own.txt"), "mine")
		for name, target := range map[string]string{
			"link-abs":    filepath.Join(other, "secret.txt"),
			"link-rel":    "../" + filepath.Base(other) + "/secret.txt",
			"link-dir":    other,
			"link-static": filepath.Join(e.sandbox, "static.txt"),
		} {
			if err := os.Symlink(target, filepath.Join(own, name)); err != nil {
				t.Fatal(err)
			}
		}
	}
	// A hard link in A to B's secret (the agent cannot make one; a test can).
	if err := os.Link(filepath.Join(e.b, "secret.txt"), filepath.Join(e.a, "hard.txt")); err != nil {
		t.Fatal(err)
	}
	srv, err := New(Config{Root: e.sandbox, WorkspaceRoot: e.root})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { srv.Close() })
	e.srv = srv
	return e
}

// TestWorkspacesIsolated: two sessions call at once; each is confined to
// its own workspace by the server's os.Root whatever path it sends (the
// server is the last line of defence: these are paths a policy would
// already refuse), and its own files work by their workspace path.
func TestWorkspacesIsolated(t *testing.T) {
	e := newWSEnv(t)
	var wg sync.WaitGroup
	for _, p := range [][2]string{{e.a, e.b}, {e.b, e.a}} {
		own, other := p[0], p[1]
		wg.Add(1)
		go func() {
			defer wg.Done()
			ctx := session.WithSession(context.Background(), session.Session{ID: filepath.Base(own), Workspace: own})
			for _, path := range []string{
				filepath.Join(other, "secret.txt"),
				own + "/../" + filepath.Base(other) + "/secret.txt",
				filepath.Join(own, "link-abs"),
				filepath.Join(own, "link-rel"),
				filepath.Join(own, "link-dir", "secret.txt"),
				filepath.Join(own, "link-static"),
				filepath.Join(e.root, strings.ToUpper(filepath.Base(other)), "secret.txt"),
				filepath.Join(e.sandbox, "static.txt"),
				"/workspace/secret.txt",
			} {
				res, err := e.srv.Call(ctx, "read_text_file", map[string]any{"path": path})
				if err != nil || !res.IsError || strings.Contains(text(res), otherSecret) {
					t.Errorf("session %s read %s: error %v, result %q, want refused", filepath.Base(own), path, err, text(res))
				}
				res, err = e.srv.Call(ctx, "write_file", map[string]any{"path": path, "content": "x"})
				if err != nil || !res.IsError {
					t.Errorf("session %s write %s: error %v, result %q, want refused", filepath.Base(own), path, err, text(res))
				}
			}
			if own == e.a { // writing through the hard link into B's file
				res, _ := e.srv.Call(ctx, "write_file", map[string]any{"path": filepath.Join(own, "hard.txt"), "content": "x"})
				if !res.IsError {
					t.Errorf("write through a hard link: %q, want refused", text(res))
				}
			}
			res, err := e.srv.Call(ctx, "read_text_file", map[string]any{"path": filepath.Join(own, "own.txt")})
			if err != nil || res.IsError || text(res) != "mine" {
				t.Errorf("session %s own read: %v %q", filepath.Base(own), err, text(res))
			}
			res, err = e.srv.Call(ctx, "write_file", map[string]any{"path": filepath.Join(own, "new.txt"), "content": "n"})
			if err != nil || res.IsError {
				t.Errorf("session %s own write: %v %q", filepath.Base(own), err, text(res))
			}
			res, _ = e.srv.Call(ctx, "list_allowed_directories", map[string]any{})
			if !strings.Contains(text(res), own) || strings.Contains(text(res), e.sandbox) {
				t.Errorf("session %s allowed directories: %q", filepath.Base(own), text(res))
			}
		}()
	}
	wg.Wait()
	if got := mustRead(t, filepath.Join(e.b, "secret.txt")); got != otherSecret {
		t.Fatalf("B's secret changed: %q", got)
	}
	// The static session keeps the configured sandbox and cannot reach a
	// workspace.
	res, _ := e.srv.Call(context.Background(), "read_text_file", map[string]any{"path": filepath.Join(e.a, "own.txt")})
	if !res.IsError {
		t.Fatalf("static session read a workspace: %q", text(res))
	}
}

// TestWorkspaceRefused: a session workspace that is not a directory
// directly below the root is refused, never served from somewhere else.
func TestWorkspaceRefused(t *testing.T) {
	e := newWSEnv(t)
	if err := os.Symlink(e.b, filepath.Join(e.root, "sess_link")); err != nil {
		t.Fatal(err)
	}
	for _, ws := range []string{e.root, e.sandbox, filepath.Join(e.a, "sub"), filepath.Join(e.root, "sess_link"), filepath.Join(e.root, "missing"), e.a + "/", e.root + "/sess_a/../sess_b"} {
		ctx := session.WithSession(context.Background(), session.Session{ID: "x", Workspace: ws})
		res, err := e.srv.Call(ctx, "read_text_file", map[string]any{"path": filepath.Join(e.b, "secret.txt")})
		if err != nil || !res.IsError || !strings.Contains(text(res), errWorkspace.Error()) {
			t.Errorf("workspace %q: %v %q, want %q", ws, err, text(res), errWorkspace)
		}
	}
	noRoot, err := New(Config{Root: e.sandbox})
	if err != nil {
		t.Fatal(err)
	}
	defer noRoot.Close()
	ctx := session.WithSession(context.Background(), session.Session{ID: "x", Workspace: e.a})
	if res, _ := noRoot.Call(ctx, "read_text_file", map[string]any{"path": filepath.Join(e.a, "own.txt")}); !res.IsError {
		t.Fatalf("server without a workspace root served a workspace: %q", text(res))
	}
	for _, bad := range []string{e.sandbox, filepath.Join(e.sandbox, "ws")} {
		if err := os.MkdirAll(bad, 0o755); err != nil {
			t.Fatal(err)
		}
		if s, err := New(Config{Root: e.sandbox, WorkspaceRoot: bad}); err == nil {
			s.Close()
			t.Errorf("WorkspaceRoot %q overlapping the sandbox accepted", bad)
		}
	}
}
