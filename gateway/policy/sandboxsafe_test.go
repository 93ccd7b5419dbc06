package policy

import (
	"context"
	"reflect"
	"strings"
	"testing"
)

func TestSandboxSafeRoleSets(t *testing.T) {
	var registry []Role
	for _, d := range Roles() {
		if d.SandboxSafe {
			registry = append(registry, d.Role)
		}
	}
	if want := []Role{RoleReadPath, RoleWritePath}; !reflect.DeepEqual(DefaultSandboxSafeRoles(), want) || !reflect.DeepEqual(registry, want) {
		t.Fatalf("default %v, registry %v, want %v", DefaultSandboxSafeRoles(), registry, want)
	}
	if got, want := OriginalSandboxSafeRoles(), RolesByCategory(CategoryPath); !reflect.DeepEqual(got, want) {
		t.Fatalf("original %v, want every path role %v", got, want)
	}
	d := DefaultSandboxSafeRoles()
	d[0] = RoleDeletePath
	if DefaultSandboxSafeRoles()[0] != RoleReadPath {
		t.Fatal("DefaultSandboxSafeRoles returns a shared slice")
	}
}

// sandboxEngine has a sandbox, one annotated delete tool and a write tool,
// and no rules at all: whatever containment does not resolve is denied.
func sandboxEngine(t *testing.T, safe []Role) (*Engine, string) {
	t.Helper()
	tr := newTree(t)
	e, err := New(&CompiledPolicy{Rules: []CompiledRule{}}, nil, nil, Settings{Sandbox: tr.sandbox, Home: tr.home, SandboxSafeRoles: safe,
		Annotations: []ToolAnnotation{
			{Server: "filesystem", Tool: "delete_file", Args: []ArgAnnotation{{Name: "path", Spec: Static(RoleDeletePath)}}},
			{Server: "filesystem", Tool: "write_file", Args: []ArgAnnotation{{Name: "path", Spec: Static(RoleWritePath)}}},
			{Server: "git", Tool: "rebase", Args: []ArgAnnotation{{Name: "path", Spec: Static(RoleWriteHistory)}}},
			{Server: "git", Tool: "tag_delete", Args: []ArgAnnotation{{Name: "path", Spec: Static(RoleDeleteHistory)}}},
		}})
	if err != nil {
		t.Fatal(err)
	}
	return e, tr.sandbox
}

func TestSandboxSafeRolesSetting(t *testing.T) {
	tests := []struct {
		name     string
		safe     []Role
		reported []Role
		want     map[string]Status // tool -> decision for a path in the sandbox
	}{
		{name: "nil is the default", safe: nil, reported: DefaultSandboxSafeRoles(),
			want: map[string]Status{"filesystem__write_file": Allow, "filesystem__delete_file": Deny, "git__rebase": Deny, "git__tag_delete": Deny}},
		{name: "original", safe: OriginalSandboxSafeRoles(), reported: OriginalSandboxSafeRoles(),
			want: map[string]Status{"filesystem__write_file": Allow, "filesystem__delete_file": Allow, "git__rebase": Allow, "git__tag_delete": Allow}},
		{name: "empty resolves nothing", safe: []Role{}, reported: nil,
			want: map[string]Status{"filesystem__write_file": Deny, "filesystem__delete_file": Deny, "git__rebase": Deny, "git__tag_delete": Deny}},
		{name: "deletes only, in any order", safe: []Role{RoleDeletePath}, reported: []Role{RoleDeletePath},
			want: map[string]Status{"filesystem__write_file": Deny, "filesystem__delete_file": Allow, "git__rebase": Deny, "git__tag_delete": Deny}},
		{name: "registry order reported", safe: []Role{RoleDeleteHistory, RoleReadPath}, reported: []Role{RoleReadPath, RoleDeleteHistory},
			want: map[string]Status{"filesystem__write_file": Deny, "git__tag_delete": Allow}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			e, sb := sandboxEngine(t, tt.safe)
			if got := e.SandboxSafeRoles(); !reflect.DeepEqual(got, tt.reported) {
				t.Fatalf("SandboxSafeRoles() = %v, want %v", got, tt.reported)
			}
			for _, key := range sortedKeys(tt.want) {
				server, tool, _ := strings.Cut(key, "__")
				d := e.Evaluate(context.Background(), Request{Server: server, Tool: tool, Args: map[string]any{"path": sb + "/f.txt"}}).Decision
				if d.Status != tt.want[key] {
					t.Errorf("%s in the sandbox = %s (%s), want %s", key, d.Status, d.Rule, tt.want[key])
				}
				if d.Status == Allow && d.Rule != RuleSandboxAllow {
					t.Errorf("%s allowed by %s, want %s", key, d.Rule, RuleSandboxAllow)
				}
				if d.Status == Deny && d.Rule != RuleDefaultDeny {
					t.Errorf("%s denied by %s, want %s (no rules)", key, d.Rule, RuleDefaultDeny)
				}
			}
		})
	}
}

// TestSandboxSafeRolesCopied: changing the caller's slice after the engine
// is built changes nothing.
func TestSandboxSafeRolesCopied(t *testing.T) {
	safe := []Role{RoleReadPath, RoleWritePath}
	e, sb := sandboxEngine(t, safe)
	safe[1] = RoleDeletePath
	d := e.Evaluate(context.Background(), Request{Server: "filesystem", Tool: "delete_file", Args: map[string]any{"path": sb + "/f.txt"}}).Decision
	if d.Status != Deny {
		t.Fatalf("delete after mutating the settings = %s (%s)", d.Status, d.Rule)
	}
}

func TestRebaseWithin(t *testing.T) {
	rule := func(within string) CompiledRule {
		return CompiledRule{Name: "r", If: RuleCondition{Paths: &PathCondition{Roles: []Role{RoleDeletePath}, Within: within}}, Then: Escalate}
	}
	tests := []struct {
		name, from, to, within, want string
	}{
		{name: "the sandbox itself", from: "/workspace", to: "/tmp/x/ws", within: "/workspace", want: "/tmp/x/ws"},
		{name: "below the sandbox", from: "/workspace", to: "/tmp/x/ws", within: "/workspace/app/src", want: "/tmp/x/ws/app/src"},
		{name: "trailing slashes", from: "/workspace/", to: "/tmp/x/ws/", within: "/workspace/", want: "/tmp/x/ws"},
		{name: "sibling with the sandbox as prefix", from: "/workspace", to: "/tmp/x/ws", within: "/workspace2", want: "/workspace2"},
		{name: "the root is kept", from: "/workspace", to: "/tmp/x/ws", within: "/", want: "/"},
		{name: "a parent is kept", from: "/workspace/app", to: "/tmp/x/ws", within: "/workspace", want: "/workspace"},
		{name: "home paths are kept", from: "/workspace", to: "/tmp/x/ws", within: "~/workspace", want: "~/workspace"},
		{name: "from the root changes nothing", from: "/", to: "/tmp/x/ws", within: "/workspace", want: "/workspace"},
		{name: "relative from changes nothing", from: "workspace", to: "/tmp/x/ws", within: "/workspace", want: "/workspace"},
		{name: "relative to changes nothing", from: "/workspace", to: "ws", within: "/workspace", want: "/workspace"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			p := &CompiledPolicy{Rules: []CompiledRule{rule(tt.within), {Name: "no-paths", Then: Allow}}}
			got := p.RebaseWithin(tt.from, tt.to)
			if w := got.Rules[0].If.Paths.Within; w != tt.want {
				t.Fatalf("within = %q, want %q", w, tt.want)
			}
			if p.Rules[0].If.Paths.Within != tt.within {
				t.Fatalf("the original policy was modified: %q", p.Rules[0].If.Paths.Within)
			}
			if got.Rules[1].If.Paths != nil || len(got.Rules) != 2 {
				t.Fatalf("rules = %+v", got.Rules)
			}
		})
	}
}

func TestSandboxSafeRolesWarn(t *testing.T) {
	tests := []struct {
		name string
		safe []Role
		want []string
	}{
		{name: "default", safe: nil},
		{name: "explicit default", safe: DefaultSandboxSafeRoles()},
		{name: "none", safe: []Role{}},
		{name: "original", safe: OriginalSandboxSafeRoles(), want: []string{"lists delete-path", "lists write-history", "lists delete-history"}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			e, _ := sandboxEngine(t, tt.safe)
			w := e.Warnings()
			if len(w) != len(tt.want) {
				t.Fatalf("warnings = %q, want %d", w, len(tt.want))
			}
			for i, s := range tt.want {
				if !strings.Contains(w[i], s) {
					t.Fatalf("warning %q does not contain %q", w[i], s)
				}
			}
		})
	}
}
