package git

import (
	"os"
	"path/filepath"
	"strings"
	"testing"
)

// localCase is one call on a fresh repository ("repo" in the sandbox, one
// commit on main with README).
type localCase struct {
	name    string
	setup   func(g *genv, repo string)
	tool    string
	args    func(repo string) map[string]any
	wantErr string
	check   func(t *testing.T, g *genv, repo, out string)
}

func runLocal(t *testing.T, cases []localCase) {
	t.Helper()
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			g := newGenv(t, nil)
			repo := g.repo("repo")
			if tc.setup != nil {
				tc.setup(g, repo)
			}
			res := g.call(tc.tool, tc.args(repo))
			if tc.wantErr != "" {
				mustFail(t, res, tc.wantErr)
				return
			}
			out := mustOK(t, res)
			if tc.check != nil {
				tc.check(t, g, repo, out)
			}
		})
	}
}

func contains(subs ...string) func(*testing.T, *genv, string, string) {
	return func(t *testing.T, _ *genv, _, out string) {
		t.Helper()
		for _, s := range subs {
			if !strings.Contains(out, s) {
				t.Fatalf("output lacks %q:\n%s", s, out)
			}
		}
	}
}

func at(repo string, kv ...any) map[string]any {
	m := map[string]any{"path": repo}
	for i := 0; i+1 < len(kv); i += 2 {
		m[kv[i].(string)] = kv[i+1]
	}
	return m
}

func modify(g *genv, repo string) { writeFile(g.t, filepath.Join(repo, "README"), "hello\nworld\n") }

func TestReadTools(t *testing.T) {
	runLocal(t, []localCase{
		{name: "status clean", tool: "status", args: func(r string) map[string]any { return at(r) }, check: contains("On branch main", "nothing to commit")},
		{name: "status short", tool: "status", setup: modify, args: func(r string) map[string]any { return at(r, "short", true) }, check: contains("## main", " M README")},
		{name: "status from a subdirectory", tool: "status", setup: func(g *genv, r string) { writeFile(g.t, filepath.Join(r, "sub/x"), "x") },
			args: func(r string) map[string]any { return at(filepath.Join(r, "sub")) }, check: contains("sub/x")},
		{name: "diff work tree", tool: "diff", setup: modify, args: func(r string) map[string]any { return at(r) }, check: contains("+world")},
		{name: "diff staged", tool: "diff", setup: func(g *genv, r string) { modify(g, r); rawGit(g.t, r, "add", "README") },
			args: func(r string) map[string]any { return at(r, "staged", true) }, check: contains("+world")},
		{name: "diff between revisions", tool: "diff", setup: func(g *genv, r string) {
			modify(g, r)
			rawGit(g.t, r, "commit", "-qam", "second")
		}, args: func(r string) map[string]any { return at(r, "base", "HEAD~1", "target", "HEAD", "stat", true) }, check: contains("README | 1 +")},
		{name: "diff limited to a path", tool: "diff", setup: func(g *genv, r string) { modify(g, r); writeFile(g.t, filepath.Join(r, "other"), "o") },
			args: func(r string) map[string]any { return at(r, "paths", []any{filepath.Join(r, "README")}) }, check: contains("README")},
		{name: "diff nothing", tool: "diff", args: func(r string) map[string]any { return at(r) }, check: contains("(no differences)")},
		{name: "diff target without base", tool: "diff", args: func(r string) map[string]any { return at(r, "target", "HEAD") }, wantErr: "target needs base"},
		{name: "log", tool: "log", args: func(r string) map[string]any { return at(r, "oneline", true) }, check: contains("initial")},
		{name: "log max count", tool: "log", setup: func(g *genv, r string) { rawGit(g.t, r, "commit", "-q", "--allow-empty", "-m", "second") },
			args: func(r string) map[string]any { return at(r, "max_count", 1.0, "oneline", true) },
			check: func(t *testing.T, _ *genv, _, out string) {
				if strings.Contains(out, "initial") || !strings.Contains(out, "second") {
					t.Fatalf("max_count ignored: %s", out)
				}
			}},
		{name: "log range", tool: "log", setup: func(g *genv, r string) {
			rawGit(g.t, r, "switch", "-q", "-c", "feature")
			rawGit(g.t, r, "commit", "-q", "--allow-empty", "-m", "on-feature")
		}, args: func(r string) map[string]any { return at(r, "revision", "main..feature", "oneline", true) }, check: contains("on-feature")},
		{name: "show head", tool: "show", args: func(r string) map[string]any { return at(r) }, check: contains("initial", "+hello")},
		{name: "show a file at a revision", tool: "show", args: func(r string) map[string]any { return at(r, "revision", "HEAD:README") }, check: contains("hello")},
		{name: "show unknown revision", tool: "show", args: func(r string) map[string]any { return at(r, "revision", "nope") }, wantErr: "git show failed"},
		{name: "blame", tool: "blame", args: func(r string) map[string]any { return at(r, "file", filepath.Join(r, "README")) }, check: contains("Test", "hello")},
		{name: "blame lines", tool: "blame", setup: func(g *genv, r string) { modify(g, r); rawGit(g.t, r, "commit", "-qam", "second") },
			args: func(r string) map[string]any {
				return at(r, "file", filepath.Join(r, "README"), "start_line", 2.0, "end_line", 2.0)
			},
			check: func(t *testing.T, _ *genv, _, out string) {
				if strings.Contains(out, "hello") || !strings.Contains(out, "world") {
					t.Fatalf("line range ignored: %s", out)
				}
			}},
		{name: "blame a file outside the repo", tool: "blame", args: func(r string) map[string]any { return at(r, "file", filepath.Dir(r)+"/x") }, wantErr: "outside the repository"},
	})
}

func TestChangeTools(t *testing.T) {
	head := func(t *testing.T, g *genv, r string) string { return rawGit(t, r, "log", "-1", "--format=%s") }
	runLocal(t, []localCase{
		{name: "add files", tool: "add", setup: modify, args: func(r string) map[string]any { return at(r, "files", []any{filepath.Join(r, "README")}) },
			check: func(t *testing.T, _ *genv, r, out string) {
				if got := rawGit(t, r, "diff", "--cached", "--name-only"); got != "README" {
					t.Fatalf("staged %q (%s)", got, out)
				}
			}},
		{name: "add all", tool: "add", setup: func(g *genv, r string) { writeFile(g.t, filepath.Join(r, "new.txt"), "n") },
			args: func(r string) map[string]any { return at(r, "all", true) }, check: contains("add 'new.txt'")},
		{name: "add nothing named", tool: "add", args: func(r string) map[string]any { return at(r) }, wantErr: "name files"},
		{name: "add the git dir", tool: "add", args: func(r string) map[string]any { return at(r, "files", []any{filepath.Join(r, ".git/config")}) }, wantErr: ".git directory"},
		{name: "commit", tool: "commit", setup: func(g *genv, r string) { modify(g, r); rawGit(g.t, r, "add", "README") },
			args: func(r string) map[string]any { return at(r, "message", "second commit\n\nbody") },
			check: func(t *testing.T, g *genv, r, out string) {
				if head(t, g, r) != "second commit" {
					t.Fatalf("head is %q", head(t, g, r))
				}
				if author := rawGit(t, r, "log", "-1", "--format=%an <%ae>"); author != DefaultAuthorName+" <"+DefaultAuthorEmail+">" {
					t.Fatalf("author %q", author)
				}
			}},
		{name: "commit message starting with a dash", tool: "commit", setup: func(g *genv, r string) { modify(g, r) },
			args: func(r string) map[string]any { return at(r, "message", "--amend", "all", true) },
			check: func(t *testing.T, g *genv, r, _ string) {
				if head(t, g, r) != "--amend" || rawGit(t, r, "rev-list", "--count", "HEAD") != "2" {
					t.Fatal("a message became an option")
				}
			}},
		{name: "commit amend", tool: "commit", args: func(r string) map[string]any { return at(r, "message", "reworded", "amend", true) },
			check: func(t *testing.T, g *genv, r, _ string) {
				if head(t, g, r) != "reworded" || rawGit(t, r, "rev-list", "--count", "HEAD") != "1" {
					t.Fatal("amend failed")
				}
			}},
		{name: "commit nothing", tool: "commit", args: func(r string) map[string]any { return at(r, "message", "x") }, wantErr: "git commit failed"},
		{name: "commit empty message", tool: "commit", args: func(r string) map[string]any { return at(r, "message", "  ") }, wantErr: "message is empty"},
		{name: "branch create and list", tool: "branch", setup: func(g *genv, r string) { rawGit(g.t, r, "branch", "other") },
			args: func(r string) map[string]any { return at(r) }, check: contains("main", "other")},
		{name: "branch create", tool: "branch", args: func(r string) map[string]any { return at(r, "operation", "create", "name", "feature/x") },
			check: func(t *testing.T, _ *genv, r, _ string) { rawGit(t, r, "rev-parse", "--verify", "feature/x") }},
		{name: "branch create invalid", tool: "branch", args: func(r string) map[string]any { return at(r, "operation", "create", "name", "a..b") }, wantErr: "not a valid ref name"},
		{name: "branch delete", tool: "branch", setup: func(g *genv, r string) { rawGit(g.t, r, "branch", "gone") },
			args: func(r string) map[string]any { return at(r, "operation", "delete", "name", "gone") }, check: contains("Deleted branch gone")},
		{name: "branch delete unmerged needs force", tool: "branch", setup: func(g *genv, r string) {
			rawGit(g.t, r, "switch", "-q", "-c", "wip")
			rawGit(g.t, r, "commit", "-q", "--allow-empty", "-m", "wip")
			rawGit(g.t, r, "switch", "-q", "main")
		}, args: func(r string) map[string]any { return at(r, "operation", "delete", "name", "wip") }, wantErr: "not fully merged"},
		{name: "branch rename", tool: "branch", setup: func(g *genv, r string) { rawGit(g.t, r, "branch", "old") },
			args:  func(r string) map[string]any { return at(r, "operation", "rename", "name", "old", "new_name", "new") },
			check: func(t *testing.T, _ *genv, r, _ string) { rawGit(t, r, "rev-parse", "--verify", "refs/heads/new") }},
		{name: "checkout a branch", tool: "checkout", setup: func(g *genv, r string) { rawGit(g.t, r, "branch", "other") },
			args: func(r string) map[string]any { return at(r, "target", "other") },
			check: func(t *testing.T, _ *genv, r, _ string) {
				if b := rawGit(t, r, "branch", "--show-current"); b != "other" {
					t.Fatalf("on %q", b)
				}
			}},
		{name: "checkout create", tool: "checkout", args: func(r string) map[string]any { return at(r, "target", "topic", "create_branch", true) },
			check: func(t *testing.T, _ *genv, r, _ string) {
				if b := rawGit(t, r, "branch", "--show-current"); b != "topic" {
					t.Fatalf("on %q", b)
				}
			}},
		{name: "checkout detach", tool: "checkout", args: func(r string) map[string]any { return at(r, "target", "HEAD", "detach", true) },
			check: func(t *testing.T, _ *genv, r, _ string) {
				if b := rawGit(t, r, "branch", "--show-current"); b != "" {
					t.Fatalf("still on %q", b)
				}
			}},
		{name: "checkout restores paths", tool: "checkout", setup: modify, args: func(r string) map[string]any { return at(r, "paths", []any{filepath.Join(r, "README")}) },
			check: func(t *testing.T, _ *genv, r, _ string) {
				if b, _ := os.ReadFile(filepath.Join(r, "README")); string(b) != "hello\n" {
					t.Fatalf("not restored: %q", b)
				}
			}},
		{name: "merge", tool: "merge", setup: func(g *genv, r string) {
			rawGit(g.t, r, "switch", "-q", "-c", "feature")
			writeFile(g.t, filepath.Join(r, "f"), "f")
			rawGit(g.t, r, "add", "f")
			rawGit(g.t, r, "commit", "-q", "-m", "feature work")
			rawGit(g.t, r, "switch", "-q", "main")
		}, args: func(r string) map[string]any { return at(r, "branch", "feature", "no_ff", true) },
			check: func(t *testing.T, _ *genv, r, _ string) {
				if n := rawGit(t, r, "rev-list", "--count", "--merges", "HEAD"); n != "1" {
					t.Fatalf("%s merge commits", n)
				}
			}},
		{name: "merge conflict is reported", tool: "merge", setup: conflictSetup, args: func(r string) map[string]any { return at(r, "branch", "feature") }, wantErr: "CONFLICT"},
		{name: "merge abort", tool: "merge", setup: func(g *genv, r string) {
			conflictSetup(g, r)
			rawGitMayFail(g.t, r, "merge", "feature")
		}, args: func(r string) map[string]any { return at(r, "operation", "abort") }},
		{name: "rebase", tool: "rebase", setup: func(g *genv, r string) {
			rawGit(g.t, r, "switch", "-q", "-c", "feature")
			rawGit(g.t, r, "commit", "-q", "--allow-empty", "-m", "feature work")
			rawGit(g.t, r, "switch", "-q", "main")
			rawGit(g.t, r, "commit", "-q", "--allow-empty", "-m", "main work")
			rawGit(g.t, r, "switch", "-q", "feature")
		}, args: func(r string) map[string]any { return at(r, "upstream", "main") },
			check: func(t *testing.T, _ *genv, r, _ string) {
				rawGit(t, r, "merge-base", "--is-ancestor", "main", "feature")
			}},
		{name: "cherry-pick", tool: "cherry_pick", setup: func(g *genv, r string) {
			rawGit(g.t, r, "switch", "-q", "-c", "feature")
			writeFile(g.t, filepath.Join(r, "picked.txt"), "p")
			rawGit(g.t, r, "add", "picked.txt")
			rawGit(g.t, r, "commit", "-q", "-m", "picked")
			rawGit(g.t, r, "switch", "-q", "main")
		}, args: func(r string) map[string]any { return at(r, "commits", []any{"feature"}) },
			check: func(t *testing.T, g *genv, r, _ string) {
				if head(t, g, r) != "picked" {
					t.Fatal("not picked")
				}
			}},
		{name: "reset soft", tool: "reset", setup: func(g *genv, r string) { rawGit(g.t, r, "commit", "-q", "--allow-empty", "-m", "second") },
			args: func(r string) map[string]any { return at(r, "mode", "soft", "target", "HEAD~1") },
			check: func(t *testing.T, g *genv, r, _ string) {
				if head(t, g, r) != "initial" {
					t.Fatal("not reset")
				}
			}},
		{name: "reset hard", tool: "reset", setup: modify, args: func(r string) map[string]any { return at(r, "mode", "hard") },
			check: func(t *testing.T, _ *genv, r, _ string) {
				if b, _ := os.ReadFile(filepath.Join(r, "README")); string(b) != "hello\n" {
					t.Fatal("not reset")
				}
			}},
		{name: "reset unstages paths", tool: "reset", setup: func(g *genv, r string) { modify(g, r); rawGit(g.t, r, "add", "README") },
			args: func(r string) map[string]any { return at(r, "paths", []any{filepath.Join(r, "README")}) },
			check: func(t *testing.T, _ *genv, r, _ string) {
				if got := rawGit(t, r, "diff", "--cached", "--name-only"); got != "" {
					t.Fatalf("still staged: %q", got)
				}
			}},
		{name: "stash push and list", tool: "stash", setup: modify, args: func(r string) map[string]any { return at(r, "message", "wip") },
			check: func(t *testing.T, _ *genv, r, _ string) {
				if !strings.Contains(rawGit(t, r, "stash", "list"), "wip") {
					t.Fatal("no stash")
				}
			}},
		{name: "stash pop", tool: "stash", setup: func(g *genv, r string) { modify(g, r); rawGit(g.t, r, "stash", "-q") },
			args: func(r string) map[string]any { return at(r, "operation", "pop") },
			check: func(t *testing.T, _ *genv, r, _ string) {
				if b, _ := os.ReadFile(filepath.Join(r, "README")); !strings.Contains(string(b), "world") {
					t.Fatal("not popped")
				}
			}},
		{name: "stash show", tool: "stash", setup: func(g *genv, r string) { modify(g, r); rawGit(g.t, r, "stash", "-q") },
			args: func(r string) map[string]any { return at(r, "operation", "show") }, check: contains("+world")},
		{name: "tag create annotated", tool: "tag", args: func(r string) map[string]any {
			return at(r, "operation", "create", "name", "v1.0", "message", "release one")
		}, check: func(t *testing.T, _ *genv, r, _ string) {
			if typ := rawGit(t, r, "cat-file", "-t", "v1.0"); typ != "tag" {
				t.Fatalf("tag type %q", typ)
			}
		}},
		{name: "tag list", tool: "tag", setup: func(g *genv, r string) { rawGit(g.t, r, "tag", "v0") }, args: func(r string) map[string]any { return at(r) }, check: contains("v0")},
		{name: "tag delete", tool: "tag", setup: func(g *genv, r string) { rawGit(g.t, r, "tag", "v0") },
			args: func(r string) map[string]any { return at(r, "operation", "delete", "name", "v0") }, check: contains("Deleted tag")},
	})
}

func conflictSetup(g *genv, r string) {
	rawGit(g.t, r, "switch", "-q", "-c", "feature")
	writeFile(g.t, filepath.Join(r, "README"), "feature\n")
	rawGit(g.t, r, "commit", "-qam", "feature")
	rawGit(g.t, r, "switch", "-q", "main")
	writeFile(g.t, filepath.Join(r, "README"), "main\n")
	rawGit(g.t, r, "commit", "-qam", "main")
}

func TestAdminTools(t *testing.T) {
	runLocal(t, []localCase{
		{name: "remote add https", tool: "remote", args: func(r string) map[string]any {
			return at(r, "operation", "add", "name", "origin", "url", "https://github.com/acme/app.git")
		}, check: func(t *testing.T, _ *genv, r, _ string) {
			if u := rawGit(t, r, "remote", "get-url", "origin"); u != "https://github.com/acme/app.git" {
				t.Fatalf("url %q", u)
			}
		}},
		{name: "remote add scp", tool: "remote", args: func(r string) map[string]any {
			return at(r, "operation", "add", "name", "up", "url", "git@github.com:acme/app.git")
		}},
		{name: "remote list and get_url", tool: "remote", setup: func(g *genv, r string) {
			rawGit(g.t, r, "remote", "add", "origin", "https://github.com/acme/app.git")
			rawGit(g.t, r, "remote", "set-url", "--push", "origin", "git@github.com:acme/app.git")
		}, args: func(r string) map[string]any { return at(r, "operation", "get_url", "name", "origin") },
			check: contains("fetch: https://github.com/acme/app.git", "push: git@github.com:acme/app.git")},
		{name: "remote remove", tool: "remote", setup: func(g *genv, r string) { rawGit(g.t, r, "remote", "add", "old", "https://github.com/a/b.git") },
			args: func(r string) map[string]any { return at(r, "operation", "remove", "name", "old") }},
		{name: "remote add bad name", tool: "remote", args: func(r string) map[string]any {
			return at(r, "operation", "add", "name", "a b", "url", "https://github.com/a/b.git")
		}, wantErr: "may only contain letters"},
		{name: "worktree add and list", tool: "worktree", args: func(r string) map[string]any {
			return at(r, "operation", "add", "worktree_path", filepath.Join(filepath.Dir(r), "wt"), "branch", "side", "create_branch", true)
		}, check: func(t *testing.T, g *genv, r, _ string) {
			out := mustOK(t, g.call("worktree", at(r)))
			if !strings.Contains(out, filepath.Join(filepath.Dir(r), "wt")) || !strings.Contains(out, "refs/heads/side") {
				t.Fatalf("list: %s", out)
			}
			// The linked worktree is itself usable.
			mustOK(t, g.call("status", at(filepath.Join(filepath.Dir(r), "wt"))))
			mustOK(t, g.call("worktree", at(r, "operation", "remove", "worktree_path", filepath.Join(filepath.Dir(r), "wt"))))
		}},
		{name: "worktree outside the sandbox", tool: "worktree", args: func(r string) map[string]any {
			return at(r, "operation", "add", "worktree_path", "/tmp/wt-escape", "branch", "x", "create_branch", true)
		}, wantErr: "outside the sandbox"},
	})
}

func TestInit(t *testing.T) {
	g := newGenv(t, nil)
	dir := filepath.Join(g.sandbox, "new", "proj")
	out := mustOK(t, g.call("init", map[string]any{"path": dir, "initial_branch": "trunk"}))
	if !strings.Contains(out, dir) {
		t.Fatalf("output %q", out)
	}
	if b := rawGit(t, dir, "symbolic-ref", "--short", "HEAD"); b != "trunk" {
		t.Fatalf("initial branch %q", b)
	}
	mustFail(t, g.call("init", map[string]any{"path": dir}), "already a git repository")
	mustFail(t, g.call("init", map[string]any{"path": g.sandbox}), "sandbox itself")
	mustFail(t, g.call("init", map[string]any{"path": filepath.Join(g.outside, "x")}), "outside the sandbox")
	if _, err := os.Stat(filepath.Join(g.outside, "x")); err == nil {
		t.Fatal("init created a directory outside the sandbox")
	}
}
