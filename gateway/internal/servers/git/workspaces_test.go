package git

import (
	"context"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"testing"

	"ironcurtain.dev/gateway/internal/servers"
	"ironcurtain.dev/gateway/internal/session"
)

// TestWorkspacesIsolated: two sessions use the git server at once; each
// works in its own workspace's repository and is refused the other's in
// every way tried: its path, a path climbing out of its own workspace, a
// symlink in its own workspace, a repository whose .git file points into
// the other's, init, clone and worktree targets there.
func TestWorkspacesIsolated(t *testing.T) {
	root := ""
	g := newGenv(t, func(c *Config) {
		root = filepath.Join(filepath.Dir(c.Sandbox), "workspaces")
		c.WorkspaceRoot = root
		c.UnsafeAllowLocalRemotes = true
		c.UnsafeSkipApprovalBinding = true
		if err := os.MkdirAll(root, 0o755); err != nil {
			t.Fatal(err)
		}
	})
	a, b := filepath.Join(root, "sess_a"), filepath.Join(root, "sess_b")
	for _, dir := range []string{a, b} {
		repo := filepath.Join(dir, "repo")
		if err := os.MkdirAll(repo, 0o755); err != nil {
			t.Fatal(err)
		}
		rawGit(t, repo, "init", "-q")
		writeFile(t, filepath.Join(repo, "README"), "secret of "+filepath.Base(dir)+"\n")
		rawGit(t, repo, "add", "README")
		rawGit(t, repo, "commit", "-q", "-m", "initial of "+filepath.Base(dir))
	}
	for _, p := range [][2]string{{a, b}, {b, a}} {
		own, other := p[0], p[1]
		if err := os.Symlink(filepath.Join(other, "repo"), filepath.Join(own, "link")); err != nil {
			t.Fatal(err)
		}
		gf := filepath.Join(own, "gitfile")
		if err := os.MkdirAll(gf, 0o755); err != nil {
			t.Fatal(err)
		}
		writeFile(t, filepath.Join(gf, ".git"), "gitdir: "+filepath.Join(other, "repo", ".git")+"\n")
	}
	var wg sync.WaitGroup
	for _, p := range [][2]string{{a, b}, {b, a}} {
		own, other := p[0], p[1]
		wg.Add(1)
		go func() {
			defer wg.Done()
			ctx := session.WithSession(servers.WithCallInfo(context.Background(), servers.CallInfo{}), session.Session{ID: filepath.Base(own), Workspace: own})
			call := func(tool string, args map[string]any) servers.Result {
				res, err := g.srv.Call(ctx, tool, args)
				if err != nil {
					t.Errorf("%s: %v", tool, err)
				}
				return res
			}
			if res := call("log", map[string]any{"path": filepath.Join(own, "repo")}); res.IsError || !strings.Contains(resultText(res), "initial of "+filepath.Base(own)) {
				t.Errorf("session %s own log: %q", filepath.Base(own), resultText(res))
			}
			name := filepath.Base(other)
			for _, c := range []struct {
				tool string
				args map[string]any
			}{
				{"log", map[string]any{"path": filepath.Join(other, "repo")}},
				{"log", map[string]any{"path": own + "/../" + name + "/repo"}},
				{"log", map[string]any{"path": filepath.Join(own, "link")}},
				{"log", map[string]any{"path": filepath.Join(own, "gitfile")}},
				{"log", map[string]any{"path": filepath.Join(root, strings.ToUpper(name), "repo")}},
				{"log", map[string]any{"path": g.sandbox}},
				{"init", map[string]any{"path": filepath.Join(other, "new")}},
				{"clone", map[string]any{"url": filepath.Join(own, "repo"), "path": filepath.Join(other, "clone")}},
				{"worktree", map[string]any{"path": filepath.Join(own, "repo"), "operation": "add", "worktree_path": filepath.Join(other, "wt")}},
			} {
				res := call(c.tool, c.args)
				msg := resultText(res)
				if !res.IsError || strings.Contains(msg, "initial of "+name) || !strings.Contains(msg, "sandbox") && !strings.Contains(msg, "not canonical") {
					t.Errorf("session %s %s %v: %q, want refused as outside its sandbox", filepath.Base(own), c.tool, c.args, msg)
				}
			}
		}()
	}
	wg.Wait()
	for _, p := range []string{filepath.Join(b, "new"), filepath.Join(b, "clone"), filepath.Join(b, "wt"), filepath.Join(a, "new"), filepath.Join(a, "clone"), filepath.Join(a, "wt")} {
		if _, err := os.Lstat(p); err == nil {
			t.Errorf("%s was created in another session's workspace", p)
		}
	}
	// The static session cannot reach a workspace.
	if res := g.call("log", map[string]any{"path": filepath.Join(a, "repo")}); !res.IsError {
		t.Errorf("static session read a workspace's log: %q", resultText(res))
	}
}

func resultText(r servers.Result) string {
	var sb strings.Builder
	for _, c := range r.Content {
		sb.WriteString(c.Text)
	}
	return sb.String()
}
