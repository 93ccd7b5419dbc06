package config

import (
	"errors"
	"os"
	"strings"
	"testing"
	"time"
)

func TestHubSections(t *testing.T) {
	tests := []struct {
		name    string
		yaml    string
		wantErr []string
		check   func(t *testing.T, c *Config)
	}{
		{
			name: "external server and sections",
			yaml: `
servers:
  notes:
    command: /usr/local/bin/notes-mcp
    args: ["--stdio"]
    env:
      NOTES_DIR: /srv/notes
      NOTES_TOKEN: ${NOTES_TOKEN}
    allowed_domains: [notes.example.com]
  fetch:
    allowed_domains: [docs.example.com]
mcp:
  max_result_bytes: 65536
  call_timeout: 30s
github:
  api_url: https://github.example.com/api/v3/
  token_file: /run/secrets/github_token
fetch:
  max_redirects: 3
  allowed_ports: [443]
`,
			check: func(t *testing.T, c *Config) {
				if got := c.ExternalServers(); len(got) != 1 || got[0] != "notes" {
					t.Fatalf("external servers = %v", got)
				}
				if c.MCP.MaxResultBytes != 65536 || c.MCP.CallTimeout != 30*time.Second {
					t.Fatalf("mcp = %+v", c.MCP)
				}
				if c.GitHub.TokenVariable() != "GITHUB_TOKEN" || c.GitHub.TokenFile != "/run/secrets/github_token" {
					t.Fatalf("github = %+v", c.GitHub)
				}
				if c.Fetch.MaxRedirects != 3 || len(c.Fetch.AllowedPorts) != 1 {
					t.Fatalf("fetch = %+v", c.Fetch)
				}
				env, err := c.Servers["notes"].LaunchEnv("notes", func(k string) string {
					if k == "NOTES_TOKEN" {
						return "tok"
					}
					return ""
				})
				if err != nil || env["NOTES_TOKEN"] != "tok" || env["NOTES_DIR"] != "/srv/notes" {
					t.Fatalf("env = %v, %v", env, err)
				}
			},
		},
		{
			name:    "built-in name with a command",
			yaml:    "servers:\n  git:\n    command: /bin/git-mcp\n",
			wantErr: []string{`gateway.yaml: servers.git.command: "git" is a built-in server`},
		},
		{
			name:    "args without command",
			yaml:    "servers:\n  notes:\n    args: [x]\n",
			wantErr: []string{"servers.notes.args: is set but command is not"},
		},
		{
			name:    "env without command",
			yaml:    "servers:\n  notes:\n    env: {A: b}\n",
			wantErr: []string{"servers.notes.env: is set but command is not"},
		},
		{
			name:    "upper-case external name",
			yaml:    "servers:\n  Notes:\n    command: /bin/x\n",
			wantErr: []string{"servers.Notes: an external server name"},
		},
		{
			name:    "bad env name",
			yaml:    "servers:\n  notes:\n    command: /bin/x\n    env: {\"BAD-NAME\": x}\n",
			wantErr: []string{"servers.notes.env.BAD-NAME: is not a valid environment variable name"},
		},
		{
			name:    "partial env reference",
			yaml:    "servers:\n  notes:\n    command: /bin/x\n    env: {TOKEN: \"Bearer ${T}\"}\n",
			wantErr: []string{"servers.notes.env.TOKEN: a reference to the gateway's environment is the whole value"},
		},
		{
			name:    "unknown key in a server",
			yaml:    "servers:\n  notes:\n    command: /bin/x\n    cwd: /tmp\n",
			wantErr: []string{"servers.notes.cwd: unknown key"},
		},
		{
			name:    "mcp limits",
			yaml:    "mcp:\n  max_result_bytes: -1\n  call_timeout: 10ms\n  progress_every: 1ms\n",
			wantErr: []string{"mcp.max_result_bytes", "mcp.call_timeout: must be at least 1s", "mcp.progress_every"},
		},
		{
			name:    "mcp session and in-flight caps",
			yaml:    "mcp:\n  max_sessions: -1\n  max_sessions_per_token: 2000000\n  max_calls_in_flight: 5000\n",
			wantErr: []string{"mcp.max_sessions: must be between", "mcp.max_sessions_per_token: must be between", "mcp.max_calls_in_flight: must be between"},
		},
		{
			name:    "github settings",
			yaml:    "github:\n  api_url: ftp://x\n  token_env: \"1X\"\n  token_file: secrets/token\n",
			wantErr: []string{"github.api_url", "github.token_env", "github.token_file: must be an absolute path"},
		},
		{
			name:    "github credentials in the url",
			yaml:    "github:\n  api_url: https://user:pw@api.github.com/\n",
			wantErr: []string{"github.api_url: must be an absolute http(s) URL without credentials"},
		},
		{
			name:    "fetch limits",
			yaml:    "fetch:\n  max_redirects: 50\n  allowed_ports: [443, 70000]\n",
			wantErr: []string{"fetch.max_redirects", "fetch.allowed_ports[1]: port 70000"},
		},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			c := mustParse(t, "/cfg/gateway.yaml", withFetch(tt.yaml), tt.wantErr)
			if c == nil {
				return
			}
			tt.check(t, c)
		})
	}
}

func TestLaunchEnvMissingSecret(t *testing.T) {
	s := ServerConfig{Command: "/bin/x", Env: map[string]string{"TOKEN": "${NOTES_TOKEN}"}}
	_, err := s.LaunchEnv("notes", func(string) string { return "" })
	var fe *FieldError
	if !errors.As(err, &fe) || fe.Field != "servers.notes.env.TOKEN" || !strings.Contains(err.Error(), "$NOTES_TOKEN") {
		t.Fatalf("err = %v", err)
	}
}

func TestGitHubToken(t *testing.T) {
	file := t.TempDir() + "/token"
	if err := os.WriteFile(file, []byte("ghp_fromfile\n"), 0o600); err != nil {
		t.Fatal(err)
	}
	env := func(k string) string {
		return map[string]string{"GITHUB_TOKEN": "ghp_fromenv", "GH_BOT": " ghp_bot "}[k]
	}
	tests := []struct {
		name    string
		cfg     GitHubConfig
		want    string
		wantErr string
	}{
		{name: "default variable", cfg: GitHubConfig{}, want: "ghp_fromenv"},
		{name: "named variable", cfg: GitHubConfig{TokenEnv: "GH_BOT"}, want: "ghp_bot"},
		{name: "file wins", cfg: GitHubConfig{TokenFile: file}, want: "ghp_fromfile"},
		{name: "missing file", cfg: GitHubConfig{TokenFile: file + ".nope"}, wantErr: "github.token_file: reading the token"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			got, err := tt.cfg.Token(env)
			if tt.wantErr != "" {
				if err == nil || !strings.Contains(err.Error(), tt.wantErr) {
					t.Fatalf("err = %v", err)
				}
				return
			}
			if err != nil || got != tt.want {
				t.Fatalf("Token = %q, %v", got, err)
			}
		})
	}
}
