package policy

import (
	"context"
	"os"
	"path/filepath"
	"strings"
	"testing"
)

// reachTools are filesystem and git tools as the built-in servers annotate
// them (the parts that matter here).
var reachTools = []ToolAnnotation{
	{Server: "filesystem", Tool: "read_text_file", Args: []ArgAnnotation{{Name: "path", Spec: Static(RoleReadPath)}}},
	{Server: "filesystem", Tool: "read_multiple_files", Args: []ArgAnnotation{{Name: "paths", Spec: Static(RoleReadPath)}}},
	{Server: "filesystem", Tool: "write_file", Args: []ArgAnnotation{{Name: "path", Spec: Static(RoleWritePath)}}},
	{Server: "filesystem", Tool: "edit_file", Args: []ArgAnnotation{{Name: "path", Spec: Static(RoleReadPath, RoleWritePath)}}},
	{Server: "filesystem", Tool: "move_file", Args: []ArgAnnotation{
		{Name: "source", Spec: Static(RoleReadPath, RoleDeletePath)},
		{Name: "destination", Spec: Static(RoleWritePath)}}},
	{Server: "git", Tool: "status", Args: []ArgAnnotation{{Name: "path", Spec: Static(RoleReadPath)}}},
	{Server: "git", Tool: "clone", Args: []ArgAnnotation{{Name: "url", Spec: Static(RoleGitRemoteURL)}, {Name: "path", Spec: Static(RoleWritePath)}}},
}

// reachRules is the shipped policy's shape before issue 11 (reads outside
// the sandbox escalate), plus a careless rule allowing writes anywhere
// under a directory.
func reachRules(sandbox, writable string) *CompiledPolicy {
	return &CompiledPolicy{Rules: []CompiledRule{
		{Name: "escalate-delete-in-sandbox", If: RuleCondition{Roles: []Role{RoleDeletePath}, Paths: &PathCondition{Roles: []Role{RoleDeletePath}, Within: sandbox}}, Then: Escalate},
		{Name: "allow-writes-there", If: RuleCondition{Roles: []Role{RoleWritePath, RoleDeletePath}, Paths: &PathCondition{Roles: []Role{RoleWritePath, RoleDeletePath}, Within: writable}}, Then: Allow},
		{Name: "deny-change-outside-sandbox", If: RuleCondition{Roles: []Role{RoleWritePath, RoleDeletePath}, Paths: &PathCondition{Roles: []Role{RoleWritePath, RoleDeletePath}, Within: "/"}}, Then: Deny},
		{Name: "escalate-read-outside-sandbox", If: RuleCondition{Roles: []Role{RoleReadPath}, Paths: &PathCondition{Roles: []Role{RoleReadPath}, Within: "/"}}, Then: Escalate},
	}}
}

type reachTree struct {
	tree
	ro string // the read-only directory
}

func newReachTree(t testing.TB) reachTree {
	t.Helper()
	tr := reachTree{tree: newTree(t)}
	tr.ro = filepath.Join(tr.root, "docs")
	for name, content := range map[string]string{
		filepath.Join(tr.ro, "guide.md"):        "guide",
		filepath.Join(tr.sandbox, "a.txt"):      "a",
		filepath.Join(tr.outside, "secret.txt"): "secret",
	} {
		if err := os.MkdirAll(filepath.Dir(name), 0o755); err != nil {
			t.Fatal(err)
		}
		if err := os.WriteFile(name, []byte(content), 0o644); err != nil {
			t.Fatal(err)
		}
	}
	// A symlink in the read-only directory that leaves it, and one in the
	// sandbox that leads into the read-only directory.
	if err := os.Symlink(filepath.Join(tr.outside, "secret.txt"), filepath.Join(tr.ro, "escape.txt")); err != nil {
		t.Fatal(err)
	}
	if err := os.Symlink(filepath.Join(tr.ro, "guide.md"), filepath.Join(tr.sandbox, "guide-link.md")); err != nil {
		t.Fatal(err)
	}
	return tr
}

func (tr reachTree) engine(t *testing.T, confined []string) *Engine {
	t.Helper()
	e, err := New(reachRules(tr.sandbox, tr.root), nil, nil, Settings{Sandbox: tr.sandbox, Home: tr.home,
		ReadOnlyDirs: []string{tr.ro}, ConfinedServers: confined, Annotations: reachTools,
		DomainAllowlists: map[string][]string{"git": {"github.com"}}})
	if err != nil {
		t.Fatal(err)
	}
	return e
}

// TestUnreachablePathsAreNeverOffered: with the built-in servers confined,
// a call the server could not run is denied by the engine
// (RuleUnreachablePath) instead of being allowed or escalated; reachable
// ones keep their decision. Without confinement (the original's
// behaviour) the rules decide as written.
func TestUnreachablePathsAreNeverOffered(t *testing.T) {
	tr := newReachTree(t)
	confined := tr.engine(t, BuiltinConfinedServers())
	open := tr.engine(t, nil)
	tests := []struct {
		name     string
		tool     string
		args     map[string]any
		want     Status
		wantRule string
		open     Status // decision without confinement
	}{
		{name: "read in the sandbox", tool: "filesystem__read_text_file", args: map[string]any{"path": "$S/a.txt"},
			want: Allow, wantRule: RuleSandboxAllow, open: Allow},
		{name: "read in the read-only directory", tool: "filesystem__read_text_file", args: map[string]any{"path": "$R/guide.md"},
			want: Allow, wantRule: RuleSandboxAllow, open: Allow},
		{name: "read through a sandbox symlink into the read-only directory", tool: "filesystem__read_text_file", args: map[string]any{"path": "$S/guide-link.md"},
			want: Allow, wantRule: RuleSandboxAllow, open: Allow},
		{name: "read outside both escalated before, denied now", tool: "filesystem__read_text_file", args: map[string]any{"path": "$O/secret.txt"},
			want: Deny, wantRule: RuleUnreachablePath, open: Escalate},
		{name: "a symlink in the read-only directory does not escape", tool: "filesystem__read_text_file", args: map[string]any{"path": "$R/escape.txt"},
			want: Deny, wantRule: RuleUnreachablePath, open: Escalate},
		{name: "dot-dot out of the read-only directory", tool: "filesystem__read_text_file", args: map[string]any{"path": "$R/../outside/secret.txt"},
			want: Deny, wantRule: RuleUnreachablePath, open: Escalate},
		{name: "a sibling with the read-only directory as prefix", tool: "filesystem__read_text_file", args: map[string]any{"path": "$R2/x"},
			want: Deny, wantRule: RuleUnreachablePath, open: Escalate},
		{name: "one unreachable value among reachable ones", tool: "filesystem__read_multiple_files", args: map[string]any{"paths": []any{"$S/a.txt", "$R/guide.md", "$O/secret.txt"}},
			want: Deny, wantRule: RuleUnreachablePath, open: Escalate},
		{name: "write into the read-only directory allowed by a rule", tool: "filesystem__write_file", args: map[string]any{"path": "$R/new.md"},
			want: Deny, wantRule: RuleUnreachablePath, open: Allow},
		{name: "edit in the read-only directory allowed by a rule", tool: "filesystem__edit_file", args: map[string]any{"path": "$R/guide.md"},
			want: Deny, wantRule: RuleUnreachablePath, open: Allow},
		{name: "move out of the read-only directory", tool: "filesystem__move_file", args: map[string]any{"source": "$R/guide.md", "destination": "$S/guide.md"},
			want: Deny, wantRule: RuleUnreachablePath, open: Allow},
		{name: "move in the sandbox still escalates", tool: "filesystem__move_file", args: map[string]any{"source": "$S/a.txt", "destination": "$S/b.txt"},
			want: Escalate, wantRule: "escalate-delete-in-sandbox", open: Escalate},
		{name: "a deny stays the rule's deny", tool: "filesystem__write_file", args: map[string]any{"path": "/etc/x"},
			want: Deny, wantRule: "deny-change-outside-sandbox", open: Deny},
		{name: "git does not read the read-only directory", tool: "git__status", args: map[string]any{"path": "$R"},
			want: Deny, wantRule: RuleUnreachablePath, open: Escalate},
		{name: "git in the sandbox", tool: "git__status", args: map[string]any{"path": "$S"},
			want: Allow, wantRule: RuleSandboxAllow, open: Allow},
		{name: "the domain gate's escalation of a clone outside the sandbox", tool: "git__clone", args: map[string]any{"url": "https://evil.example/x.git", "path": "$R/x"},
			want: Deny, wantRule: RuleUnreachablePath, open: Escalate},
		{name: "the domain gate's escalation of a clone into the sandbox", tool: "git__clone", args: map[string]any{"url": "https://evil.example/x.git", "path": "$S/x"},
			want: Escalate, wantRule: RuleDomainEscalate, open: Escalate},
	}
	expand := strings.NewReplacer("$S", tr.sandbox, "$R2", tr.ro+"2", "$R", tr.ro, "$O", tr.outside)
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			args := map[string]any{}
			for k, v := range tt.args {
				switch x := v.(type) {
				case string:
					args[k] = expand.Replace(x)
				case []any:
					var out []any
					for _, s := range x {
						out = append(out, expand.Replace(s.(string)))
					}
					args[k] = out
				}
			}
			server, tool, _ := strings.Cut(tt.tool, "__")
			d := confined.Evaluate(context.Background(), Request{Server: server, Tool: tool, Args: args}).Decision
			if d.Status != tt.want || d.Rule != tt.wantRule {
				t.Fatalf("confined: %s by %q (%s; %s), want %s by %q", d.Status, d.Rule, d.Reason, d.Detail, tt.want, tt.wantRule)
			}
			if d.Rule == RuleUnreachablePath && (strings.Contains(d.Reason, tr.root) || d.Detail == "") {
				t.Fatalf("reason %q names a host path, or no detail for the audit (%q)", d.Reason, d.Detail)
			}
			if o := open.Evaluate(context.Background(), Request{Server: server, Tool: tool, Args: args}).Decision; o.Status != tt.open {
				t.Fatalf("unconfined: %s by %q, want %s", o.Status, o.Rule, tt.open)
			}
		})
	}
}

// TestReachWarnings: at load, rules that allow or escalate calls a confined
// server cannot run are reported, naming the rule and why.
func TestReachWarnings(t *testing.T) {
	tr := newReachTree(t)
	warnings := func(confined []string, p *CompiledPolicy) []string {
		e, err := New(p, nil, nil, Settings{Sandbox: tr.sandbox, Home: tr.home, ReadOnlyDirs: []string{tr.ro}, ConfinedServers: confined, Annotations: reachTools})
		if err != nil {
			t.Fatal(err)
		}
		return e.Warnings()
	}
	rule := func(name string, then Status, within string, servers []string, roles ...Role) CompiledRule {
		return CompiledRule{Name: name, If: RuleCondition{Roles: roles, Server: servers, Paths: &PathCondition{Roles: roles, Within: within}}, Then: then}
	}
	tests := []struct {
		name string
		rule CompiledRule
		want []string // substrings of the one warning; nil: no warning
	}{
		{name: "escalating reads outside the sandbox", rule: rule("escalate-read-outside", Escalate, "/", nil, RoleReadPath),
			want: []string{`rule "escalate-read-outside" would escalate filesystem calls with read-path paths within /`, "git calls with read-path", RuleUnreachablePath, tr.ro}},
		{name: "allowing writes to another directory", rule: rule("allow-tmp-writes", Allow, tr.outside, []string{"filesystem"}, RoleWritePath),
			want: []string{`"allow-tmp-writes" would allow filesystem calls with write-path paths within ` + tr.outside}},
		{name: "allowing writes in the read-only directory", rule: rule("allow-docs-writes", Allow, tr.ro, []string{"filesystem"}, RoleWritePath),
			want: []string{`"allow-docs-writes"`}},
		{name: "escalating deletes everywhere is useful in the sandbox", rule: rule("escalate-deletes", Escalate, "/", []string{"filesystem"}, RoleDeletePath)},
		{name: "escalating deletes in the sandbox", rule: rule("escalate-delete-in-sandbox", Escalate, tr.sandbox, nil, RoleDeletePath)},
		{name: "reads in the read-only directory on the filesystem server", rule: rule("allow-docs", Allow, tr.ro, []string{"filesystem"}, RoleReadPath)},
		{name: "denies are never reported", rule: rule("deny-outside", Deny, "/", nil, RoleReadPath, RoleWritePath)},
		{name: "other servers are not confined", rule: rule("allow-notes", Allow, tr.outside, []string{"notes"}, RoleReadPath)},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			got := warnings(BuiltinConfinedServers(), &CompiledPolicy{Rules: []CompiledRule{tt.rule}})
			if tt.want == nil {
				if len(got) != 0 {
					t.Fatalf("warnings = %q, want none", got)
				}
				return
			}
			all := strings.Join(got, "\n")
			for _, w := range tt.want {
				if !strings.Contains(all, w) {
					t.Fatalf("warnings = %q, want one containing %q", got, w)
				}
			}
			if n := len(warnings(nil, &CompiledPolicy{Rules: []CompiledRule{tt.rule}})); n != 0 {
				t.Fatalf("unconfined engine warned %d times", n)
			}
		})
	}
}

func TestReadOnlyDirsSettings(t *testing.T) {
	tr := newReachTree(t)
	tests := []struct {
		name string
		dirs []string
		want string
	}{
		{name: "relative", dirs: []string{"docs"}, want: "settings: read_only_dirs[0]: must be an absolute path or start with ~"},
		{name: "root", dirs: []string{tr.ro, "/"}, want: "settings: read_only_dirs[1]"},
		{name: "inside the sandbox", dirs: []string{filepath.Join(tr.sandbox, "vendor")}, want: "overlaps the sandbox"},
		{name: "containing the sandbox", dirs: []string{tr.root}, want: "overlaps the sandbox"},
		{name: "fine", dirs: []string{tr.ro, "~/Downloads"}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			e, err := New(&CompiledPolicy{Rules: []CompiledRule{}}, nil, nil, Settings{Sandbox: tr.sandbox, Home: tr.home, ReadOnlyDirs: tt.dirs})
			if tt.want == "" {
				if err != nil {
					t.Fatal(err)
				}
				if got := e.ReadOnlyDirs(); len(got) != 2 || got[0] != tr.ro || got[1] != filepath.Join(tr.home, "Downloads") {
					t.Fatalf("ReadOnlyDirs = %q", got)
				}
				return
			}
			if err == nil || !strings.Contains(err.Error(), tt.want) {
				t.Fatalf("err = %v, want %q", err, tt.want)
			}
		})
	}
}

func BenchmarkConfinedRead(b *testing.B) {
	tr := reachTree{tree: newTree(b)}
	tr.ro = filepath.Join(tr.root, "docs")
	if err := os.MkdirAll(tr.ro, 0o755); err != nil {
		b.Fatal(err)
	}
	e, err := New(reachRules(tr.sandbox, tr.root), nil, nil, Settings{Sandbox: tr.sandbox, Home: tr.home,
		ReadOnlyDirs: []string{tr.ro}, ConfinedServers: BuiltinConfinedServers(), Annotations: reachTools})
	if err != nil {
		b.Fatal(err)
	}
	req := Request{Server: "filesystem", Tool: "read_text_file", Args: map[string]any{"path": filepath.Join(tr.outside, "x")}}
	b.ReportAllocs()
	for b.Loop() {
		if d := e.Evaluate(context.Background(), req).Decision; d.Rule != RuleUnreachablePath {
			b.Fatal(d)
		}
	}
}

// FuzzConfinedNeverOffersUnreachable: whatever path the agent writes, a
// confined engine never allows or escalates a filesystem call whose
// canonical path (what the server receives) lies outside the sandbox and
// the read-only directories, nor a write whose path lies outside the
// sandbox.
func FuzzConfinedNeverOffersUnreachable(f *testing.F) {
	for _, s := range []string{"a.txt", "../docs/guide.md", "../outside/secret.txt", "/etc/passwd", "guide-link.md",
		"../docs/escape.md", "../docs2/x", "~/x", "./../sandbox/a.txt", "/", ".."} {
		f.Add(s, false)
		f.Add(s, true)
	}
	tr := newReachTree(f)
	e, err := New(reachRules(tr.sandbox, "/"), nil, nil, Settings{Sandbox: tr.sandbox, Home: tr.home,
		ReadOnlyDirs: []string{tr.ro}, ConfinedServers: BuiltinConfinedServers(), Annotations: reachTools})
	if err != nil {
		f.Fatal(err)
	}
	f.Fuzz(func(t *testing.T, p string, write bool) {
		tool := "read_text_file"
		if write {
			tool = "write_file"
		}
		ev := e.Evaluate(context.Background(), Request{Server: "filesystem", Tool: tool, Args: map[string]any{"path": p}})
		if ev.Decision.Status == Deny {
			return
		}
		got, _ := ev.Transport["path"].(string)
		in := within(got, tr.sandbox) || (!write && within(got, tr.ro))
		if !in {
			t.Fatalf("%s %q (sent as %q) decided %s by %s", tool, p, got, ev.Decision.Status, ev.Decision.Rule)
		}
	})
}
