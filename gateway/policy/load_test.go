package policy

import (
	"encoding/json"
	"errors"
	"os"
	"path/filepath"
	"strings"
	"testing"
)

const (
	okPolicy = `{"rules": [{"name": "r", "if": {}, "then": "allow", "reason": "x"}]}`
	okAnn    = `{"servers": {"s": {"tools": [{"toolName": "t", "serverName": "s", "args": {"a": ["none"]}}]}}}`
	okLists  = `{"lists": {}}`
)

func writeDir(t *testing.T, policy, ann, lists string) string {
	t.Helper()
	dir := t.TempDir()
	for name, content := range map[string]string{CompiledPolicyFile: policy, AnnotationsFile: ann, DynamicListsFile: lists} {
		if content == "" {
			continue
		}
		if err := os.WriteFile(filepath.Join(dir, name), []byte(content), 0o644); err != nil {
			t.Fatal(err)
		}
	}
	return dir
}

func ruleJSON(cond string) string {
	return `{"rules": [{"name": "r", "if": ` + cond + `, "then": "allow", "reason": "x"}]}`
}

func TestLoadErrors(t *testing.T) {
	tests := []struct {
		name     string
		policy   string
		ann      string
		lists    string
		settings Settings
		want     string
	}{
		{name: "syntax error", policy: "{\n  \"rules\": [\n    {,\n", want: "compiled-policy.json: line 3, column 6: invalid character ','"},
		{name: "rules missing", policy: `{"generatedAt": "x"}`, want: "compiled-policy.json: rules: missing"},
		{name: "rules not an array", policy: `{"rules": {}}`, want: "compiled-policy.json: line 1"},
		{name: "name missing", policy: `{"rules": [{"if": {}, "then": "allow"}]}`, want: "compiled-policy.json: rules[0].name: missing"},
		{name: "then invalid", policy: `{"rules": [{"name": "a", "if": {}, "then": "allow"}, {"name": "b", "if": {}, "then": "maybe"}]}`, want: `compiled-policy.json: rules[1].then: unknown decision "maybe"`},
		{name: "then missing", policy: `{"rules": [{"name": "a", "if": {}}]}`, want: "rules[0].then: missing"},
		{name: "if missing", policy: `{"rules": [{"name": "a", "then": "deny"}]}`, want: "rules[0].if: missing"},
		{name: "unknown condition key", policy: ruleJSON(`{"sideEffects": true}`), want: `rules[0].if: unknown field "sideEffects"`},
		{name: "unknown role", policy: ruleJSON(`{"roles": ["read-paths"]}`), want: `rules[0].if.roles: unknown role "read-paths"`},
		{name: "empty server list", policy: ruleJSON(`{"server": []}`), want: "rules[0].if.server: must not be empty"},
		{name: "empty tool list", policy: ruleJSON(`{"tool": []}`), want: "rules[0].if.tool: must not be empty"},
		{name: "relative within", policy: ruleJSON(`{"paths": {"roles": ["read-path"], "within": "Downloads"}}`), want: "rules[0].if.paths.within: must be an absolute path or start with ~"},
		{name: "paths roles empty", policy: ruleJSON(`{"paths": {"roles": [], "within": "/x"}}`), want: "rules[0].if.paths.roles: must not be empty"},
		{name: "bad domain pattern", policy: ruleJSON(`{"domains": {"roles": ["fetch-url"], "allowed": ["ok.example", "*."]}}`), want: `compiled-policy.json: rules[0].if.domains.allowed[1]: "*."`},
		{name: "domain with scheme", policy: ruleJSON(`{"domains": {"roles": ["fetch-url"], "allowed": ["https://x.example"]}}`), want: `rules[0].if.domains.allowed[0]: "https://x.example"`},
		{name: "wildcard with repository path", policy: ruleJSON(`{"domains": {"roles": ["git-remote-url"], "allowed": ["*.github.com/acme/app"]}}`), want: "needs an exact host"},
		{name: "bad list entry", policy: ruleJSON(`{"domains": {"roles": ["fetch-url"], "allowed": ["@sites"]}}`), lists: `{"lists": {"sites": {"values": ["a.example", "b example"], "manualAdditions": [], "manualRemovals": []}}}`, want: `dynamic-lists.json: lists.sites: entry "b example" (used by rules[0].if.domains.allowed[0])`},
		{name: "bad match type", policy: ruleJSON(`{"lists": [{"roles": ["github-owner"], "allowed": ["a"], "matchType": "regex"}]}`), want: `rules[0].if.lists[0].matchType: "regex" is not domains, emails or identifiers`},
		{name: "empty list allowed", policy: ruleJSON(`{"lists": [{"roles": ["github-owner"], "allowed": [], "matchType": "identifiers"}]}`), want: "rules[0].if.lists[0].allowed: must not be empty"},
		{name: "duplicate rule names", policy: `{"rules": [{"name": "a", "if": {}, "then": "allow"}, {"name": "a", "if": {}, "then": "deny"}]}`, want: `rules[1].name: duplicate rule name "a" (also rules[0])`},
		{name: "lists file without lists", policy: okPolicy, lists: `{"generatedAt": "x"}`, want: "dynamic-lists.json: lists: missing"},
		{name: "annotations unknown role", policy: okPolicy, ann: `{"servers": {"s": {"tools": [{"toolName": "t", "args": {"a": ["readpath"]}}]}}}`, want: `tool-annotations.json: servers.s.tools[0].args.a: unknown role "readpath"`},
		{name: "annotations duplicate tool", policy: okPolicy, ann: `{"servers": {"s": {"tools": [{"toolName": "t", "args": {}}, {"toolName": "t", "args": {}}]}}}`, want: `servers.s.tools[1].toolName: duplicate tool "t"`},
		{name: "annotations duplicate argument", policy: okPolicy, ann: `{"servers": {"s": {"tools": [{"toolName": "t", "args": {"a": ["none"], "a": ["none"]}}]}}}`, want: "servers.s.tools[0].args.a: a name appears twice"},
		{name: "annotations empty roles", policy: okPolicy, ann: `{"servers": {"s": {"tools": [{"toolName": "t", "args": {"a": []}}]}}}`, want: "servers.s.tools[0].args.a: must list at least one role"},
		{name: "annotations path and url", policy: okPolicy, ann: `{"servers": {"s": {"tools": [{"toolName": "t", "args": {"a": ["read-path", "fetch-url"]}}]}}}`, want: "cannot carry both path and URL roles"},
		{name: "condition on a missing argument", policy: okPolicy, ann: `{"servers": {"s": {"tools": [{"toolName": "t", "args": {"a": {"default": ["read-path"], "when": [{"condition": {"arg": "dryrun", "equals": true}, "roles": ["none"]}]}}}]}}}`, want: `servers.s.tools[0].args.a.when[0].condition.arg: no argument "dryrun"`},
		{name: "condition with two operators", policy: okPolicy, ann: `{"servers": {"s": {"tools": [{"toolName": "t", "args": {"a": {"default": ["read-path"], "when": [{"condition": {"arg": "a", "equals": true, "is": "present"}, "roles": ["none"]}]}}}]}}}`, want: "exactly one of equals, in and is"},
		{name: "condition with a bad is", policy: okPolicy, ann: `{"servers": {"s": {"tools": [{"toolName": "t", "args": {"a": {"default": ["read-path"], "when": [{"condition": {"arg": "a", "is": "set"}, "roles": ["none"]}]}}}]}}}`, want: `is: "set" is not present, absent, truthy or falsy`},
		{name: "conditional unknown key", policy: okPolicy, ann: `{"servers": {"s": {"tools": [{"toolName": "t", "args": {"a": {"default": ["none"], "otherwise": []}}}]}}}`, want: `servers.s.tools[0].args.a: unknown field "otherwise"`},
		{name: "args not an object", policy: okPolicy, ann: `{"servers": {"s": {"tools": [{"toolName": "t", "args": ["a"]}]}}}`, want: "servers.s.tools[0].args: must be an object"},
		{name: "annotations without servers", policy: okPolicy, ann: `{}`, want: "tool-annotations.json: servers: missing"},
		{name: "server name with separator", policy: okPolicy, ann: `{"servers": {"a__b": {"tools": []}}}`, want: `invalid server name "a__b"`},
		{name: "settings relative sandbox", policy: okPolicy, settings: Settings{Sandbox: "work"}, want: "settings: sandbox: must be an absolute path or start with ~"},
		{name: "settings bad branch", policy: okPolicy, settings: Settings{ProtectedBranches: []string{"main", "a..b"}}, want: "settings: protected_branches[1]:"},
		{name: "settings bad allowlist", policy: okPolicy, settings: Settings{DomainAllowlists: map[string][]string{"git": {"github.com", "a.*.com"}}}, want: `settings: domain_allowlists.git[1]: "a.*.com"`},
		{name: "sandbox-safe unknown role", policy: okPolicy, settings: Settings{SandboxSafeRoles: []Role{RoleReadPath, "delete-paths"}}, want: `settings: sandbox_safe_roles[1]: unknown role "delete-paths"`},
		{name: "sandbox-safe url role", policy: okPolicy, settings: Settings{SandboxSafeRoles: []Role{RoleFetchURL}}, want: `settings: sandbox_safe_roles[0]: role "fetch-url" (category url) is not a path role; only path roles (read-path, write-path, delete-path, write-history, delete-history) can be sandbox-safe`},
		{name: "sandbox-safe opaque role", policy: okPolicy, settings: Settings{SandboxSafeRoles: []Role{RoleReadPath, RoleNone}}, want: `settings: sandbox_safe_roles[1]: role "none" (category opaque) is not a path role`},
		{name: "sandbox-safe duplicate", policy: okPolicy, settings: Settings{SandboxSafeRoles: []Role{RoleReadPath, RoleWritePath, RoleReadPath}}, want: `settings: sandbox_safe_roles[2]: duplicate role "read-path"`},
		{name: "sandbox-safe empty name", policy: okPolicy, settings: Settings{SandboxSafeRoles: []Role{""}}, want: `settings: sandbox_safe_roles[0]: unknown role ""`},
		{name: "settings declared annotation without server", policy: okPolicy, settings: Settings{Annotations: []ToolAnnotation{{Tool: "x"}}}, want: "settings: annotations[0].serverName: missing"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			dir := writeDir(t, tt.policy, tt.ann, tt.lists)
			_, err := LoadDir(dir, tt.settings)
			if err == nil {
				t.Fatalf("loaded; want an error containing %q", tt.want)
			}
			if !strings.Contains(err.Error(), tt.want) {
				t.Fatalf("error %q does not contain %q", err, tt.want)
			}
			var fe *FileError
			if !errors.As(err, &fe) {
				t.Fatalf("error %q is not a *FileError", err)
			}
		})
	}
}

func TestLoadShippedArtifacts(t *testing.T) {
	ann := filepath.Join("testdata", "original", "generated", AnnotationsFile)
	for _, dir := range []string{"generated", "generated-coding", "generated-readonly"} {
		t.Run(dir, func(t *testing.T) {
			e, err := LoadDir(filepath.Join("testdata", "original", dir), Settings{Home: "/home/user", AnnotationsFile: ann})
			if err != nil {
				t.Fatal(err)
			}
			if e.RuleCount() == 0 || len(e.Tools()) != 213 {
				t.Fatalf("rules %d, tools %d", e.RuleCount(), len(e.Tools()))
			}
		})
	}
}

func TestMissingListWarns(t *testing.T) {
	dir := writeDir(t, ruleJSON(`{"domains": {"roles": ["fetch-url"], "allowed": ["@gone"]}}`), okAnn, okLists)
	e, err := LoadDir(dir, Settings{})
	if err != nil {
		t.Fatal(err)
	}
	if w := e.Warnings(); len(w) != 1 || !strings.Contains(w[0], "@gone") {
		t.Fatalf("warnings = %q", w)
	}
}

func TestDeclaredAnnotationsWin(t *testing.T) {
	dir := writeDir(t, okPolicy, okAnn, "")
	e, err := LoadDir(dir, Settings{Annotations: []ToolAnnotation{{Server: "s", Tool: "t", Args: []ArgAnnotation{{Name: "p", Spec: Static(RoleReadPath)}}}}})
	if err != nil {
		t.Fatal(err)
	}
	a, ok := e.Annotation("s", "t")
	if !ok || len(a.Args) != 1 || a.Args[0].Name != "p" {
		t.Fatalf("annotation = %+v", a)
	}
}

func TestAnnotationJSONRoundTrip(t *testing.T) {
	in := `{"toolName":"edit_file","serverName":"filesystem","comment":"c","args":{"path":{"default":["read-path","write-path"],"when":[{"condition":{"arg":"dryRun","equals":true},"roles":["read-path"]}]},"edits":["none"],"dryRun":["none"],"mode":{"default":["none"],"when":[{"condition":{"arg":"mode","in":["a",1,false]},"roles":["none"]},{"condition":{"arg":"mode","is":"absent"},"roles":["none"]}]}},"inputSchema":{"type":"object"}}`
	var a ToolAnnotation
	if err := json.Unmarshal([]byte(in), &a); err != nil {
		t.Fatal(err)
	}
	order := []string{}
	for _, arg := range a.Args {
		order = append(order, arg.Name)
	}
	if strings.Join(order, ",") != "path,edits,dryRun,mode" {
		t.Fatalf("argument order lost: %v", order)
	}
	out, err := json.Marshal(a)
	if err != nil {
		t.Fatal(err)
	}
	if string(out) != in {
		t.Fatalf("round trip:\n got %s\nwant %s", out, in)
	}
}
