package base

import (
	"os"
	"path/filepath"
	"testing"

	"ironcurtain.dev/gateway/gitremote"
	"ironcurtain.dev/gateway/policy"
)

// TestAmbiguousSpellings: the shipped policy with the built-in servers'
// annotations refuses path spellings another layer may read differently
// (issue 11 item 13) on the filesystem and git servers' path arguments,
// and a hard link in the sandbox to a protected file.
func TestAmbiguousSpellings(t *testing.T) {
	f := newFixture(t)
	const (
		allow     = policy.Allow
		deny      = policy.Deny
		ambiguous = policy.RuleAmbiguousPath
	)
	f.check(t, []scenario{
		{name: "tilde user", tool: "filesystem__read_text_file", args: map[string]any{"path": "~root/.ssh/id_rsa"}, want: deny, rule: ambiguous},
		{name: "file URL", tool: "filesystem__read_text_file", args: map[string]any{"path": "file:///etc/passwd"}, want: deny, rule: ambiguous},
		{name: "backslash", tool: "filesystem__write_file", args: map[string]any{"path": `$S\..\x`, "content": "x"}, want: deny, rule: ambiguous},
		{name: "zero width space", tool: "filesystem__write_file", args: map[string]any{"path": "$S/a\u200b.txt", "content": "x"}, want: deny, rule: ambiguous},
		{name: "bidi override in a search root", tool: "filesystem__search_files", args: map[string]any{"path": "$S/\u202e", "pattern": "*"}, want: deny, rule: ambiguous},
		{name: "folded .git read", tool: "filesystem__read_text_file", args: map[string]any{"path": "$S/repo/.GIT/config"}, want: deny, rule: ambiguous},
		{name: "fullwidth .git write", tool: "filesystem__write_file", args: map[string]any{"path": "$S/repo/\uff0e\uff47\uff49\uff54/config", "content": "x"}, want: deny, rule: policy.RuleProtectedPath},
		{name: "8.3 name in a tree", tool: "filesystem__directory_tree", args: map[string]any{"path": "$S/repo/GIT~1"}, want: deny, rule: ambiguous},
		{name: "move onto .Git", tool: "filesystem__move_file", args: map[string]any{"source": "$S/a.txt", "destination": "$S/repo/.Git/config"}, want: deny},
		{name: "git status with a scheme", tool: "git__status", args: map[string]any{"path": "file:$S/repo"}, want: deny, rule: ambiguous},
		{name: "git add of a folded .git file", tool: "git__add", args: map[string]any{"path": "$S/repo", "files": []any{"$S/repo/.GIT/config"}}, want: deny},
		{name: "git diff of a path with a word joiner", tool: "git__diff", args: map[string]any{"path": "$S/repo", "paths": []any{"$S/repo/a\u2060b"}}, want: deny, rule: ambiguous},
		{name: "git commit in a tilde-user path", tool: "git__commit", args: map[string]any{"path": "~agent/repo", "message": "m"}, want: deny, rule: ambiguous},
		{name: "plain read still allowed", tool: "filesystem__read_text_file", args: map[string]any{"path": "$S/a.txt"}, want: allow},
		{name: "colon name after dot slash", tool: "filesystem__write_file", args: map[string]any{"path": "./notes:v2.txt", "content": "x"}, want: allow},
	})

	// A hard link in the sandbox to a file of a protected directory (the
	// engine's policy files are protected only when loaded from a
	// directory; here a protected path is configured).
	prot := filepath.Join(f.outside, "spool")
	if err := os.MkdirAll(prot, 0o755); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(filepath.Join(prot, "0001"), []byte("audit\n"), 0o600); err != nil {
		t.Fatal(err)
	}
	if err := os.Link(filepath.Join(prot, "0001"), filepath.Join(f.sandbox, "notes.txt")); err != nil {
		t.Fatal(err)
	}
	cp, ann, lists := shippedArtifacts(t, f.sandbox)
	eng, err := policy.New(cp, ann, lists, policy.Settings{Sandbox: f.sandbox, ProtectedPaths: []string{prot},
		ConfinedServers: policy.BuiltinConfinedServers()}, policy.WithRemoteResolver(gitremote.New(gitremote.Options{})))
	if err != nil {
		t.Fatal(err)
	}
	g := &fixture{eng: eng, sandbox: f.sandbox, outside: f.outside, ro: f.ro}
	g.check(t, []scenario{
		{name: "read a hard link to a spool file", tool: "filesystem__read_text_file", args: map[string]any{"path": "$S/notes.txt"}, want: deny, rule: policy.RuleProtectedPath},
		{name: "stage a hard link to a spool file", tool: "git__add", args: map[string]any{"path": "$S/repo", "files": []any{"$S/notes.txt"}}, want: deny, rule: policy.RuleProtectedPath},
		{name: "read an ordinary file", tool: "filesystem__read_text_file", args: map[string]any{"path": "$S/a.txt"}, want: allow},
	})
}

// shippedArtifacts parses the shipped artifacts with the rules rebased
// from /workspace to sandbox.
func shippedArtifacts(t *testing.T, sandbox string) (*policy.CompiledPolicy, *policy.Annotations, *policy.DynamicLists) {
	t.Helper()
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
	ann, err := policy.ParseAnnotations(policy.AnnotationsFile, read(policy.AnnotationsFile))
	if err != nil {
		t.Fatal(err)
	}
	lists, err := policy.ParseDynamicLists(policy.DynamicListsFile, read(policy.DynamicListsFile))
	if err != nil {
		t.Fatal(err)
	}
	return cp.RebaseWithin(defaultSandbox, sandbox), ann, lists
}
