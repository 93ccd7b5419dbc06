package base

import (
	"bytes"
	"context"
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"

	"ironcurtain.dev/gateway/gitremote"
	"ironcurtain.dev/gateway/internal/servers/builtin"
	"ironcurtain.dev/gateway/policy"
)

// defaultSandbox is the sandbox the shipped rules name (gateway.yaml's
// default).
const defaultSandbox = "/workspace"

// fixture is a sandbox with a file, a git repository whose origin is on
// GitHub, a directory outside the sandbox and a read-only directory
// (servers.filesystem.read_only_dirs). The engine runs with the built-in
// servers confined, as the gateway runs it.
type fixture struct {
	eng     *policy.Engine
	sandbox string
	outside string
	ro      string
}

func newFixture(t *testing.T) *fixture {
	t.Helper()
	if _, err := exec.LookPath("git"); err != nil {
		t.Fatalf("git is required for the scenario tests: %v", err)
	}
	root, err := filepath.EvalSymlinks(t.TempDir())
	if err != nil {
		t.Fatal(err)
	}
	f := &fixture{sandbox: filepath.Join(root, "sandbox"), outside: filepath.Join(root, "outside"), ro: filepath.Join(root, "docs")}
	for _, d := range []string{f.sandbox, f.outside, f.ro} {
		if err := os.Mkdir(d, 0o755); err != nil {
			t.Fatal(err)
		}
	}
	write := func(p, s string) {
		if err := os.WriteFile(p, []byte(s), 0o644); err != nil {
			t.Fatal(err)
		}
	}
	write(filepath.Join(f.sandbox, "a.txt"), "hello\n")
	write(filepath.Join(f.outside, "secret.txt"), "s3cret\n")
	write(filepath.Join(f.ro, "guide.md"), "read me\n")
	git := func(dir string, args ...string) {
		cmd := exec.Command("git", args...)
		cmd.Dir = dir
		cmd.Env = append(os.Environ(), "GIT_CONFIG_GLOBAL=/dev/null", "GIT_CONFIG_NOSYSTEM=1")
		if out, err := cmd.CombinedOutput(); err != nil {
			t.Fatalf("git %v: %v\n%s", args, err, out)
		}
	}
	git(f.sandbox, "init", "-q", "-b", "feature", "repo")
	git(filepath.Join(f.sandbox, "repo"), "remote", "add", "origin", "https://github.com/acme/app.git")
	git(f.outside, "init", "-q", "-b", "main", "repo")

	read := func(name string) []byte {
		b, err := FS.ReadFile(name)
		if err != nil {
			t.Fatal(err)
		}
		return b
	}
	cp, err := policy.ParseCompiledPolicy(policy.CompiledPolicyFile, read(policy.CompiledPolicyFile))
	if err != nil {
		t.Fatal(err)
	}
	// The rules name the default sandbox, /workspace; this test's sandbox
	// is a temporary directory standing in for it.
	cp = cp.RebaseWithin(defaultSandbox, f.sandbox)
	ann, err := policy.ParseAnnotations(policy.AnnotationsFile, read(policy.AnnotationsFile))
	if err != nil {
		t.Fatal(err)
	}
	lists, err := policy.ParseDynamicLists(policy.DynamicListsFile, read(policy.DynamicListsFile))
	if err != nil {
		t.Fatal(err)
	}
	f.eng, err = policy.New(cp, ann, lists, policy.Settings{
		Sandbox:         f.sandbox,
		Home:            root,
		ReadOnlyDirs:    []string{f.ro},
		ConfinedServers: policy.BuiltinConfinedServers(),
		DomainAllowlists: map[string][]string{
			"fetch": {"docs.example.com", "*.golang.org"},
			"git":   {"github.com", "*.github.com"},
		},
	}, policy.WithRemoteResolver(gitremote.New(gitremote.Options{})))
	if err != nil {
		t.Fatal(err)
	}
	if w := f.eng.Warnings(); len(w) > 0 {
		t.Fatalf("load warnings: %v", w)
	}
	return f
}

type scenario struct {
	name string
	tool string // server__tool
	args map[string]any
	want policy.Status
	rule string
}

func (f *fixture) check(t *testing.T, tests []scenario) {
	t.Helper()
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			server, tool, ok := strings.Cut(tt.tool, "__")
			if !ok {
				t.Fatalf("bad tool %q", tt.tool)
			}
			// $S, $O and $R stand for the sandbox, the outside directory
			// and the read-only directory.
			args := expand(tt.args, strings.NewReplacer("$S", f.sandbox, "$O", f.outside, "$R", f.ro))
			ev := f.eng.Evaluate(context.Background(), policy.Request{Server: server, Tool: tool, Args: args})
			d := ev.Decision
			if d.Status != tt.want || (tt.rule != "" && d.Rule != tt.rule) {
				t.Fatalf("%s %v = %s (%s: %s), want %s (%s)", tt.tool, args, d.Status, d.Rule, d.Reason, tt.want, tt.rule)
			}
			if d.Status != policy.Allow && strings.TrimSpace(d.Reason) == "" {
				t.Fatal("a refusal without a reason")
			}
			// The reason is shown to the agent: no host path outside the
			// sandbox may appear in it.
			for _, p := range []string{f.outside, "/etc/passwd", filepath.Dir(f.sandbox)} {
				if strings.Contains(d.Reason, p) && !strings.Contains(d.Reason, f.sandbox) {
					t.Fatalf("reason %q names the host path %s", d.Reason, p)
				}
			}
		})
	}
}

func expand(m map[string]any, r *strings.Replacer) map[string]any {
	out := make(map[string]any, len(m))
	for k, v := range m {
		switch x := v.(type) {
		case string:
			out[k] = r.Replace(x)
		case []any:
			list := make([]any, len(x))
			for i, e := range x {
				if s, ok := e.(string); ok {
					e = r.Replace(s)
				}
				list[i] = e
			}
			out[k] = list
		default:
			out[k] = v
		}
	}
	return out
}

func TestScenarios(t *testing.T) {
	f := newFixture(t)
	const (
		allow    = policy.Allow
		deny     = policy.Deny
		escalate = policy.Escalate
	)
	pr := func(extra map[string]any) map[string]any {
		m := map[string]any{"owner": "acme", "repo": "app"}
		for k, v := range extra {
			m[k] = v
		}
		return m
	}
	f.check(t, []scenario{
		// Files (principles 1-6)
		{name: "read in the sandbox", tool: "filesystem__read_text_file", args: map[string]any{"path": "$S/a.txt"}, want: allow, rule: policy.RuleSandboxAllow},
		{name: "relative read resolves into the sandbox", tool: "filesystem__read_text_file", args: map[string]any{"path": "a.txt"}, want: allow},
		{name: "list the sandbox", tool: "filesystem__list_directory", args: map[string]any{"path": "$S"}, want: allow},
		{name: "search the sandbox", tool: "filesystem__search_files", args: map[string]any{"path": "$S", "pattern": "*.txt"}, want: allow},
		{name: "write in the sandbox", tool: "filesystem__write_file", args: map[string]any{"path": "$S/new.txt", "content": "x"}, want: allow, rule: policy.RuleSandboxAllow},
		{name: "edit in the sandbox", tool: "filesystem__edit_file", args: map[string]any{"path": "$S/a.txt", "edits": []any{map[string]any{"oldText": "hello", "newText": "bye"}}}, want: allow},
		{name: "create a directory in the sandbox", tool: "filesystem__create_directory", args: map[string]any{"path": "$S/d/e"}, want: allow},
		{name: "write outside is denied", tool: "filesystem__write_file", args: map[string]any{"path": "$O/x.txt", "content": "x"}, want: deny, rule: "deny-change-outside-sandbox"},
		{name: "traversal write is denied", tool: "filesystem__write_file", args: map[string]any{"path": "$S/../outside/x.txt", "content": "x"}, want: deny, rule: "deny-change-outside-sandbox"},
		{name: "move out of the sandbox is denied", tool: "filesystem__move_file", args: map[string]any{"source": "$S/a.txt", "destination": "$O/a.txt"}, want: deny, rule: "deny-change-outside-sandbox"},
		{name: "move from outside is denied", tool: "filesystem__move_file", args: map[string]any{"source": "$O/secret.txt", "destination": "$S/s.txt"}, want: deny},
		{name: "read outside is denied (no server could run it)", tool: "filesystem__read_text_file", args: map[string]any{"path": "$O/secret.txt"}, want: deny, rule: "deny-read-outside-sandbox"},
		{name: "read /etc/passwd is denied", tool: "filesystem__read_text_file", args: map[string]any{"path": "/etc/passwd"}, want: deny, rule: "deny-read-outside-sandbox"},
		{name: "several reads, one outside, are denied", tool: "filesystem__read_multiple_files", args: map[string]any{"paths": []any{"$S/a.txt", "$O/secret.txt"}}, want: deny},
		{name: "read in a read-only directory", tool: "filesystem__read_text_file", args: map[string]any{"path": "$R/guide.md"}, want: allow, rule: policy.RuleSandboxAllow},
		{name: "list a read-only directory", tool: "filesystem__list_directory", args: map[string]any{"path": "$R"}, want: allow, rule: policy.RuleSandboxAllow},
		{name: "reads in the sandbox and a read-only directory", tool: "filesystem__read_multiple_files", args: map[string]any{"paths": []any{"$S/a.txt", "$R/guide.md"}}, want: allow},
		{name: "write in a read-only directory is denied", tool: "filesystem__write_file", args: map[string]any{"path": "$R/guide.md", "content": "x"}, want: deny, rule: "deny-change-outside-sandbox"},
		{name: "move out of a read-only directory is denied", tool: "filesystem__move_file", args: map[string]any{"source": "$R/guide.md", "destination": "$S/guide.md"}, want: deny},
		{name: "git in a read-only directory is denied", tool: "git__status", args: map[string]any{"path": "$R"}, want: deny, rule: "deny-read-outside-sandbox"},
		{name: "write to .git/config is denied", tool: "filesystem__write_file", args: map[string]any{"path": "$S/repo/.git/config", "content": "[core]\n\tfsmonitor = x"}, want: deny, rule: policy.RuleProtectedPath},
		{name: "write a git hook is denied", tool: "filesystem__write_file", args: map[string]any{"path": "$S/repo/.git/hooks/pre-commit", "content": "#!/bin/sh"}, want: deny, rule: policy.RuleProtectedPath},
		{name: "write .gitattributes is denied", tool: "filesystem__write_file", args: map[string]any{"path": "$S/repo/.gitattributes", "content": "* filter=x"}, want: deny, rule: policy.RuleProtectedPath},
		{name: "write .env is denied", tool: "filesystem__write_file", args: map[string]any{"path": "$S/.env", "content": "X=1"}, want: deny, rule: policy.RuleProtectedPath},
		{name: "unknown argument is denied", tool: "filesystem__read_text_file", args: map[string]any{"path": "$S/a.txt", "follow": true}, want: deny, rule: policy.RuleUnknownArgument},
		{name: "introspection", tool: "filesystem__list_allowed_directories", args: map[string]any{}, want: allow},

		// Git (principles 7-12)
		{name: "git status", tool: "git__status", args: map[string]any{"path": "$S/repo"}, want: allow, rule: policy.RuleSandboxAllow},
		{name: "git log", tool: "git__log", args: map[string]any{"path": "$S/repo", "max_count": 5.0}, want: allow},
		{name: "git diff", tool: "git__diff", args: map[string]any{"path": "$S/repo"}, want: allow},
		{name: "git add", tool: "git__add", args: map[string]any{"path": "$S/repo", "files": []any{"$S/repo/a.txt"}}, want: allow},
		{name: "git commit", tool: "git__commit", args: map[string]any{"path": "$S/repo", "message": "work"}, want: allow, rule: policy.RuleSandboxAllow},
		{name: "git branch create", tool: "git__branch", args: map[string]any{"path": "$S/repo", "operation": "create", "name": "topic"}, want: allow},
		{name: "git branch list", tool: "git__branch", args: map[string]any{"path": "$S/repo"}, want: allow},
		{name: "git remote list", tool: "git__remote", args: map[string]any{"path": "$S/repo", "operation": "list"}, want: allow, rule: "allow-git-remote-inspection"},
		{name: "git remote get-url", tool: "git__remote", args: map[string]any{"path": "$S/repo", "operation": "get_url", "name": "origin"}, want: allow},
		{name: "git push escalates", tool: "git__push", args: map[string]any{"path": "$S/repo", "remote": "origin", "branch": "feature"}, want: escalate, rule: "escalate-git-network"},
		{name: "git push to a URL escalates", tool: "git__push", args: map[string]any{"path": "$S/repo", "remote": "https://github.com/acme/app.git", "branch": "feature"}, want: escalate, rule: "escalate-git-network"},
		{name: "git push to an unlisted host escalates", tool: "git__push", args: map[string]any{"path": "$S/repo", "remote": "https://evil.example/app.git", "branch": "feature"}, want: escalate, rule: policy.RuleDomainEscalate},
		{name: "git push to main is denied", tool: "git__push", args: map[string]any{"path": "$S/repo", "remote": "origin", "branch": "feature:main"}, want: deny, rule: policy.RuleGitPush},
		{name: "git push to refs/heads/MAIN is denied", tool: "git__push", args: map[string]any{"path": "$S/repo", "remote": "origin", "branch": "feature", "remote_branch": "refs/heads/MAIN"}, want: deny, rule: policy.RuleGitPush},
		{name: "git force push is denied", tool: "git__push", args: map[string]any{"path": "$S/repo", "remote": "origin", "branch": "feature", "force": true}, want: deny, rule: policy.RuleGitPush},
		{name: "git +refspec push is denied", tool: "git__push", args: map[string]any{"path": "$S/repo", "remote": "origin", "refspecs": []any{"+feature:feature"}}, want: deny, rule: policy.RuleGitPush},
		{name: "git remote branch delete is denied", tool: "git__push", args: map[string]any{"path": "$S/repo", "remote": "origin", "refspecs": []any{":feature"}}, want: deny, rule: policy.RuleGitPush},
		{name: "git pull escalates", tool: "git__pull", args: map[string]any{"path": "$S/repo", "remote": "origin"}, want: escalate, rule: "escalate-git-network"},
		{name: "git fetch of the default remote escalates", tool: "git__fetch", args: map[string]any{"path": "$S/repo"}, want: escalate, rule: "escalate-git-network"},
		{name: "git clone from GitHub escalates", tool: "git__clone", args: map[string]any{"url": "https://github.com/acme/lib.git", "path": "$S/lib"}, want: escalate, rule: "escalate-git-network"},
		{name: "git clone from an unlisted host escalates", tool: "git__clone", args: map[string]any{"url": "https://evil.example/x.git", "path": "$S/x"}, want: escalate, rule: policy.RuleDomainEscalate},
		{name: "git clone into outside is denied", tool: "git__clone", args: map[string]any{"url": "https://github.com/acme/lib.git", "path": "$O/lib"}, want: deny, rule: "deny-change-outside-sandbox"},
		{name: "git remote add escalates", tool: "git__remote", args: map[string]any{"path": "$S/repo", "operation": "add", "name": "fork", "url": "https://github.com/attacker/app.git"}, want: escalate},
		{name: "git ext:: remote is denied", tool: "git__clone", args: map[string]any{"url": "ext::sh -c touch% /tmp/pwned", "path": "$S/x"}, want: deny},
		{name: "git status outside is denied", tool: "git__status", args: map[string]any{"path": "$O/repo"}, want: deny, rule: "deny-read-outside-sandbox"},
		{name: "git commit outside is denied", tool: "git__commit", args: map[string]any{"path": "$O/repo", "message": "x"}, want: deny, rule: "deny-change-outside-sandbox"},
		{name: "git reset outside is denied", tool: "git__reset", args: map[string]any{"path": "$O/repo", "mode": "hard"}, want: deny, rule: "deny-change-outside-sandbox"},
		{name: "git branch delete outside is denied", tool: "git__branch", args: map[string]any{"path": "$O/repo", "operation": "delete", "name": "topic"}, want: deny, rule: "deny-change-outside-sandbox"},

		// Deletes and history rewrites inside the sandbox (principles 3 and
		// 10): the engine leaves delete-path, write-history and
		// delete-history to the rules, which escalate.
		{name: "move inside the sandbox escalates (the source is deleted)", tool: "filesystem__move_file", args: map[string]any{"source": "$S/a.txt", "destination": "$S/b.txt"}, want: escalate, rule: "escalate-delete-in-sandbox"},
		{name: "move into a new directory of the sandbox escalates", tool: "filesystem__move_file", args: map[string]any{"source": "a.txt", "destination": "d/a.txt"}, want: escalate, rule: "escalate-delete-in-sandbox"},
		{name: "git reset --hard escalates", tool: "git__reset", args: map[string]any{"path": "$S/repo", "mode": "hard"}, want: escalate},
		{name: "git reset --soft escalates", tool: "git__reset", args: map[string]any{"path": "$S/repo", "mode": "soft"}, want: escalate, rule: "escalate-history-rewrite-in-sandbox"},
		{name: "git reset with the default mode escalates", tool: "git__reset", args: map[string]any{"path": "$S/repo"}, want: escalate, rule: "escalate-history-rewrite-in-sandbox"},
		{name: "git rebase escalates", tool: "git__rebase", args: map[string]any{"path": "$S/repo", "upstream": "main"}, want: escalate, rule: "escalate-history-rewrite-in-sandbox"},
		{name: "git merge escalates", tool: "git__merge", args: map[string]any{"path": "$S/repo", "branch": "topic"}, want: escalate, rule: "escalate-history-rewrite-in-sandbox"},
		{name: "git cherry-pick escalates", tool: "git__cherry_pick", args: map[string]any{"path": "$S/repo", "commits": []any{"abc123"}}, want: escalate, rule: "escalate-history-rewrite-in-sandbox"},
		{name: "git commit --amend escalates", tool: "git__commit", args: map[string]any{"path": "$S/repo", "message": "again", "amend": true}, want: escalate, rule: "escalate-history-rewrite-in-sandbox"},
		{name: "git pull --rebase escalates", tool: "git__pull", args: map[string]any{"path": "$S/repo", "remote": "origin", "rebase": true}, want: escalate},
		{name: "git branch delete escalates", tool: "git__branch", args: map[string]any{"path": "$S/repo", "operation": "delete", "name": "topic"}, want: escalate, rule: "escalate-history-delete-in-sandbox"},
		{name: "git branch rename escalates", tool: "git__branch", args: map[string]any{"path": "$S/repo", "operation": "rename", "name": "topic", "new_name": "topic2"}, want: escalate, rule: "escalate-history-delete-in-sandbox"},
		{name: "git tag delete escalates", tool: "git__tag", args: map[string]any{"path": "$S/repo", "operation": "delete", "name": "v1"}, want: escalate, rule: "escalate-history-delete-in-sandbox"},
		{name: "git stash drop escalates", tool: "git__stash", args: map[string]any{"path": "$S/repo", "operation": "drop"}, want: escalate, rule: "escalate-history-delete-in-sandbox"},
		{name: "git worktree remove escalates", tool: "git__worktree", args: map[string]any{"path": "$S/repo", "operation": "remove", "worktree_path": "$S/wt"}, want: escalate, rule: "escalate-delete-in-sandbox"},
		{name: "git tag create", tool: "git__tag", args: map[string]any{"path": "$S/repo", "operation": "create", "name": "v1"}, want: allow, rule: policy.RuleSandboxAllow},
		{name: "git stash", tool: "git__stash", args: map[string]any{"path": "$S/repo"}, want: allow, rule: policy.RuleSandboxAllow},
		{name: "git checkout", tool: "git__checkout", args: map[string]any{"path": "$S/repo", "target": "topic"}, want: allow, rule: policy.RuleSandboxAllow},
		{name: "git tag list", tool: "git__tag", args: map[string]any{"path": "$S/repo", "operation": "list"}, want: allow, rule: policy.RuleSandboxAllow},
		{name: "git stash list", tool: "git__stash", args: map[string]any{"path": "$S/repo", "operation": "list"}, want: allow, rule: policy.RuleSandboxAllow},
		{name: "git worktree list", tool: "git__worktree", args: map[string]any{"path": "$S/repo", "operation": "list"}, want: allow},
		{name: "move a file onto .git/config is denied", tool: "filesystem__move_file", args: map[string]any{"source": "$S/a.txt", "destination": "$S/repo/.git/config"}, want: deny, rule: policy.RuleProtectedPath},

		// GitHub (principles 13-16)
		{name: "view a pull request", tool: "github__pr_view", args: pr(map[string]any{"number": 1.0}), want: allow, rule: "allow-github-reads"},
		{name: "list pull requests", tool: "github__pr_list", args: pr(nil), want: allow, rule: "allow-github-reads"},
		{name: "view an issue", tool: "github__issue_view", args: pr(map[string]any{"number": 7.0}), want: allow, rule: "allow-github-reads"},
		{name: "open a pull request escalates", tool: "github__pr_create", args: pr(map[string]any{"title": "t", "head": "feature", "base": "main"}), want: escalate, rule: "escalate-github-publish"},
		{name: "comment on a pull request escalates", tool: "github__pr_comment", args: pr(map[string]any{"number": 1.0, "body": "b"}), want: escalate, rule: "escalate-github-publish"},
		{name: "a token in a comment escalates as a secret", tool: "github__pr_comment", args: pr(map[string]any{"number": 1.0, "body": "use ghp_" + strings.Repeat("x1Y2z3", 6)}), want: escalate, rule: policy.RuleSecretEgress},
		{name: "comment on an issue escalates", tool: "github__issue_comment", args: pr(map[string]any{"number": 7.0, "body": "b"}), want: escalate, rule: "escalate-github-publish"},
		{name: "edit a pull request escalates", tool: "github__pr_edit", args: pr(map[string]any{"number": 1.0, "title": "t"}), want: escalate, rule: "escalate-github-publish"},
		{name: "close the gateway's pull request", tool: "github__pr_close", args: pr(map[string]any{"number": 1.0}), want: allow, rule: "allow-github-close-own-pr"},
		{name: "merge does not exist", tool: "github__pr_merge", args: pr(map[string]any{"number": 1.0}), want: deny},
		{name: "merge spelled like the original", tool: "github__merge_pull_request", args: pr(map[string]any{"pull_number": 1.0}), want: deny},

		// The web (principles 17-19)
		{name: "fetch from the allowlist", tool: "fetch__http_fetch", args: map[string]any{"url": "https://docs.example.com/guide"}, want: allow, rule: "allow-fetch-allowlisted"},
		{name: "fetch from an allowlisted subdomain", tool: "fetch__http_fetch", args: map[string]any{"url": "https://pkg.go.golang.org/x"}, want: allow},
		{name: "fetch from another site escalates", tool: "fetch__http_fetch", args: map[string]any{"url": "https://evil.example.org/"}, want: escalate, rule: policy.RuleDomainEscalate},
		{name: "fetch of the metadata address is denied structurally (no human is asked for what cannot run)", tool: "fetch__http_fetch", args: map[string]any{"url": "http://169.254.169.254/latest/meta-data/"}, want: deny, rule: policy.RuleSpecialHost},
		{name: "fetch of localhost is denied structurally", tool: "fetch__http_fetch", args: map[string]any{"url": "http://localhost:8081/v1/escalations"}, want: deny, rule: policy.RuleSpecialHost},
		{name: "fetch of an allowlisted site with a key in the query escalates", tool: "fetch__http_fetch", args: map[string]any{"url": "https://pkg.go.dev/search?q=" + "AKIA" + "IOSFODNN7EXAMPLE"}, want: escalate, rule: policy.RuleSecretEgress},
		{name: "fetch with userinfo is denied", tool: "fetch__http_fetch", args: map[string]any{"url": "https://docs.example.com@evil.example.org/"}, want: deny, rule: policy.RuleInvalidArgument},

		// Everything else (principle 20)
		{name: "unknown server", tool: "shell__exec", args: map[string]any{"cmd": "id"}, want: deny, rule: policy.RuleUnknownTool},
	})
}

func TestConstitutionHash(t *testing.T) {
	c, err := os.ReadFile(filepath.Join("..", "..", "..", "compiler", "constitution", "base.md"))
	if err != nil {
		t.Fatal(err)
	}
	b, err := FS.ReadFile(policy.CompiledPolicyFile)
	if err != nil {
		t.Fatal(err)
	}
	var cp struct {
		ConstitutionHash string `json:"constitutionHash"`
	}
	if err := json.Unmarshal(b, &cp); err != nil {
		t.Fatal(err)
	}
	sum := sha256.Sum256(c)
	if got := hex.EncodeToString(sum[:]); got != cp.ConstitutionHash {
		t.Fatalf("compiler/constitution/base.md changed (sha256 %s) but compiled-policy.json was made from %s: revisit the rules", got, cp.ConstitutionHash)
	}
}

// TestAnnotationsAreGenerated keeps the shipped tool-annotations.json equal
// to what `ironcurtain tools annotations` generates from the servers.
func TestAnnotationsAreGenerated(t *testing.T) {
	want, err := builtin.File()
	if err != nil {
		t.Fatal(err)
	}
	got, err := FS.ReadFile(policy.AnnotationsFile)
	if err != nil {
		t.Fatal(err)
	}
	if !bytes.Equal(got, want) {
		t.Fatal("policies/base/tool-annotations.json differs from the built-in servers' declarations; " +
			"regenerate it: (cd gateway && go run ./cmd/ironcurtain tools annotations -o policies/base/tool-annotations.json)")
	}
}

// TestLoadDirRebasesToConfiguredSandbox: the shipped directory records that
// it was compiled for /workspace; a gateway configured with another sandbox
// loads it unchanged and the rules follow the sandbox (in-sandbox moves and
// history rewrites escalate instead of being refused), with no load
// warning about rules a confined server could not run.
func TestLoadDirRebasesToConfiguredSandbox(t *testing.T) {
	root, err := filepath.EvalSymlinks(t.TempDir())
	if err != nil {
		t.Fatal(err)
	}
	sandbox := filepath.Join(root, "srv", "work")
	if err := os.MkdirAll(sandbox, 0o755); err != nil {
		t.Fatal(err)
	}
	e, err := policy.LoadDir(".", policy.Settings{Sandbox: sandbox, Home: root, ConfinedServers: policy.BuiltinConfinedServers()}, policy.WithRemoteResolver(gitremote.New(gitremote.Options{})))
	if err != nil {
		t.Fatal(err)
	}
	if w := e.Warnings(); len(w) > 0 {
		t.Fatalf("load warnings: %v", w)
	}
	rb := e.Rebase()
	if rb.From != defaultSandbox || rb.To != sandbox || !rb.Recorded || rb.Rules != 3 {
		t.Fatalf("Rebase = %+v, want the three in-sandbox rules moved from the recorded /workspace", rb)
	}
	tests := []struct {
		name string
		req  policy.Request
		want policy.Status
		rule string
	}{
		{name: "move in the sandbox", req: policy.Request{Server: "filesystem", Tool: "move_file", Args: map[string]any{"source": sandbox + "/a", "destination": sandbox + "/b"}},
			want: policy.Escalate, rule: "escalate-delete-in-sandbox"},
		{name: "move under /workspace is no longer special", req: policy.Request{Server: "filesystem", Tool: "move_file", Args: map[string]any{"source": "/workspace/a", "destination": "/workspace/b"}},
			want: policy.Deny},
		{name: "read under /workspace is outside", req: policy.Request{Server: "filesystem", Tool: "read_text_file", Args: map[string]any{"path": "/workspace/a"}},
			want: policy.Deny, rule: "deny-read-outside-sandbox"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			d := e.Evaluate(context.Background(), tt.req).Decision
			if d.Status != tt.want || (tt.rule != "" && d.Rule != tt.rule) {
				t.Fatalf("%s by %q (%s), want %s by %q", d.Status, d.Rule, d.Detail, tt.want, tt.rule)
			}
		})
	}
}
