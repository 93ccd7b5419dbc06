package git

import (
	"os"
	"path/filepath"
	"strings"
	"testing"
)

func TestNewValidatesConfig(t *testing.T) {
	base, err := filepath.EvalSymlinks(t.TempDir())
	if err != nil {
		t.Fatal(err)
	}
	sandbox := filepath.Join(base, "sb")
	if err := os.Mkdir(sandbox, 0o755); err != nil {
		t.Fatal(err)
	}
	open := filepath.Join(base, "open")
	if err := os.Mkdir(open, 0o777); err != nil {
		t.Fatal(err)
	}
	if err := os.Chmod(open, 0o777); err != nil {
		t.Fatal(err)
	}
	mirror := filepath.Join(base, "m")
	cases := []struct {
		name string
		cfg  Config
		want string
	}{
		{name: "relative sandbox", cfg: Config{Sandbox: "sb", MirrorDir: mirror}, want: "Sandbox"},
		{name: "missing sandbox", cfg: Config{Sandbox: filepath.Join(base, "nope"), MirrorDir: mirror}, want: "resolving git sandbox"},
		{name: "relative mirror", cfg: Config{Sandbox: sandbox, MirrorDir: "m"}, want: "MirrorDir"},
		{name: "mirror inside the sandbox", cfg: Config{Sandbox: sandbox, MirrorDir: filepath.Join(sandbox, "m")}, want: "must not contain each other"},
		{name: "sandbox inside the mirror", cfg: Config{Sandbox: sandbox, MirrorDir: base}, want: "must not contain each other"},
		{name: "mirror writable by others", cfg: Config{Sandbox: sandbox, MirrorDir: open}, want: "writable by group or others"},
		{name: "token file inside the sandbox", cfg: Config{Sandbox: sandbox, MirrorDir: mirror, Credentials: Credentials{TokenFile: filepath.Join(sandbox, "t")}}, want: "must not be inside the sandbox"},
		{name: "token file with a quote", cfg: Config{Sandbox: sandbox, MirrorDir: mirror, Credentials: Credentials{TokenFile: "/run/secrets/a'b"}}, want: "TokenFile"},
		{name: "ssh key relative", cfg: Config{Sandbox: sandbox, MirrorDir: mirror, Credentials: Credentials{SSHKeyFile: "id_rsa"}}, want: "SSHKeyFile"},
		{name: "token host with a space", cfg: Config{Sandbox: sandbox, MirrorDir: mirror, Credentials: Credentials{TokenHosts: []string{"a b"}}}, want: "TokenHosts[0]"},
		{name: "token host glob", cfg: Config{Sandbox: sandbox, MirrorDir: mirror, Credentials: Credentials{TokenHosts: []string{"*"}}}, want: "TokenHosts[0]"},
		{name: "token user with a colon", cfg: Config{Sandbox: sandbox, MirrorDir: mirror, Credentials: Credentials{TokenUser: "a:b"}}, want: "TokenUser"},
		{name: "bad protected branch", cfg: Config{Sandbox: sandbox, MirrorDir: mirror, ProtectedBranches: []string{"a..b"}}, want: "ProtectedBranches"},
		{name: "author with a newline", cfg: Config{Sandbox: sandbox, MirrorDir: mirror, AuthorName: "a\nb"}, want: "AuthorName"},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			_, err := New(tc.cfg)
			if err == nil || !strings.Contains(err.Error(), tc.want) {
				t.Fatalf("err = %v, want %q", err, tc.want)
			}
		})
	}
	s, err := New(Config{Sandbox: sandbox, MirrorDir: mirror})
	if err != nil {
		t.Fatal(err)
	}
	if fi, err := os.Stat(mirror); err != nil || fi.Mode().Perm() != 0o700 {
		t.Fatalf("mirror directory mode %v, %v", fi.Mode(), err)
	}
	if s.Name() != "git" || len(s.Tools()) != len(toolDefs) {
		t.Fatal("name or tools")
	}
}

// TestSubmodulesAreNotRecursed: .gitmodules is attacker input (url
// ext::..., update=!cmd). Clone, checkout and pull never touch submodules,
// and the mirror's fsck refuses a .gitmodules that names a command.
func TestSubmodulesAreNotRecursed(t *testing.T) {
	g := newGenv(t, func(c *Config) { c.UnsafeAllowLocalRemotes = true; c.UnsafeSkipApprovalBinding = true })
	payload := g.payload()
	sub := g.bare("sub.git", g.repo("subsrc"))
	hostile := func(name string, kv ...string) string {
		super := g.repo(name)
		rawGit(t, super, "-c", "protocol.file.allow=always", "submodule", "--quiet", "add", sub, "lib")
		for i := 0; i+1 < len(kv); i += 2 {
			rawGit(t, super, "config", "-f", ".gitmodules", kv[i], kv[i+1])
		}
		rawGit(t, super, "commit", "-qam", "with a hostile submodule")
		bare := g.bare(name+".git", "")
		rawGit(t, super, "push", "-q", bare, "main:main")
		return bare
	}

	bare := hostile("super", "submodule.lib.url", "ext::sh -c "+payload)
	clone := filepath.Join(g.sandbox, "clone")
	mustOK(t, g.call("clone", map[string]any{"url": bare, "path": clone}))
	entries, err := os.ReadDir(filepath.Join(clone, "lib"))
	if err != nil || len(entries) != 0 {
		t.Fatalf("the submodule was populated (%v, %d entries)", err, len(entries))
	}
	mustOK(t, g.call("checkout", map[string]any{"path": clone, "target": "x", "create_branch": true}))
	mustOK(t, g.call("checkout", map[string]any{"path": clone, "target": "main"}))
	mustOK(t, g.call("pull", map[string]any{"path": clone}))
	mustOK(t, g.call("status", map[string]any{"path": clone}))
	g.assertNoMarker()

	bare = hostile("super2", "submodule.lib.update", "!"+payload)
	mustFail(t, g.call("clone", map[string]any{"url": bare, "path": filepath.Join(g.sandbox, "clone2")}), "disallowed submodule update")
	if _, err := os.Stat(filepath.Join(g.sandbox, "clone2")); err == nil {
		t.Fatal("the refused clone left its directory")
	}
	g.assertNoMarker()
}

// TestOutputIsCleaned: terminal escapes in commit messages and names do not
// reach the agent.
func TestOutputIsCleaned(t *testing.T) {
	g := newGenv(t, nil)
	repo := g.repo("r")
	rawGit(t, repo, "commit", "-q", "--allow-empty", "-m", "title \x1b[31mred\x1b]0;owned\x07 end")
	for _, tool := range []string{"log", "show"} {
		out := mustOK(t, g.call(tool, map[string]any{"path": repo}))
		if strings.ContainsAny(out, "\x1b\x07") {
			t.Fatalf("%s passed terminal escapes through: %q", tool, out)
		}
	}
}

func TestStrictArguments(t *testing.T) {
	g := newGenv(t, nil)
	repo := g.repo("r")
	cases := []struct {
		name string
		tool string
		args map[string]any
		want string
	}{
		{name: "unknown tool", tool: "gc", args: at(repo), want: "unknown tool"},
		{name: "unknown argument", tool: "status", args: at(repo, "git_dir", "/"), want: `unknown argument "git_dir"`},
		{name: "extra push flag", tool: "push", args: at(repo, "delete", true), want: "unknown argument"},
		{name: "missing path", tool: "status", args: map[string]any{}, want: `missing argument "path"`},
		{name: "path not a string", tool: "status", args: map[string]any{"path": 1.0}, want: "must be a string"},
		{name: "files not strings", tool: "add", args: at(repo, "files", []any{1.0}), want: "array of strings"},
		{name: "bad enum", tool: "reset", args: at(repo, "mode", "keep"), want: "must be one of"},
		{name: "negative count", tool: "log", args: at(repo, "max_count", -1.0), want: "integer from 0"},
		{name: "count too large", tool: "log", args: at(repo, "max_count", 1e9), want: "integer from 0"},
		{name: "flag not a bool", tool: "commit", args: at(repo, "message", "m", "amend", "yes"), want: "must be a boolean"},
		{name: "message NUL", tool: "commit", args: at(repo, "message", "a\x00b"), want: "NUL"},
		{name: "revision with a space", tool: "show", args: at(repo, "revision", "HEAD --output=x"), want: "printable ASCII"},
		{name: "revision non-ASCII", tool: "show", args: at(repo, "revision", "mäin"), want: "printable ASCII"},
		{name: "too many commits", tool: "cherry_pick", args: at(repo, "commits", []any{}), want: "1 to 100"},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			mustFail(t, g.call(tc.tool, tc.args), tc.want)
		})
	}
}

// TestSandboxPathChecks: the path of every tool is checked on the raw
// string before git is involved.
func TestSandboxPathChecks(t *testing.T) {
	g := newGenv(t, nil)
	repo := g.repo("r")
	rawGit(t, g.outside, "init", "-q", filepath.Join(g.outside, "o"))
	for _, tc := range []struct {
		name, path, want string
	}{
		{name: "outside", path: filepath.Join(g.outside, "o"), want: "outside the sandbox"},
		{name: "prefix trick", path: g.sandbox + "-evil", want: "outside the sandbox"},
		{name: "traversal", path: repo + "/../../outside/o", want: "not canonical"},
		{name: "trailing slash", path: repo + "/", want: "not canonical"},
		{name: "NUL", path: repo + "\x00", want: "control characters"},
		{name: "newline", path: repo + "\n", want: "control characters"},
		{name: "invalid UTF-8", path: repo + "\xff", want: "invalid UTF-8"},
		{name: "empty", path: "", want: "is empty"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			msg := mustFail(t, g.call("status", map[string]any{"path": tc.path}), tc.want)
			if strings.Contains(msg, g.outside) {
				t.Fatalf("refusal echoes the outside path: %q", msg)
			}
		})
	}
	mustFail(t, g.call("add", at(repo, "files", []any{filepath.Join(g.outside, "o", "x")})), "outside the sandbox")
	mustFail(t, g.call("add", at(repo, "files", []any{filepath.Join(g.sandbox, "other")})), "outside the repository")
	mustFail(t, g.call("diff", at(repo, "paths", []any{repo + "/../r2"})), "not canonical")
}
