package policy

import (
	"context"
	"encoding/json"
	"os"
	"path/filepath"
	"strings"
	"testing"
)

// rebasePolicy is the shipped base policy's file rules, compiled for
// /workspace: deletes in the sandbox escalate, other changes are refused.
func rebasePolicy(t *testing.T, recorded string) string {
	t.Helper()
	p := &CompiledPolicy{Sandbox: recorded, Rules: []CompiledRule{
		{Name: "deny-delete-keep", If: RuleCondition{Roles: []Role{RoleDeletePath}, Paths: &PathCondition{Roles: []Role{RoleDeletePath}, Within: "/workspace/keep"}}, Then: Deny, Reason: "x"},
		{Name: "escalate-delete-in-sandbox", If: RuleCondition{Roles: []Role{RoleDeletePath}, Paths: &PathCondition{Roles: []Role{RoleDeletePath}, Within: "/workspace"}}, Then: Escalate, Reason: "x"},
		{Name: "deny-change-outside-sandbox", If: RuleCondition{Roles: []Role{RoleWritePath, RoleDeletePath}, Paths: &PathCondition{Roles: []Role{RoleWritePath, RoleDeletePath}, Within: "/"}}, Then: Deny, Reason: "x"},
		{Name: "deny-sibling", If: RuleCondition{Roles: []Role{RoleReadPath}, Paths: &PathCondition{Roles: []Role{RoleReadPath}, Within: "/workspace2"}}, Then: Deny, Reason: "x"},
	}}
	b, err := json.Marshal(p)
	if err != nil {
		t.Fatal(err)
	}
	return string(b)
}

// TestLoadRebasesToConfiguredSandbox: a policy compiled for /workspace and
// a gateway configured with another sandbox (.../srv/work). In-sandbox
// moves escalate as they would under /workspace (before: denied by
// deny-change-outside-sandbox, since the rule named /workspace literally),
// and paths under /workspace are no longer special. Old artifacts without
// the "sandbox" field are taken as compiled for /workspace.
func TestLoadRebasesToConfiguredSandbox(t *testing.T) {
	tests := []struct {
		name     string
		recorded string
		wantRec  bool
	}{
		{name: "recorded /workspace", recorded: "/workspace", wantRec: true},
		{name: "not recorded (the original's artifacts)", recorded: "", wantRec: false},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			tr := newTree(t)
			sandbox := filepath.Join(tr.root, "srv", "work")
			if err := os.MkdirAll(filepath.Join(sandbox, "keep"), 0o755); err != nil {
				t.Fatal(err)
			}
			dir := writeDir(t, rebasePolicy(t, tt.recorded), "", "")
			e, err := LoadDir(dir, Settings{Sandbox: sandbox, Home: tr.home, Annotations: reachTools})
			if err != nil {
				t.Fatal(err)
			}
			rb := e.Rebase()
			if !rb.Moved() || rb.From != "/workspace" || rb.To != sandbox || rb.Recorded != tt.wantRec || rb.Rules != 2 {
				t.Fatalf("Rebase = %+v", rb)
			}
			if s := rb.String(); !strings.Contains(s, "2 rule(s) rebased") || strings.Contains(s, "assumed") == tt.wantRec {
				t.Fatalf("Rebase.String = %q", s)
			}
			cases := []struct {
				name string
				req  Request
				want Status
				rule string
			}{
				{name: "move in the sandbox escalates as under /workspace", req: fsMove(filepath.Join(sandbox, "a"), filepath.Join(sandbox, "b")),
					want: Escalate, rule: "escalate-delete-in-sandbox"},
				{name: "write in the sandbox", req: Request{Server: "filesystem", Tool: "write_file", Args: map[string]any{"path": filepath.Join(sandbox, "a")}},
					want: Allow, rule: RuleSandboxAllow},
				{name: "a rule below the sandbox moved too", req: fsMove(filepath.Join(sandbox, "keep", "x"), filepath.Join(sandbox, "b")),
					want: Deny, rule: "deny-delete-keep"},
				{name: "moving into /workspace is no longer special", req: fsMove(filepath.Join(sandbox, "a"), "/workspace/b"),
					want: Deny, rule: "deny-change-outside-sandbox"},
				{name: "reading /workspace is no longer special", req: Request{Server: "filesystem", Tool: "read_text_file", Args: map[string]any{"path": "/workspace/docs/x.md"}},
					want: Deny, rule: RuleDefaultDeny},
				{name: "a sibling of /workspace keeps its meaning", req: Request{Server: "filesystem", Tool: "read_text_file", Args: map[string]any{"path": "/workspace2/x"}},
					want: Deny, rule: "deny-sibling"},
			}
			for _, c := range cases {
				d := e.Evaluate(context.Background(), c.req).Decision
				if d.Status != c.want || d.Rule != c.rule {
					t.Errorf("%s: %s by %q (%s), want %s by %q", c.name, d.Status, d.Rule, d.Detail, c.want, c.rule)
				}
			}
		})
	}
}

// TestLoadRebaseMovesDeletes is the case with the default
// sandbox-safe roles: a move inside a sandbox other than /workspace
// escalates (escalate-delete-in-sandbox) instead of being refused.
func TestLoadRebaseMovesDeletes(t *testing.T) {
	tr := newTree(t)
	sandbox := filepath.Join(tr.root, "srv", "work")
	if err := os.MkdirAll(sandbox, 0o755); err != nil {
		t.Fatal(err)
	}
	move := fsMove(filepath.Join(sandbox, "a"), filepath.Join(sandbox, "b"))
	dir := writeDir(t, rebasePolicy(t, ""), "", "")
	e, err := LoadDir(dir, Settings{Sandbox: sandbox, Home: tr.home, Annotations: reachTools, ConfinedServers: BuiltinConfinedServers()})
	if err != nil {
		t.Fatal(err)
	}
	if d := e.Evaluate(context.Background(), move).Decision; d.Status != Escalate || d.Rule != "escalate-delete-in-sandbox" {
		t.Fatalf("move in %s: %s by %q, want escalate by escalate-delete-in-sandbox", sandbox, d.Status, d.Rule)
	}
	// The same rules without rebasing (New takes them as given) refuse it:
	// the defect this load step removes.
	p, err := ParseCompiledPolicy(CompiledPolicyFile, []byte(rebasePolicy(t, "")))
	if err != nil {
		t.Fatal(err)
	}
	raw, err := New(p, nil, nil, Settings{Sandbox: sandbox, Home: tr.home, Annotations: reachTools})
	if err != nil {
		t.Fatal(err)
	}
	if d := raw.Evaluate(context.Background(), move).Decision; d.Status != Deny {
		t.Fatalf("unrebased: %s by %q, want deny", d.Status, d.Rule)
	}
}

func TestLoadRebaseNoMove(t *testing.T) {
	tr := newTree(t)
	tests := []struct {
		name     string
		recorded string
		settings Settings
		want     Rebase
		wantErr  string
	}{
		{name: "recorded equals configured", recorded: tr.sandbox, settings: Settings{Sandbox: tr.sandbox},
			want: Rebase{From: tr.sandbox, To: tr.sandbox, Recorded: true}},
		{name: "no sandbox configured", recorded: "", settings: Settings{},
			want: Rebase{From: DefaultCompiledSandbox, To: DefaultCompiledSandbox}},
		{name: "recorded with a trailing slash", recorded: tr.sandbox + "/", settings: Settings{Sandbox: tr.sandbox},
			want: Rebase{From: tr.sandbox, To: tr.sandbox, Recorded: true}},
		{name: "relative recorded sandbox", recorded: "work", settings: Settings{Sandbox: tr.sandbox},
			wantErr: "compiled-policy.json: sandbox: must be an absolute path"},
		{name: "root recorded sandbox", recorded: "/", settings: Settings{Sandbox: tr.sandbox},
			wantErr: "compiled-policy.json: sandbox:"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			dir := writeDir(t, rebasePolicy(t, tt.recorded), "", "")
			tt.settings.Home = tr.home
			e, err := LoadDir(dir, tt.settings)
			if tt.wantErr != "" {
				if err == nil || !strings.Contains(err.Error(), tt.wantErr) {
					t.Fatalf("err = %v, want %q", err, tt.wantErr)
				}
				return
			}
			if err != nil {
				t.Fatal(err)
			}
			if got := e.Rebase(); got != tt.want || got.Moved() {
				t.Fatalf("Rebase = %+v, want %+v", got, tt.want)
			}
		})
	}
}

// TestSandboxFieldRoundTrip: the field is written by Marshal and read back,
// and artifacts without it (the original's) still parse unchanged.
func TestSandboxFieldRoundTrip(t *testing.T) {
	b, err := json.Marshal(&CompiledPolicy{Sandbox: "/srv/work", Rules: []CompiledRule{}})
	if err != nil {
		t.Fatal(err)
	}
	p, err := ParseCompiledPolicy(CompiledPolicyFile, b)
	if err != nil || p.Sandbox != "/srv/work" {
		t.Fatalf("round trip = %+v, %v (%s)", p, err, b)
	}
	b, err = json.Marshal(&CompiledPolicy{Rules: []CompiledRule{}})
	if err != nil || strings.Contains(string(b), "sandbox") {
		t.Fatalf("an unset sandbox is written: %s, %v", b, err)
	}
}

func fsMove(src, dst string) Request {
	return Request{Server: "filesystem", Tool: "move_file", Args: map[string]any{"source": src, "destination": dst}}
}
