package config

import (
	"errors"
	"os"
	"path/filepath"
	"strings"
	"testing"
)

func TestRemoteServerSettings(t *testing.T) {
	tests := []struct {
		name    string
		yaml    string
		wantErr []string
	}{
		{name: "url and command together", yaml: "servers:\n  notes:\n    url: https://notes.example.com/mcp\n    command: /bin/x\n",
			wantErr: []string{"servers.notes.url: is set together with command"}},
		{name: "url and image together", yaml: "servers:\n  notes:\n    url: https://notes.example.com/mcp\n    image: example/notes:1\n",
			wantErr: []string{"servers.notes.url: is set together with image"}},
		{name: "headers without url", yaml: "servers:\n  notes:\n    command: /bin/x\n    headers: {X-Key: a}\n",
			wantErr: []string{"servers.notes.headers: is set but url is not"}},
		{name: "bearer token file without url", yaml: "servers:\n  notes:\n    bearer_token_file: /run/t\n",
			wantErr: []string{"servers.notes.bearer_token_file: is set but url is not"}},
		{name: "allowed hosts without url", yaml: "servers:\n  notes:\n    allowed_hosts: [a.example]\n",
			wantErr: []string{"servers.notes.allowed_hosts: is set but url is not"}},
		{name: "userinfo in the url", yaml: "servers:\n  notes:\n    url: https://u:p@notes.example.com/mcp\n",
			wantErr: []string{"servers.notes.url"}},
		{name: "query in the url", yaml: "servers:\n  notes:\n    url: https://notes.example.com/mcp?key=abc\n",
			wantErr: []string{"servers.notes.url: must not carry a query"}},
		{name: "not http", yaml: "servers:\n  notes:\n    url: ftp://notes.example.com/mcp\n",
			wantErr: []string{"servers.notes.url"}},
		{name: "built-in name", yaml: "servers:\n  github:\n    url: https://api.githubcopilot.com/mcp/\n",
			wantErr: []string{`servers.github.url: "github" is a built-in server`}},
		{name: "reserved header", yaml: "servers:\n  notes:\n    url: https://notes.example.com/mcp\n    headers: {Mcp-Session-Id: x}\n",
			wantErr: []string{"servers.notes.headers.Mcp-Session-Id: is set by the gateway's MCP client"}},
		{name: "two authorizations", yaml: "servers:\n  notes:\n    url: https://notes.example.com/mcp\n    bearer_token_file: /run/t\n    headers: {Authorization: x}\n",
			wantErr: []string{"servers.notes.headers.Authorization: is set together with bearer_token_file"}},
		{name: "partial env reference", yaml: "servers:\n  notes:\n    url: https://notes.example.com/mcp\n    headers: {X-Key: \"k ${K}\"}\n",
			wantErr: []string{"servers.notes.headers.X-Key: a reference to the gateway's environment is the whole value"}},
		{name: "relative token file", yaml: "servers:\n  notes:\n    url: https://notes.example.com/mcp\n    bearer_token_file: t\n",
			wantErr: []string{"servers.notes.bearer_token_file: must be an absolute path"}},
		{name: "bad unsafe prefix", yaml: "servers:\n  notes:\n    url: http://notes:8000/mcp\n    unsafe_allow_addresses: [0.0.0.0/0]\n",
			wantErr: []string{"servers.notes.unsafe_allow_addresses[0]"}},
		{name: "unsafe prefix without url", yaml: "servers:\n  notes:\n    command: /x\n    unsafe_allow_addresses: [10.0.0.1]\n",
			wantErr: []string{"servers.notes.unsafe_allow_addresses: is set but url is not"}},
		{name: "plain http to a public host", yaml: "servers:\n  notes:\n    url: http://notes.example.com/mcp\n",
			wantErr: []string{"servers.notes.url: http is only for a sidecar"}},
		{name: "sidecar on loopback", yaml: "servers:\n  fetch:\n    allowed_domains: [\"*\"]\n  notes:\n    url: http://127.0.0.1:8000/mcp\n    unsafe_allow_addresses: [127.0.0.1]\n"},
		{name: "valid", yaml: "servers:\n  fetch:\n    allowed_domains: [\"*\"]\n  notes:\n    url: https://notes.example.com/mcp\n    bearer_token_file: /run/t\n    headers: {X-Tenant: acme, X-Key: \"${K}\"}\n    allowed_hosts: [notes.example.com]\n"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			c := mustParse(t, "/cfg/gateway.yaml", []byte(tt.yaml), tt.wantErr)
			if c == nil {
				return
			}
			if got := c.ExternalServers(); len(got) != 1 || got[0] != "notes" {
				t.Fatalf("external servers = %v", got)
			}
		})
	}
}

func TestRemoteHeaders(t *testing.T) {
	dir := t.TempDir()
	tok := filepath.Join(dir, "token")
	if err := os.WriteFile(tok, []byte("s3cret-token\n"), 0o600); err != nil {
		t.Fatal(err)
	}
	sc := ServerConfig{URL: "https://notes.example.com/mcp", BearerTokenFile: tok, Headers: map[string]string{"x-key": "${K}", "X-Tenant": "acme"}}
	h, err := sc.RemoteHeaders("notes", func(k string) string { return map[string]string{"K": "kv"}[k] })
	if err != nil {
		t.Fatal(err)
	}
	if h["Authorization"] != "Bearer s3cret-token" || h["X-Key"] != "kv" || h["X-Tenant"] != "acme" {
		t.Fatalf("headers = %v", h)
	}
	if _, err := sc.RemoteHeaders("notes", func(string) string { return "" }); err == nil || !strings.Contains(err.Error(), "servers.notes.headers.x-key") {
		t.Fatalf("unset reference: err = %v", err)
	}
	hosts, err := sc.RemoteAllowedHosts()
	if err != nil || len(hosts) != 1 {
		t.Fatalf("allowed hosts = %v, %v", hosts, err)
	}
}

// TestReadSecretFileRefusesExposedFiles: a token file that whatever the
// gateway starts (same uid aside, any other user or group) could read is
// refused, and no error carries the secret.
func TestReadSecretFileRefusesExposedFiles(t *testing.T) {
	dir := t.TempDir()
	tests := []struct {
		name    string
		mode    os.FileMode
		content string
		want    error
		wantMsg string
	}{
		{name: "owner only", mode: 0o600, content: "tok-1\n"},
		{name: "read-only owner", mode: 0o400, content: "tok-1"},
		{name: "group readable", mode: 0o640, content: "tok-1", want: ErrSecretFileExposed},
		{name: "world readable", mode: 0o604, content: "tok-1", want: ErrSecretFileExposed},
		{name: "group writable", mode: 0o620, content: "tok-1", want: ErrSecretFileExposed},
		{name: "empty", mode: 0o600, content: "\n", wantMsg: "empty"},
		{name: "two lines", mode: 0o600, content: "tok-1\ntok-2\n", wantMsg: "more than one line"},
	}
	for i, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			p := filepath.Join(dir, string(rune('a'+i)))
			if err := os.WriteFile(p, []byte(tt.content), 0o600); err != nil {
				t.Fatal(err)
			}
			if err := os.Chmod(p, tt.mode); err != nil {
				t.Fatal(err)
			}
			got, err := ReadSecretFile(p)
			switch {
			case tt.want == nil && tt.wantMsg == "":
				if err != nil || got != "tok-1" {
					t.Fatalf("got %q, %v", got, err)
				}
			case tt.want != nil && !errors.Is(err, tt.want):
				t.Fatalf("err = %v, want %v", err, tt.want)
			case tt.wantMsg != "" && (err == nil || !strings.Contains(err.Error(), tt.wantMsg)):
				t.Fatalf("err = %v, want %q", err, tt.wantMsg)
			}
			if err != nil && strings.Contains(err.Error(), "tok-") {
				t.Fatal("the error carries the secret")
			}
		})
	}
	if _, err := ReadSecretFile(dir); err == nil {
		t.Fatal("a directory was read as a secret")
	}
}

func TestSpoolKeyFile(t *testing.T) {
	dir := t.TempDir()
	p := filepath.Join(dir, "spool-key")
	hexKey := strings.Repeat("ab", 32)
	for _, tc := range []struct {
		name, content string
		mode          os.FileMode
		wantErr       string
	}{
		{name: "good", content: hexKey + "\n", mode: 0o600},
		{name: "world readable", content: hexKey, mode: 0o644, wantErr: "audit.spool_key_file: secret file mode"},
		{name: "short", content: "abcd", mode: 0o600, wantErr: "64 hex digits"},
		{name: "not hex", content: strings.Repeat("zz", 32), mode: 0o600, wantErr: "64 hex digits"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			if err := os.WriteFile(p, []byte(tc.content), 0o600); err != nil {
				t.Fatal(err)
			}
			if err := os.Chmod(p, tc.mode); err != nil {
				t.Fatal(err)
			}
			a := AuditSpoolConfig{SpoolKeyFile: p}
			key, err := a.SpoolKey()
			if tc.wantErr == "" {
				if err != nil || len(key) != 32 {
					t.Fatalf("key %d bytes, %v", len(key), err)
				}
				return
			}
			if err == nil || !strings.Contains(err.Error(), tc.wantErr) {
				t.Fatalf("err = %v, want %q", err, tc.wantErr)
			}
			if strings.Contains(err.Error(), "abab") {
				t.Fatal("the key is in the error")
			}
		})
	}
	if key, err := (&AuditSpoolConfig{}).SpoolKey(); key != nil || err != nil {
		t.Fatalf("no key file: %v, %v", key, err)
	}
}

func TestCatalogSetting(t *testing.T) {
	tests := []struct {
		name, yaml, wantErr string
		wantTools           int
	}{
		{name: "known version", yaml: "servers:\n  fetch:\n    allowed_domains: [\"*\"]\n  gh:\n    catalog: github@v1.10.1-3-g64a49f34\n    command: /usr/local/bin/github-mcp-server\n", wantTools: 44},
		{name: "no version", yaml: "servers:\n  gh:\n    catalog: github\n    command: /x\n", wantErr: "servers.gh.catalog: \"github\": name the version"},
		{name: "unknown version", yaml: "servers:\n  gh:\n    catalog: github@v0.0.0\n    command: /x\n", wantErr: "servers.gh.catalog: github version \"v0.0.0\": not in the catalog"},
		{name: "unknown server", yaml: "servers:\n  gh:\n    catalog: nosuch@1\n    url: https://x.example/mcp\n", wantErr: "servers.gh.catalog: server \"nosuch\": not in the catalog"},
		{name: "not external", yaml: "servers:\n  gh:\n    catalog: time@unpinned\n", wantErr: "servers.gh.catalog: is set but none of command, image and url is"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			c, err := Parse("/cfg/gateway.yaml", []byte(tt.yaml))
			if tt.wantErr != "" {
				if err == nil || !strings.Contains(err.Error(), tt.wantErr) {
					t.Fatalf("err = %v, want %q", err, tt.wantErr)
				}
				return
			}
			if err != nil {
				t.Fatal(err)
			}
			anns := c.PolicySettings().CatalogAnnotations
			if len(anns) != tt.wantTools || anns[0].Server != "gh" {
				t.Fatalf("%d catalog annotations (first server %q), want %d under gh", len(anns), anns[0].Server, tt.wantTools)
			}
		})
	}
}
