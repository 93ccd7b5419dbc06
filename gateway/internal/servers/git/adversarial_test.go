package git

import (
	"context"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"

	"ironcurtain.dev/gateway/internal/servers"
)

// everyTool runs a representative call of each tool that opens an existing
// repository; the config tests expect each one to be refused.
func everyTool(repo string) []struct {
	tool string
	args map[string]any
} {
	return []struct {
		tool string
		args map[string]any
	}{
		{tool: "status", args: at(repo)},
		{tool: "diff", args: at(repo)},
		{tool: "log", args: at(repo)},
		{tool: "show", args: at(repo)},
		{tool: "blame", args: at(repo, "file", filepath.Join(repo, "README"))},
		{tool: "add", args: at(repo, "all", true)},
		{tool: "commit", args: at(repo, "message", "x", "all", true, "allow_empty", true)},
		{tool: "branch", args: at(repo, "operation", "create", "name", "b")},
		{tool: "checkout", args: at(repo, "target", "b2", "create_branch", true)},
		{tool: "merge", args: at(repo, "branch", "HEAD")},
		{tool: "rebase", args: at(repo, "upstream", "HEAD")},
		{tool: "reset", args: at(repo, "mode", "hard")},
		{tool: "stash", args: at(repo)},
		{tool: "tag", args: at(repo, "operation", "create", "name", "t")},
		{tool: "remote", args: at(repo)},
		{tool: "worktree", args: at(repo)},
		{tool: "fetch", args: at(repo)},
		{tool: "pull", args: at(repo)},
		{tool: "push", args: at(repo, "branch", "b")},
	}
}

// TestExecutableConfigIsRefused: a workspace whose config (or worktree
// config, or an included file) defines a setting that runs a program is
// refused by every tool, and the program never runs.
func TestExecutableConfigIsRefused(t *testing.T) {
	type setup func(g *genv, repo, payload string)
	set := func(kv ...string) setup {
		return func(g *genv, repo, payload string) {
			for i := 0; i+1 < len(kv); i += 2 {
				rawGit(g.t, repo, "config", kv[i], strings.ReplaceAll(kv[i+1], "PAYLOAD", payload))
			}
		}
	}
	attrs := func(line string, s setup) setup {
		return func(g *genv, repo, payload string) {
			writeFile(g.t, filepath.Join(repo, ".gitattributes"), line+"\n")
			writeFile(g.t, filepath.Join(repo, "README"), "changed\n")
			s(g, repo, payload)
		}
	}
	cases := []struct {
		name  string
		setup setup
	}{
		{name: "core.fsmonitor", setup: set("core.fsmonitor", "PAYLOAD")},
		{name: "core.sshCommand", setup: set("core.sshCommand", "PAYLOAD")},
		{name: "filter clean driver", setup: attrs("* filter=x", set("filter.x.clean", "PAYLOAD"))},
		{name: "filter smudge driver", setup: attrs("* filter=x", set("filter.x.smudge", "PAYLOAD"))},
		{name: "filter process driver", setup: attrs("* filter=x", set("filter.x.process", "PAYLOAD"))},
		{name: "diff textconv", setup: attrs("* diff=x", set("diff.x.textconv", "PAYLOAD"))},
		{name: "diff command", setup: attrs("* diff=x", set("diff.x.command", "PAYLOAD"))},
		{name: "diff external", setup: set("diff.external", "PAYLOAD")},
		{name: "merge driver", setup: attrs("* merge=x", set("merge.x.driver", "PAYLOAD"))},
		{name: "core.pager", setup: set("core.pager", "PAYLOAD")},
		{name: "core.editor", setup: set("core.editor", "PAYLOAD")},
		{name: "sequence.editor", setup: set("sequence.editor", "PAYLOAD")},
		{name: "credential helper", setup: set("credential.helper", "!PAYLOAD")},
		{name: "gpg program", setup: set("gpg.program", "PAYLOAD", "commit.gpgSign", "true")},
		{name: "shell alias", setup: set("alias.status", "!PAYLOAD")},
		{name: "upload-pack hook", setup: set("uploadpack.packObjectsHook", "PAYLOAD")},
		{name: "remote upload-pack", setup: set("remote.origin.url", "https://github.com/a/b.git", "remote.origin.uploadpack", "PAYLOAD")},
		{name: "ext insteadOf", setup: set("url.ext::PAYLOAD.insteadOf", "https://github.com/")},
		{name: "core.gitProxy", setup: set("core.gitProxy", "PAYLOAD")},
		{name: "include.path", setup: func(g *genv, repo, payload string) {
			inc := filepath.Join(g.outside, "inc.cfg")
			writeFile(g.t, inc, "[core]\n\tfsmonitor = "+payload+"\n")
			rawGit(g.t, repo, "config", "include.path", inc)
		}},
		{name: "includeIf", setup: func(g *genv, repo, payload string) {
			inc := filepath.Join(g.outside, "inc.cfg")
			writeFile(g.t, inc, "[core]\n\tfsmonitor = "+payload+"\n")
			rawGit(g.t, repo, "config", "includeIf.gitdir:/.path", inc)
		}},
		{name: "worktree config", setup: func(g *genv, repo, payload string) {
			rawGit(g.t, repo, "config", "extensions.worktreeConfig", "true")
			rawGit(g.t, repo, "config", "--worktree", "core.fsmonitor", payload)
		}},
		{name: "config written by hand with odd case", setup: func(g *genv, repo, payload string) {
			f, err := os.OpenFile(filepath.Join(repo, ".git", "config"), os.O_APPEND|os.O_WRONLY, 0)
			if err != nil {
				g.t.Fatal(err)
			}
			defer f.Close()
			if _, err := f.WriteString("[CORE]\n\tFsMonitor = \"" + payload + "\"\n"); err != nil {
				g.t.Fatal(err)
			}
		}},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			g := newGenv(t, nil)
			repo := g.repo("repo")
			tc.setup(g, repo, g.payload())
			for _, call := range everyTool(repo) {
				res := g.call(call.tool, call.args)
				if !res.IsError {
					t.Fatalf("%s ran on a repository with executable config: %s", call.tool, text(res))
				}
				if !strings.Contains(text(res), "run programs") {
					t.Fatalf("%s: unexpected refusal %q", call.tool, text(res))
				}
				g.assertNoMarker()
			}
		})
	}
}

// TestHooksNeverRun: every hook in .git/hooks, and hooks in a directory
// named by core.hooksPath, stay inert while every tool works normally.
func TestHooksNeverRun(t *testing.T) {
	hooks := []string{"pre-commit", "prepare-commit-msg", "commit-msg", "post-commit", "pre-rebase", "post-checkout",
		"post-merge", "pre-push", "pre-auto-gc", "post-rewrite", "reference-transaction", "pre-merge-commit",
		"post-index-change", "pre-applypatch", "post-applypatch", "applypatch-msg", "fsmonitor-watchman", "sendemail-validate",
		"pre-receive", "update", "post-receive", "post-update", "proc-receive", "push-to-checkout"}
	for _, variant := range []string{".git/hooks", "core.hooksPath"} {
		t.Run(variant, func(t *testing.T) {
			g := newGenv(t, func(c *Config) { c.UnsafeAllowLocalRemotes = true; c.UnsafeSkipApprovalBinding = true })
			seed := g.repo("seed")
			bare := g.bare("remote.git", seed)
			repo := filepath.Join(g.sandbox, "repo")
			mustOK(t, g.call("clone", map[string]any{"url": bare, "path": repo}))
			payload := g.payload()
			dir := filepath.Join(repo, ".git", "hooks")
			if variant == "core.hooksPath" {
				dir = filepath.Join(repo, "myhooks")
				rawGit(t, repo, "config", "core.hooksPath", dir)
			}
			for _, h := range hooks {
				writeFile(t, filepath.Join(dir, h), "#!/bin/sh\n'"+payload+"'\n")
				if err := os.Chmod(filepath.Join(dir, h), 0o755); err != nil {
					t.Fatal(err)
				}
			}
			writeFile(t, filepath.Join(repo, "a.txt"), "a\n")
			writeFile(t, filepath.Join(repo, "t.txt"), "t\n")
			steps := []struct {
				tool string
				args map[string]any
			}{
				{tool: "add", args: at(repo, "files", []any{filepath.Join(repo, "a.txt")})},
				{tool: "commit", args: at(repo, "message", "with hooks")},
				{tool: "checkout", args: at(repo, "target", "side", "create_branch", true)},
				{tool: "commit", args: at(repo, "message", "side work", "allow_empty", true)},
				{tool: "checkout", args: at(repo, "target", "main")},
				{tool: "merge", args: at(repo, "branch", "side", "no_ff", true)},
				{tool: "branch", args: at(repo, "operation", "create", "name", "topic")},
				{tool: "checkout", args: at(repo, "target", "topic")},
				{tool: "add", args: at(repo, "files", []any{filepath.Join(repo, "t.txt")})},
				{tool: "commit", args: at(repo, "message", "topic work")},
				{tool: "rebase", args: at(repo, "upstream", "main")},
				{tool: "commit", args: at(repo, "message", "amended", "amend", true, "allow_empty", true)},
				{tool: "checkout", args: at(repo, "target", "main")},
				{tool: "cherry_pick", args: at(repo, "commits", []any{"topic"})},
				{tool: "tag", args: at(repo, "operation", "create", "name", "v1", "message", "tagged")},
				{tool: "stash", args: at(repo, "operation", "list")},
				{tool: "reset", args: at(repo, "mode", "hard", "target", "HEAD~1")},
				{tool: "fetch", args: at(repo)},
				{tool: "pull", args: at(repo)},
				{tool: "worktree", args: at(repo, "operation", "add", "worktree_path", filepath.Join(g.sandbox, "wt"), "branch", "wtb", "create_branch", true)},
			}
			for _, st := range steps {
				mustOK(t, g.call(st.tool, st.args))
				g.assertNoMarker()
			}
		})
	}
}

// TestFixedNameSettingsRaceIsHarmless: core.fsmonitor, core.pager,
// core.hooksPath and friends are also overridden on the command line, so
// writing them into .git/config between the scan and the run (the scan
// cache makes that window wide) achieves nothing.
func TestFixedNameSettingsRaceIsHarmless(t *testing.T) {
	g := newGenv(t, nil)
	repo := g.repo("repo")
	payload := g.payload()
	hooks := filepath.Join(g.outside, "hooks")
	for _, h := range []string{"pre-commit", "post-commit", "reference-transaction"} {
		writeFile(t, filepath.Join(hooks, h), "#!/bin/sh\n'"+payload+"'\n")
		if err := os.Chmod(filepath.Join(hooks, h), 0o755); err != nil {
			t.Fatal(err)
		}
	}
	cfgPath := filepath.Join(repo, ".git", "config")
	clean, err := os.ReadFile(cfgPath)
	if err != nil {
		t.Fatal(err)
	}
	evil := string(clean) + "[core]\n\tfsmonitor = " + payload + "\n\tpager = " + payload + "\n\teditor = " + payload +
		"\n\thooksPath = " + hooks + "\n\taskPass = " + payload + "\n[credential]\n\thelper = !" + payload +
		"\n[diff]\n\texternal = " + payload + "\n[sequence]\n\teditor = " + payload + "\n"
	stop := make(chan struct{})
	var wg sync.WaitGroup
	wg.Add(1)
	go func() {
		defer wg.Done()
		for i := 0; ; i++ {
			select {
			case <-stop:
				_ = os.WriteFile(cfgPath, clean, 0o644)
				return
			default:
			}
			content := clean
			if i%2 == 0 {
				content = []byte(evil)
			}
			tmp := cfgPath + ".swap"
			_ = os.WriteFile(tmp, content, 0o644)
			_ = os.Rename(tmp, cfgPath)
		}
	}()
	iters := 60
	if testing.Short() {
		iters = 15
	}
	ran := 0
	for i := 0; i < iters; i++ {
		writeFile(t, filepath.Join(repo, "README"), "v"+string(rune('a'+i%26))+"\n")
		for _, st := range []struct {
			tool string
			args map[string]any
		}{
			{tool: "status", args: at(repo)},
			{tool: "diff", args: at(repo)},
			{tool: "commit", args: at(repo, "message", "race", "all", true)},
			{tool: "log", args: at(repo, "max_count", 1.0)},
		} {
			if res := g.call(st.tool, st.args); !res.IsError {
				ran++
			}
		}
	}
	close(stop)
	wg.Wait()
	g.assertNoMarker()
	t.Logf("%d of %d calls ran while the config flipped", ran, iters*4)
	if ran == 0 {
		t.Fatal("no call ever ran: the race was not exercised")
	}
}

// dashVectors are option spellings an argument must never turn into.
func dashVectors(g *genv, payload string) []string {
	return []string{
		"--output=" + filepath.Join(g.outside, "written"),
		"-o" + filepath.Join(g.outside, "written"),
		"--upload-pack=" + payload,
		"-u" + payload,
		"--receive-pack=" + payload,
		"--exec=" + payload,
		"-x" + payload,
		"-F/etc/passwd",
		"--file=/etc/passwd",
		"--open-files-in-pager=" + payload,
		"--git-dir=" + g.outside,
		"--work-tree=/",
		"-C/",
		"-ccore.pager=" + payload,
		"--all",
		"-",
	}
}

// TestDashArgumentsNeverBecomeOptions: every value that names a ref,
// revision, remote or branch is refused when it starts with '-', even when
// a ref of exactly that name exists (CVE-2025-68144).
func TestDashArgumentsNeverBecomeOptions(t *testing.T) {
	g := newGenv(t, func(c *Config) { c.UnsafeSkipApprovalBinding = true })
	repo := g.repo("repo")
	rawGit(t, repo, "remote", "add", "origin", "https://github.com/acme/app.git")
	payload := g.payload()
	vectors := dashVectors(g, payload)
	for _, v := range vectors {
		// Make the hostile name exist as a branch and a tag where git allows it.
		rawGitMayFail(t, repo, "update-ref", "refs/heads/"+v, "HEAD")
		rawGitMayFail(t, repo, "update-ref", "refs/tags/"+v, "HEAD")
	}
	calls := func(v string) []struct {
		tool string
		args map[string]any
	} {
		return []struct {
			tool string
			args map[string]any
		}{
			{tool: "diff", args: at(repo, "base", v)},
			{tool: "diff", args: at(repo, "base", "HEAD", "target", v)},
			{tool: "log", args: at(repo, "revision", v)},
			{tool: "show", args: at(repo, "revision", v)},
			{tool: "blame", args: at(repo, "file", filepath.Join(repo, "README"), "revision", v)},
			{tool: "branch", args: at(repo, "operation", "create", "name", v)},
			{tool: "branch", args: at(repo, "operation", "create", "name", "ok", "start_point", v)},
			{tool: "branch", args: at(repo, "operation", "delete", "name", v)},
			{tool: "branch", args: at(repo, "operation", "rename", "name", v, "new_name", "x")},
			{tool: "branch", args: at(repo, "operation", "rename", "name", "main", "new_name", v)},
			{tool: "checkout", args: at(repo, "target", v)},
			{tool: "checkout", args: at(repo, "target", v, "detach", true)},
			{tool: "checkout", args: at(repo, "target", v, "create_branch", true)},
			{tool: "checkout", args: at(repo, "target", "nb", "create_branch", true, "start_point", v)},
			{tool: "checkout", args: at(repo, "target", v, "paths", []any{filepath.Join(repo, "README")})},
			{tool: "merge", args: at(repo, "branch", v)},
			{tool: "rebase", args: at(repo, "upstream", v)},
			{tool: "rebase", args: at(repo, "upstream", "HEAD", "onto", v)},
			{tool: "cherry_pick", args: at(repo, "commits", []any{v})},
			{tool: "reset", args: at(repo, "target", v)},
			{tool: "reset", args: at(repo, "target", v, "paths", []any{filepath.Join(repo, "README")})},
			{tool: "tag", args: at(repo, "operation", "create", "name", v)},
			{tool: "tag", args: at(repo, "operation", "create", "name", "ok", "target", v)},
			{tool: "tag", args: at(repo, "operation", "delete", "name", v)},
			{tool: "remote", args: at(repo, "operation", "add", "name", v, "url", "https://github.com/a/b.git")},
			{tool: "remote", args: at(repo, "operation", "add", "name", "x", "url", v)},
			{tool: "remote", args: at(repo, "operation", "get_url", "name", v)},
			{tool: "remote", args: at(repo, "operation", "remove", "name", v)},
			{tool: "fetch", args: at(repo, "remote", v)},
			{tool: "fetch", args: at(repo, "branch", v)},
			{tool: "pull", args: at(repo, "remote", v)},
			{tool: "pull", args: at(repo, "branch", v)},
			{tool: "push", args: at(repo, "remote", v, "branch", "main:x")},
			{tool: "push", args: at(repo, "branch", v)},
			{tool: "push", args: at(repo, "branch", "main", "remote_branch", v)},
			{tool: "push", args: at(repo, "refspecs", []any{v})},
			{tool: "push", args: at(repo, "refspecs", []any{"main:" + v})},
			{tool: "clone", args: map[string]any{"url": v, "path": filepath.Join(g.sandbox, "c")}},
			{tool: "clone", args: map[string]any{"url": "https://github.com/a/b.git", "path": filepath.Join(g.sandbox, "c"), "branch": v}},
			{tool: "init", args: map[string]any{"path": filepath.Join(g.sandbox, "i"), "initial_branch": v}},
			{tool: "worktree", args: at(repo, "operation", "add", "worktree_path", filepath.Join(g.sandbox, "w"), "branch", v)},
			{tool: "worktree", args: at(repo, "operation", "add", "worktree_path", filepath.Join(g.sandbox, "w"), "branch", v, "create_branch", true)},
			{tool: "worktree", args: at(repo, "operation", "add", "worktree_path", filepath.Join(g.sandbox, "w"), "branch", "nb", "create_branch", true, "start_point", v)},
		}
	}
	head := rawGit(t, repo, "rev-parse", "HEAD")
	for _, v := range vectors {
		for _, c := range calls(v) {
			res := g.call(c.tool, c.args)
			if !res.IsError {
				t.Fatalf("%s accepted %q: %s", c.tool, v, text(res))
			}
			g.assertNoMarker()
			if _, err := os.Lstat(filepath.Join(g.outside, "written")); err == nil {
				t.Fatalf("%s with %q wrote a file outside the sandbox", c.tool, v)
			}
		}
	}
	if rawGit(t, repo, "rev-parse", "HEAD") != head {
		t.Fatal("the repository changed")
	}
}

// TestRepositoryLocationTricks: the repository path and the git directory
// it leads to must stay inside the sandbox, and the git directory may not
// hold links or borrowed object stores that lead out.
func TestRepositoryLocationTricks(t *testing.T) {
	type trick func(g *genv) string // returns the path to call with
	outsideRepo := func(g *genv) string {
		dir := filepath.Join(g.outside, "repo")
		if _, err := os.Stat(dir); err != nil {
			rawGit(g.t, g.outside, "init", "-q", dir)
			writeFile(g.t, filepath.Join(dir, "secret.txt"), "TOP-SECRET\n")
			rawGit(g.t, dir, "add", "secret.txt")
			rawGit(g.t, dir, "commit", "-q", "-m", "secret TOP-SECRET")
		}
		return dir
	}
	cases := []struct {
		name  string
		trick trick
		want  string
	}{
		{name: "outside path", trick: outsideRepo, want: "outside the sandbox"},
		{name: "prefix sibling", trick: func(g *genv) string {
			dir := g.sandbox + "2"
			rawGit(g.t, g.base, "init", "-q", dir)
			return dir
		}, want: "outside the sandbox"},
		{name: "dotdot", trick: func(g *genv) string { outsideRepo(g); return g.sandbox + "/../outside/repo" }, want: "not canonical"},
		{name: "NUL", trick: func(g *genv) string { return g.repo("r") + "\x00/../../outside/repo" }, want: "control characters"},
		{name: "relative", trick: func(g *genv) string { return "repo" }, want: "absolute"},
		{name: "gitfile to an outside repository", trick: func(g *genv) string {
			out := outsideRepo(g)
			dir := filepath.Join(g.sandbox, "pointer")
			writeFile(g.t, filepath.Join(dir, ".git"), "gitdir: "+filepath.Join(out, ".git")+"\n")
			return dir
		}, want: "outside the sandbox"},
		{name: ".git symlink to an outside repository", trick: func(g *genv) string {
			out := outsideRepo(g)
			dir := filepath.Join(g.sandbox, "link")
			if err := os.MkdirAll(dir, 0o755); err != nil {
				g.t.Fatal(err)
			}
			if err := os.Symlink(filepath.Join(out, ".git"), filepath.Join(dir, ".git")); err != nil {
				g.t.Fatal(err)
			}
			return dir
		}, want: "outside the sandbox"},
		{name: "objects symlinked outside", trick: func(g *genv) string {
			out := outsideRepo(g)
			r := g.repo("r")
			if err := os.RemoveAll(filepath.Join(r, ".git", "objects")); err != nil {
				g.t.Fatal(err)
			}
			if err := os.Symlink(filepath.Join(out, ".git", "objects"), filepath.Join(r, ".git", "objects")); err != nil {
				g.t.Fatal(err)
			}
			return r
		}, want: "symbolic link"},
		{name: "loose object symlinked outside", trick: func(g *genv) string {
			out := outsideRepo(g)
			r := g.repo("r")
			oid := rawGit(g.t, out, "rev-parse", "HEAD:secret.txt")
			dst := filepath.Join(r, ".git", "objects", oid[:2], oid[2:])
			if err := os.MkdirAll(filepath.Dir(dst), 0o755); err != nil {
				g.t.Fatal(err)
			}
			if err := os.Symlink(filepath.Join(out, ".git", "objects", oid[:2], oid[2:]), dst); err != nil {
				g.t.Fatal(err)
			}
			return r
		}, want: "symbolic link"},
		{name: "packed-refs symlinked to a secret", trick: func(g *genv) string {
			r := g.repo("r")
			writeFile(g.t, filepath.Join(g.outside, "token"), "TOP-SECRET\n")
			if err := os.Symlink(filepath.Join(g.outside, "token"), filepath.Join(r, ".git", "packed-refs")); err != nil {
				g.t.Fatal(err)
			}
			return r
		}, want: "symbolic link"},
		{name: "config symlinked", trick: func(g *genv) string {
			out := outsideRepo(g)
			r := g.repo("r")
			_ = os.Remove(filepath.Join(r, ".git", "config"))
			if err := os.Symlink(filepath.Join(out, ".git", "config"), filepath.Join(r, ".git", "config")); err != nil {
				g.t.Fatal(err)
			}
			return r
		}, want: "symbolic link"},
		{name: "alternates", trick: func(g *genv) string {
			out := outsideRepo(g)
			r := g.repo("r")
			writeFile(g.t, filepath.Join(r, ".git", "objects", "info", "alternates"), filepath.Join(out, ".git", "objects")+"\n")
			return r
		}, want: "borrows objects"},
		{name: "commondir outside", trick: func(g *genv) string {
			out := outsideRepo(g)
			r := g.repo("r")
			writeFile(g.t, filepath.Join(r, ".git", "commondir"), filepath.Join(out, ".git")+"\n")
			return r
		}, want: "outside the sandbox"},
		{name: "index is a FIFO", trick: func(g *genv) string {
			r := g.repo("r")
			_ = os.Remove(filepath.Join(r, ".git", "index"))
			if err := syscall.Mkfifo(filepath.Join(r, ".git", "index"), 0o644); err != nil {
				g.t.Skip("mkfifo unsupported")
			}
			return r
		}, want: "not a regular file"},
		{name: "not a repository", trick: func(g *genv) string {
			dir := filepath.Join(g.sandbox, "plain")
			writeFile(g.t, filepath.Join(dir, "x"), "x")
			return dir
		}, want: "not a git repository"},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			g := newGenv(t, nil)
			p := tc.trick(g)
			for _, tool := range []string{"status", "log", "show"} {
				done := make(chan string, 1)
				go func() { done <- text(mustFailQuiet(g, tool, at(p))) }()
				select {
				case msg := <-done:
					if !strings.Contains(msg, tc.want) {
						t.Fatalf("%s: refusal %q does not say %q", tool, msg, tc.want)
					}
					if strings.Contains(msg, "TOP-SECRET") {
						t.Fatalf("%s leaked outside content: %s", tool, msg)
					}
				case <-time.After(30 * time.Second):
					t.Fatalf("%s hung", tool)
				}
			}
		})
	}
}

// mustFailQuiet calls a tool that must fail, reporting with Errorf (it
// runs on a goroutine guarded by a timeout).
func mustFailQuiet(g *genv, tool string, args map[string]any) servers.Result {
	res := g.call(tool, args)
	if !res.IsError {
		g.t.Errorf("%s succeeded: %s", tool, text(res))
	}
	return res
}

// TestMirrorTransferIgnoresWorkspaceConfig: objects reach the workspace by
// the gateway's mirror pushing into it, so a url.<x>.insteadOf in the
// workspace config (here planted past the scan, as a racing writer could)
// cannot redirect the transfer to another repository on the host.
func TestMirrorTransferIgnoresWorkspaceConfig(t *testing.T) {
	g := newGenv(t, func(c *Config) { c.UnsafeAllowLocalRemotes = true; c.UnsafeSkipApprovalBinding = true })
	seed := g.repo("seed")
	bare := g.bare("remote.git", seed)
	decoy := g.bare("decoy.git", "")
	other := g.repo("other")
	writeFile(t, filepath.Join(other, "SECRET"), "TOP-SECRET\n")
	rawGit(t, other, "add", "SECRET")
	rawGit(t, other, "commit", "-q", "-m", "secret")
	// The decoy holds its commit exactly where the mirror keeps the
	// remote's branches, so a redirected transfer would deliver it.
	rawGit(t, other, "push", "-q", decoy, "main:"+fetchNamespace(bare)+"/heads/main")

	repo := filepath.Join(g.sandbox, "clone")
	mustOK(t, g.call("clone", map[string]any{"url": bare, "path": repo}))
	r := &repoHandle{repo: mustFindRepo(t, repo, g.sandbox), dir: repo}
	rawGit(t, repo, "config", "url."+decoy+".insteadOf", g.srv.mirrors.For(r.repo.CommonDir))
	writeFile(t, filepath.Join(seed, "more"), "more\n")
	rawGit(t, seed, "add", "more")
	rawGit(t, seed, "commit", "-q", "-m", "more")
	rawGit(t, seed, "push", "-q", bare, "main")
	ctx := context.Background()
	src := fetchSource{name: "origin", urls: []remoteURL{{url: bare, local: true}}}
	if _, err := g.srv.fetchRefs(ctx, r, src, "", false, false); err != nil {
		t.Fatal(err)
	}
	if got, want := rawGit(t, repo, "rev-parse", "refs/remotes/origin/main"), rawGit(t, seed, "rev-parse", "main"); got != want {
		t.Fatalf("origin/main = %s, want %s: the transfer was redirected", got, want)
	}
	if out := rawGit(t, repo, "log", "--all", "--format=%s"); strings.Contains(out, "secret") {
		t.Fatal("objects from the decoy repository reached the workspace")
	}
}
