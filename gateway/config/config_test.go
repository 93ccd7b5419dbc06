package config

import (
	"errors"
	"os"
	"path/filepath"
	"reflect"
	"strings"
	"testing"

	"go.yaml.in/yaml/v3"

	"ironcurtain.dev/gateway/policy"
)

func TestParse(t *testing.T) {
	tests := []struct {
		name    string
		yaml    string
		wantErr []string // substrings the error must contain, in order of appearance
		check   func(t *testing.T, c *Config)
	}{
		{
			name: "full",
			yaml: `
sandbox: /workspace
protected_paths: [/etc/ironcurtain, ~/secrets]
protected_branches: [main, "release/*"]
trusted_servers: [internal]
policy_dir: policies/base
shadow_policy_dir: /etc/ironcurtain/candidate
servers:
  git:
    allowed_domains: [github.com, "*.github.com"]
  fetch:
    allowed_domains: ["*"]
`,
			check: func(t *testing.T, c *Config) {
				if c.Sandbox != "/workspace" || c.PolicyDir != "/cfg/policies/base" || c.ShadowPolicyDir != "/etc/ironcurtain/candidate" {
					t.Fatalf("paths: %+v", c)
				}
				if c.ProtectedPaths[1] != "/home/test/secrets" {
					t.Fatalf("~ not expanded: %v", c.ProtectedPaths)
				}
				s := c.PolicySettings()
				if !reflect.DeepEqual(s.DomainAllowlists["git"], []string{"github.com", "*.github.com"}) {
					t.Fatalf("allowlists: %v", s.DomainAllowlists)
				}
				if !reflect.DeepEqual(s.ProtectedBranches, []string{"main", "release/*"}) || !reflect.DeepEqual(s.TrustedServers, []string{"internal"}) {
					t.Fatalf("settings: %+v", s)
				}
				if s.ProtectedPaths[len(s.ProtectedPaths)-1] != "/cfg/gateway.yaml" {
					t.Fatalf("the config file is not protected: %v", s.ProtectedPaths)
				}
			},
		},
		{
			name: "defaults",
			yaml: ``,
			check: func(t *testing.T, c *Config) {
				if c.Sandbox != DefaultSandbox || c.PolicyDir != DefaultPolicyDir || !reflect.DeepEqual(c.ProtectedBranches, policy.DefaultProtectedBranches()) {
					t.Fatalf("defaults not applied: %+v", c)
				}
				if !reflect.DeepEqual(c.SandboxSafeRoles, policy.DefaultSandboxSafeRoles()) {
					t.Fatalf("sandbox_safe_roles default not applied: %v", c.SandboxSafeRoles)
				}
			},
		},
		{
			name: "sandbox-safe roles default",
			yaml: "sandbox_safe_roles:\n",
			check: func(t *testing.T, c *Config) {
				want := []policy.Role{policy.RoleReadPath, policy.RoleWritePath}
				if !reflect.DeepEqual(c.SandboxSafeRoles, want) || !reflect.DeepEqual(c.PolicySettings().SandboxSafeRoles, want) {
					t.Fatalf("sandbox_safe_roles = %v, settings %v", c.SandboxSafeRoles, c.PolicySettings().SandboxSafeRoles)
				}
				checkEngineSafe(t, c, want)
			},
		},
		{
			name: "sandbox-safe roles of the original",
			yaml: "sandbox_safe_roles: [read-path, write-path, delete-path, write-history, delete-history]\n",
			check: func(t *testing.T, c *Config) {
				if got := c.PolicySettings().SandboxSafeRoles; !reflect.DeepEqual(got, policy.OriginalSandboxSafeRoles()) {
					t.Fatalf("settings %v", got)
				}
				checkEngineSafe(t, c, policy.OriginalSandboxSafeRoles())
			},
		},
		{
			name: "sandbox-safe roles empty",
			yaml: "sandbox_safe_roles: []\n",
			check: func(t *testing.T, c *Config) {
				if s := c.PolicySettings().SandboxSafeRoles; s == nil || len(s) != 0 {
					t.Fatalf("[] must reach the engine as empty, not as the default: %#v", s)
				}
				checkEngineSafe(t, c, nil)
			},
		},
		{name: "sandbox-safe URL role", yaml: "sandbox_safe_roles: [read-path, fetch-url]\n", wantErr: []string{`gateway.yaml: sandbox_safe_roles[1]: role "fetch-url" (category url) is not a path role`}},
		{name: "sandbox-safe unknown role", yaml: "sandbox_safe_roles: [delete]\n", wantErr: []string{`gateway.yaml: sandbox_safe_roles[0]: unknown role "delete"`}},
		{name: "sandbox-safe duplicate", yaml: "sandbox_safe_roles: [read-path, write-path, read-path]\n", wantErr: []string{`gateway.yaml: sandbox_safe_roles[2]: duplicate role "read-path" (also sandbox_safe_roles[0])`}},
		{name: "sandbox-safe not a list", yaml: "sandbox_safe_roles: read-path\n", wantErr: []string{"gateway.yaml:", "cannot unmarshal"}},
		{name: "unknown top-level key", yaml: "sandbx: /x\n", wantErr: []string{"gateway.yaml: sandbx: unknown key (line 1)"}},
		{name: "unknown nested key", yaml: "servers:\n  git:\n    allowd_domains: [x.com]\n", wantErr: []string{"gateway.yaml: servers.git.allowd_domains: unknown key (line 3)"}},
		{name: "bad domain pattern", yaml: "servers:\n  git:\n    allowed_domains: [github.com, x.com, \"*.\"]\n", wantErr: []string{`gateway.yaml: servers.git.allowed_domains[2]: "*."`}},
		{name: "domain with port", yaml: "servers:\n  fetch:\n    allowed_domains: [\"example.com:8080\"]\n", wantErr: []string{`servers.fetch.allowed_domains[0]`}},
		{name: "wildcard in the middle", yaml: "servers:\n  fetch:\n    allowed_domains: [\"a.*.com\"]\n", wantErr: []string{`servers.fetch.allowed_domains[0]`}},
		{name: "bad protected branch", yaml: "protected_branches: [\"ma..in\"]\n", wantErr: []string{"gateway.yaml: protected_branches[0]:"}},
		{name: "several errors at once", yaml: "protected_branches: [\"a b\"]\nservers:\n  x:\n    allowed_domains: [\"\"]\n", wantErr: []string{"protected_branches[0]", "servers.x.allowed_domains[0]"}},
		{name: "type error", yaml: "protected_paths: /etc\n", wantErr: []string{"gateway.yaml:", "cannot unmarshal"}},
		{name: "alias", yaml: "a: &x /etc\nsandbox: *x\n", wantErr: []string{"gateway.yaml:"}},
		{name: "duplicate key", yaml: "sandbox: /a\nsandbox: /b\n", wantErr: []string{"gateway.yaml:", "already defined"}},
		{name: "root sandbox", yaml: "sandbox: /\n", wantErr: []string{"gateway.yaml: sandbox:"}},
		{name: "same shadow dir", yaml: "policy_dir: /p\nshadow_policy_dir: /p\n", wantErr: []string{"gateway.yaml: shadow_policy_dir:"}},
		{name: "bad server name", yaml: "servers:\n  a__b: {}\n", wantErr: []string{`gateway.yaml: servers.a__b:`}},
		// serve refuses a config without a fetch allowlist (the engine would skip
		// the structural domain check for fetch-url): Parse must refuse it too,
		// so policy eval/check/replay never evaluate a config serve refuses.
		{name: "fetch allowlist empty list", yaml: "servers:\n  fetch:\n    allowed_domains: []\n", wantErr: []string{"gateway.yaml: servers.fetch.allowed_domains: must list the domains"}},
		{name: "fetch allowlist absent", yaml: "servers:\n  git:\n    allowed_domains: [github.com]\n", wantErr: []string{"gateway.yaml: servers.fetch.allowed_domains: must list the domains"}},
		{name: "fetch section without allowlist", yaml: "servers:\n  fetch: {}\n", wantErr: []string{"gateway.yaml: servers.fetch.allowed_domains: must list the domains"}},
		{name: "fetch allowlist with a repository path", yaml: "servers:\n  fetch:\n    allowed_domains: [example.com, github.com/o/r]\n", wantErr: []string{`gateway.yaml: servers.fetch.allowed_domains[1]: "github.com/o/r": the fetch allowlist takes host patterns only`}},
		{name: "empty trusted server", yaml: "trusted_servers: [\"\"]\n", wantErr: []string{"gateway.yaml: trusted_servers[0]:"}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			t.Setenv("HOME", "/home/test")
			c, err := Parse("/cfg/gateway.yaml", withFetch(tt.yaml))
			if len(tt.wantErr) > 0 {
				if err == nil {
					t.Fatalf("no error, want %q", tt.wantErr)
				}
				for _, w := range tt.wantErr {
					if !strings.Contains(err.Error(), w) {
						t.Fatalf("error %q does not contain %q", err, w)
					}
				}
				return
			}
			if err != nil {
				t.Fatal(err)
			}
			tt.check(t, c)
		})
	}
}

// checkEngineSafe builds an engine from c's policy settings and checks the
// sandbox-safe roles it uses.
func checkEngineSafe(t *testing.T, c *Config, want []policy.Role) {
	t.Helper()
	s := c.PolicySettings()
	s.Sandbox = t.TempDir()
	e, err := policy.New(&policy.CompiledPolicy{Rules: []policy.CompiledRule{}}, nil, nil, s)
	if err != nil {
		t.Fatal(err)
	}
	if got := e.SandboxSafeRoles(); !reflect.DeepEqual(got, want) {
		t.Fatalf("engine sandbox-safe roles = %v, want %v", got, want)
	}
}

func TestFieldErrorIsAs(t *testing.T) {
	_, err := Parse("/cfg/gateway.yaml", []byte("servers:\n  git:\n    allowed_domains: [\"*.\"]\n"))
	var fe *FieldError
	if !errors.As(err, &fe) || fe.Field != "servers.git.allowed_domains[0]" || fe.File != "gateway.yaml" {
		t.Fatalf("err = %#v", err)
	}
}

func TestLoad(t *testing.T) {
	dir := t.TempDir()
	path := filepath.Join(dir, "gateway.yaml")
	if err := os.WriteFile(path, withFetch("policy_dir: pol\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	c, err := Load(path)
	if err != nil {
		t.Fatal(err)
	}
	if c.PolicyDir != filepath.Join(dir, "pol") || c.File() != path {
		t.Fatalf("got %+v", c)
	}
	if _, err := Load(filepath.Join(dir, "missing.yaml")); err == nil || !strings.Contains(err.Error(), "loading config") {
		t.Fatalf("missing file: %v", err)
	}
}

func FuzzParse(f *testing.F) {
	f.Add([]byte("sandbox: /workspace\nservers:\n  git:\n    allowed_domains: [github.com]\n"))
	f.Add([]byte("protected_branches: [main]\n"))
	f.Add([]byte("sandbox_safe_roles: [read-path, delete-path]\n"))
	f.Add([]byte("sandbox_safe_roles: []\n"))
	f.Add([]byte("a: &x [1]\nb: *x\n"))
	f.Fuzz(func(t *testing.T, data []byte) {
		c, err := Parse("/cfg/gateway.yaml", data)
		if err != nil {
			return
		}
		// A configuration that parsed is valid and usable.
		if err := c.Validate(); err != nil {
			t.Fatalf("Parse accepted a config Validate rejects: %v", err)
		}
		_ = c.PolicySettings()
	})
}

// textSection decodes itself from a string; checkKnown must not walk it.
type textSection struct{ v string }

func (s *textSection) UnmarshalText(b []byte) error { s.v = string(b); return nil }

func TestCheckKnownSkipsSelfDecodingTypes(t *testing.T) {
	type holder struct {
		S textSection `yaml:"s"`
	}
	var n yaml.Node
	if err := yaml.Unmarshal([]byte("s: {anything: goes}\n"), &n); err != nil {
		t.Fatal(err)
	}
	if err := checkKnown(n.Content[0], reflect.TypeOf(holder{}), ""); err != nil {
		t.Fatalf("checkKnown walked into a self-decoding type: %v", err)
	}
}
