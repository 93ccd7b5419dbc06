package gatewayconfig

import (
	"os"
	"path/filepath"
	"reflect"
	"strings"
	"testing"

	gwconfig "ironcurtain.dev/gateway/config"
)

func write(t *testing.T, name, body string) string {
	t.Helper()
	p := filepath.Join(t.TempDir(), name)
	if err := os.WriteFile(p, []byte(body), 0o600); err != nil {
		t.Fatal(err)
	}
	return p
}

func TestLoad(t *testing.T) {
	tests := []struct {
		name    string
		file    string
		body    string
		check   func(t *testing.T, c *Config)
		wantErr string
	}{
		{
			name: "gateway.yaml",
			file: "gateway.yaml",
			body: `sandbox: /srv/work
protected_paths: [~/.ssh, secrets]
protected_branches: [main, release/*]
egress: {listen: ":3128"}
servers:
  git:
    allowed_domains: [github.com, "*.github.com"]
  fetch:
    allowed_domains: ["*"]
  notes:
    command: /usr/bin/notes-mcp
    args: [--stdio]
    env: {NOTES_DIR: /data}
`,
			check: func(t *testing.T, c *Config) {
				s := c.Settings("/home/u")
				if s.Sandbox != "/srv/work" || s.Home != "/home/u" {
					t.Errorf("settings = %+v", s)
				}
				if s.ProtectedPaths[0] != "/home/u/.ssh" || !strings.HasSuffix(s.ProtectedPaths[1], "/secrets") || !strings.HasSuffix(s.ProtectedPaths[2], "gateway.yaml") {
					t.Errorf("protected = %v", s.ProtectedPaths)
				}
				if !reflect.DeepEqual(s.DomainAllowlists, map[string][]string{"git": {"github.com", "*.github.com"}, "fetch": {"*"}}) {
					t.Errorf("allowlists = %v", s.DomainAllowlists)
				}
				if len(c.Servers) != 3 || c.Servers[2].Name != "notes" || !c.Servers[2].External() || c.Servers[1].External() {
					t.Errorf("servers = %+v", c.Servers)
				}
				// The gateway's settings, not a subset: the confined servers
				// and the secret scan take part in decisions.
				if len(s.ConfinedServers) == 0 || !reflect.DeepEqual(s.ProtectedBranches, []string{"main", "release/*"}) {
					t.Errorf("settings are not the gateway's: %+v", s)
				}
			},
		},
		{
			name: "default sandbox",
			file: "gateway.yaml",
			body: "servers: {fetch: {allowed_domains: [\"*\"]}}\n",
			check: func(t *testing.T, c *Config) {
				if c.Sandbox != gwconfig.DefaultSandbox {
					t.Errorf("sandbox = %q", c.Sandbox)
				}
			},
		},
		{
			name: "mcp-servers.json wrapped",
			file: "mcp-servers.json",
			body: `{"mcpServers": {"fs": {"command": "npx", "args": ["-y", "@modelcontextprotocol/server-filesystem", "/tmp"]}}}`,
			check: func(t *testing.T, c *Config) {
				if len(c.Servers) != 1 || c.Servers[0].Command != "npx" || len(c.Servers[0].Args) != 3 {
					t.Errorf("servers = %+v", c.Servers)
				}
			},
		},
		{
			name: "mcp-servers.json bare",
			file: "servers.json",
			body: `{"fs": {"command": "srv"}}`,
			check: func(t *testing.T, c *Config) {
				if len(c.Servers) != 1 || c.Servers[0].Name != "fs" {
					t.Errorf("servers = %+v", c.Servers)
				}
			},
		},
		{
			name: "sandbox-safe roles",
			file: "gateway.yaml",
			body: "sandbox_safe_roles: [read-path]\nservers: {fetch: {allowed_domains: [\"*\"]}}\n",
			check: func(t *testing.T, c *Config) {
				if s := c.Settings("/h"); len(s.SandboxSafeRoles) != 1 || s.SandboxSafeRoles[0] != "read-path" {
					t.Errorf("sandbox-safe roles = %v", s.SandboxSafeRoles)
				}
			},
		},
		{name: "non-path sandbox-safe role", file: "gateway.yaml", body: "sandbox_safe_roles: [fetch-url]\n", wantErr: "sandbox_safe_roles[0]"},
		{name: "duplicate sandbox-safe role", file: "gateway.yaml", body: "sandbox_safe_roles: [read-path, read-path]\n", wantErr: "sandbox_safe_roles[1]: duplicate"},
		{name: "bad domain", file: "gateway.yaml", body: "servers:\n  git:\n    allowed_domains: [\"*.\"]\n", wantErr: "servers.git.allowed_domains[0]"},
		{name: "bad server name", file: "s.json", body: `{"a__b": {"command": "x"}}`, wantErr: `"__"`},
		{name: "bad yaml", file: "gateway.yaml", body: "servers: [", wantErr: "gateway.yaml"},
		// The compiler read gateway.yaml leniently: a file serve refuses (an
		// empty fetch allowlist lets every domain past the structural check,
		// a misspelt key is silently ignored) was compiled and verified.
		{name: "empty fetch allowlist", file: "gateway.yaml", body: "servers:\n  fetch:\n    allowed_domains: []\n", wantErr: "gateway.yaml: servers.fetch.allowed_domains: must list"},
		{name: "unknown key", file: "gateway.yaml", body: "sandbx: /w\nservers: {fetch: {allowed_domains: [\"*\"]}}\n", wantErr: "gateway.yaml: sandbx: unknown key (line 1)"},
		{name: "root sandbox", file: "gateway.yaml", body: "sandbox: /\nservers: {fetch: {allowed_domains: [\"*\"]}}\n", wantErr: "gateway.yaml: sandbox:"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			t.Setenv("HOME", "/home/u") // the gateway's loader expands ~ from $HOME
			c, err := Load(write(t, tt.file, tt.body))
			if tt.wantErr != "" {
				if err == nil || !strings.Contains(err.Error(), tt.wantErr) {
					t.Fatalf("err = %v, want %q", err, tt.wantErr)
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

func FuzzLoad(f *testing.F) {
	f.Add("sandbox: /w\nservers:\n  git:\n    allowed_domains: [github.com]\n", false)
	f.Add(`{"mcpServers": {"a": {"command": "x", "args": ["y"], "env": {"K": "V"}}}}`, true)
	f.Add("servers: {a: {command: [1]}}", false)
	f.Fuzz(func(t *testing.T, body string, isJSON bool) {
		name := "gateway.yaml"
		if isJSON {
			name = "servers.json"
		}
		p := filepath.Join(t.TempDir(), name)
		if err := os.WriteFile(p, []byte(body), 0o600); err != nil {
			t.Fatal(err)
		}
		c, err := Load(p)
		if err != nil {
			return
		}
		if !filepath.IsAbs(c.Sandbox) {
			t.Fatalf("relative sandbox %q", c.Sandbox)
		}
		for _, s := range c.Servers {
			if s.Name == "" || strings.Contains(s.Name, "__") {
				t.Fatalf("accepted server name %q", s.Name)
			}
		}
		_ = c.Settings("/home/u")
	})
}
