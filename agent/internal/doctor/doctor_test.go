package doctor

import (
	"bytes"
	"context"
	"encoding/base64"
	"errors"
	"net"
	"net/http"
	"net/http/httptest"
	"os"
	"path/filepath"
	"strings"
	"syscall"
	"testing"
)

// loopbackOnly dials 127.0.0.1 for real and refuses everything else, as the
// agent container's network does. No test reaches past this machine.
func loopbackOnly(reachable map[string]bool) func(ctx context.Context, network, addr string) (net.Conn, error) {
	return func(ctx context.Context, network, addr string) (net.Conn, error) {
		host, _, _ := net.SplitHostPort(addr)
		if host == "127.0.0.1" {
			var d net.Dialer
			return d.DialContext(ctx, network, addr)
		}
		if reachable[addr] {
			c1, c2 := net.Pipe()
			go c2.Close()
			return c1, nil
		}
		return nil, &net.OpError{Op: "dial", Net: network, Err: syscall.ENETUNREACH}
	}
}

// fakeProxy answers CONNECT: 407 without the right credentials, 200 for
// allowed hosts, 403 otherwise.
func fakeProxy(t *testing.T, token string, allowed map[string]bool) *httptest.Server {
	t.Helper()
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		want := "Basic " + base64.StdEncoding.EncodeToString([]byte("agent:"+token))
		if r.Method != http.MethodConnect || r.Header.Get("Proxy-Authorization") != want {
			http.Error(w, "proxy authentication required", http.StatusProxyAuthRequired)
			return
		}
		if allowed[r.Host] {
			w.WriteHeader(http.StatusOK)
			return
		}
		http.Error(w, "host not in allowlist", http.StatusForbidden)
	}))
	t.Cleanup(srv.Close)
	return srv
}

func find(checks []Check, name string) Check {
	for _, c := range checks {
		if c.Name == name {
			return c
		}
	}
	return Check{Name: "missing " + name}
}

func TestChecks(t *testing.T) {
	const token = "agent-token-0123456789abcdef"
	proxy := fakeProxy(t, token, map[string]bool{"github.com:443": true})
	proxyURL := "http://agent:" + token + "@" + strings.TrimPrefix(proxy.URL, "http://")
	mcpOK := func(context.Context) (int, error) { return 27, nil }

	tests := []struct {
		name    string
		mutate  func(c *Config)
		check   string
		wantOK  bool
		wantMsg string
	}{
		{name: "direct dial refused", check: "direct internet", wantOK: true, wantMsg: "no direct connection"},
		{name: "direct dial succeeds", mutate: func(c *Config) {
			c.DirectTargets = []string{"192.0.2.9:443", "192.0.2.1:443"}
			c.Dial = loopbackOnly(map[string]bool{"192.0.2.1:443": true})
		}, check: "direct internet", wantMsg: "route to the internet"},
		{name: "dns fails", check: "public DNS", wantOK: true, wantMsg: "does not resolve"},
		{name: "dns resolves but unreachable", mutate: func(c *Config) {
			c.LookupHost = func(context.Context, string) ([]string, error) { return []string{"192.0.2.7"}, nil }
		}, check: "public DNS", wantOK: true, wantMsg: "none is reachable"},
		{name: "dns resolves and reachable", mutate: func(c *Config) {
			c.LookupHost = func(context.Context, string) ([]string, error) { return []string{"192.0.2.7"}, nil }
			c.Dial = loopbackOnly(map[string]bool{"192.0.2.7:443": true})
		}, check: "public DNS", wantMsg: "reachable directly"},
		{name: "proxy refuses unlisted host", check: "egress proxy", wantOK: true, wantMsg: "refused unlisted ironcurtain-doctor.invalid:443 (403"},
		{name: "proxy output hides the token", check: "egress proxy", wantOK: true, wantMsg: "agent:xxxxx@"},
		{name: "proxy allows listed host", mutate: func(c *Config) { c.AllowedHost = "github.com:443" }, check: "proxy allowlist", wantOK: true, wantMsg: "allowed"},
		{name: "proxy lets unlisted through", mutate: func(c *Config) { c.UnlistedHost = "github.com:443" }, check: "egress proxy", wantMsg: "let an unlisted host through"},
		{name: "proxy rejects token", mutate: func(c *Config) { c.ProxyURL = strings.Replace(proxyURL, token, "wrong", 1) }, check: "egress proxy", wantMsg: "refused the agent token"},
		{name: "no proxy configured", mutate: func(c *Config) { c.ProxyURL = "" }, check: "egress proxy", wantMsg: "HTTPS_PROXY is not set"},
		{name: "proxy down", mutate: func(c *Config) { c.ProxyURL = "http://agent:x@127.0.0.1:1" }, check: "egress proxy", wantMsg: "did not answer"},
		{name: "mcp answers", check: "mcp endpoint", wantOK: true, wantMsg: "27 tools"},
		{name: "mcp fails", mutate: func(c *Config) {
			c.CheckMCP = func(context.Context) (int, error) { return 0, errors.New("401 Unauthorized") }
		}, check: "mcp endpoint", wantMsg: "401"},
		{name: "clean environment", check: "credential env vars", wantOK: true, wantMsg: "worthless outside"},
		{name: "credential env var by name", mutate: func(c *Config) {
			c.Environ = append(c.Environ, "GITHUB_TOKEN=ghp_x", "AWS_REGION=eu-west-1", "MY_API_KEY=1", "DB_PASSWORD=2")
		}, check: "credential env vars", wantMsg: "AWS_REGION, DB_PASSWORD, GITHUB_TOKEN, MY_API_KEY"},
		{name: "credential env var by value", mutate: func(c *Config) {
			c.Environ = append(c.Environ, "NOTES=sk-ant-api03-abcdefghijklmnopqrstuvwxyz")
		}, check: "credential env vars", wantMsg: "NOTES"},
		{name: "clean home", check: "credential files", wantOK: true, wantMsg: "none found"},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			home := t.TempDir()
			cfg := Config{
				Environ:    []string{"PATH=/usr/bin", "HOME=" + home, "IRONCURTAIN_AGENT_TOKEN=" + token, "HTTPS_PROXY=" + proxyURL, "IRONCURTAIN_MCP_URL=http://gateway:8080/mcp"},
				Home:       home,
				SystemRoot: t.TempDir(),
				ProxyURL:   proxyURL,
				CheckMCP:   mcpOK,
				Dial:       loopbackOnly(nil),
				LookupHost: func(context.Context, string) ([]string, error) {
					return nil, &net.DNSError{Err: "server misbehaving", Name: "example.com"}
				},
			}
			if tc.mutate != nil {
				tc.mutate(&cfg)
			}
			checks := Run(context.Background(), cfg)
			c := find(checks, tc.check)
			if c.OK != tc.wantOK || !strings.Contains(c.Detail, tc.wantMsg) {
				t.Errorf("%s = ok %v %q, want ok %v and %q", tc.check, c.OK, c.Detail, tc.wantOK, tc.wantMsg)
			}
			var out bytes.Buffer
			Print(&out, checks)
			if strings.Contains(out.String(), token) || strings.Contains(out.String(), "ghp_x") || strings.Contains(out.String(), "sk-ant-api03") {
				t.Errorf("doctor output leaks a secret:\n%s", out.String())
			}
		})
	}
}

func TestCredentialFiles(t *testing.T) {
	tests := []struct {
		name  string
		files []string
		dirs  []string
		want  string
	}{
		{name: "ssh key", files: []string{".ssh/id_ed25519"}, want: ".ssh/id_ed25519"},
		{name: "git credentials", files: []string{".git-credentials"}, want: ".git-credentials"},
		{name: "gh hosts", files: []string{".config/gh/hosts.yml"}, want: "hosts.yml"},
		{name: "netrc", files: []string{".netrc"}, want: ".netrc"},
		{name: "aws", files: []string{".aws/credentials"}, want: ".aws/credentials"},
		{name: "docker config", files: []string{".docker/config.json"}, want: "config.json"},
		{name: "empty ssh dir is fine", dirs: []string{".ssh"}, want: ""},
		{name: "public key alone is fine", files: []string{".ssh/known_hosts"}, want: ""},
		{name: "docker socket", files: []string{"/var/run/docker.sock"}, want: "docker.sock"},
		{name: "mounted secrets", files: []string{"/run/secrets/github_token"}, want: "/run/secrets"},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			home := t.TempDir()
			for _, d := range tc.dirs {
				if err := os.MkdirAll(filepath.Join(home, d), 0o700); err != nil {
					t.Fatal(err)
				}
			}
			root := t.TempDir()
			for _, f := range tc.files {
				p := filepath.Join(home, f)
				if filepath.IsAbs(f) {
					p = filepath.Join(root, f)
				}
				if err := os.MkdirAll(filepath.Dir(p), 0o700); err != nil {
					t.Fatal(err)
				}
				if err := os.WriteFile(p, []byte("TOPSECRETCONTENT"), 0o600); err != nil {
					t.Fatal(err)
				}
			}
			c := checkFiles(home, root, nil)
			if tc.want == "" {
				if !c.OK {
					t.Errorf("flagged: %s", c.Detail)
				}
				return
			}
			if c.OK || !strings.Contains(c.Detail, tc.want) {
				t.Errorf("got ok %v %q, want %q flagged", c.OK, c.Detail, tc.want)
			}
			if strings.Contains(c.Detail, "TOPSECRETCONTENT") {
				t.Errorf("file content printed")
			}
		})
	}
}

func TestPrintCountsFailures(t *testing.T) {
	var b bytes.Buffer
	n := Print(&b, []Check{{Name: "a", OK: true, Detail: "fine"}, {Name: "b", Detail: "bad"}})
	if n != 1 || strings.Count(b.String(), "\n") != 2 || !strings.Contains(b.String(), "FAIL b") {
		t.Errorf("n=%d out=%q", n, b.String())
	}
}
