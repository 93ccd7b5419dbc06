package cli

import (
	"bytes"
	"context"
	"net"
	"net/http"
	"net/http/httptest"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"ironcurtain.dev/gateway/config"
)

func TestProbeAddr(t *testing.T) {
	tests := []struct {
		name, listen, want string
	}{
		{name: "port only", listen: ":8080", want: "127.0.0.1:8080"},
		{name: "IPv4 wildcard", listen: "0.0.0.0:8081", want: "127.0.0.1:8081"},
		{name: "IPv6 wildcard", listen: "[::]:3128", want: "[::1]:3128"},
		{name: "network alias kept", listen: "gateway-ops:8081", want: "gateway-ops:8081"},
		{name: "loopback kept", listen: "127.0.0.1:9000", want: "127.0.0.1:9000"},
		{name: "unparsable passed through", listen: "nonsense", want: "nonsense"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			if got := probeAddr(tt.listen); got != tt.want {
				t.Errorf("probeAddr(%q) = %q, want %q", tt.listen, got, tt.want)
			}
		})
	}
}

func TestConfigFromArgs(t *testing.T) {
	tests := []struct {
		name    string
		args    []string
		want    string
		wantErr bool
	}{
		{name: "separate value", args: []string{"ironcurtain", "serve", "--config", "/etc/ic/e2e.yaml"}, want: "/etc/ic/e2e.yaml"},
		{name: "equals form", args: []string{"/usr/local/bin/ironcurtain", "serve", "--log-level", "debug", "-config=/x.yaml"}, want: "/x.yaml"},
		{name: "serve without config", args: []string{"ironcurtain", "serve"}, want: DefaultConfigPath},
		{name: "behind docker-init", args: []string{"/sbin/docker-init", "--", "ironcurtain", "serve", "--config", "/c.yaml"}, want: "/c.yaml"},
		{name: "a program named like it", args: []string{"/usr/bin/not-ironcurtain", "serve", "--config", "/z"}, wantErr: true},
		{name: "another subcommand", args: []string{"ironcurtain", "migrate", "up"}, wantErr: true},
		{name: "another program", args: []string{"/srv/e2e/ic-e2e-internet", "serve", "--config", "/y"}, wantErr: true},
		{name: "empty", args: nil, wantErr: true},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			got, err := configFromArgs(tt.args)
			if (err != nil) != tt.wantErr {
				t.Fatalf("configFromArgs(%q) error = %v, wantErr %v", tt.args, err, tt.wantErr)
			}
			if got != tt.want {
				t.Errorf("configFromArgs(%q) = %q, want %q", tt.args, got, tt.want)
			}
		})
	}
}

func TestServeConfigPath(t *testing.T) {
	dir := t.TempDir()
	cmdline := filepath.Join(dir, "cmdline")
	if err := os.WriteFile(cmdline, []byte("ironcurtain\x00serve\x00--config\x00/etc/ironcurtain/e2e/gateway.yaml\x00"), 0o644); err != nil {
		t.Fatal(err)
	}
	if got := serveConfigPath(cmdline); got != "/etc/ironcurtain/e2e/gateway.yaml" {
		t.Errorf("serveConfigPath = %q", got)
	}
	if got := serveConfigPath(filepath.Join(dir, "missing")); got != DefaultConfigPath {
		t.Errorf("serveConfigPath(missing) = %q, want the default", got)
	}
}

// fakeListeners serves /healthz and /readyz like the gateway's agent and
// ops listeners, with the given /readyz status.
func fakeListeners(t *testing.T, readyStatus int) (agent, ops string) {
	t.Helper()
	ok := func(w http.ResponseWriter, _ *http.Request) { _, _ = w.Write([]byte("ok\n")) }
	a := http.NewServeMux()
	a.HandleFunc("/healthz", ok)
	o := http.NewServeMux()
	o.HandleFunc("/healthz", ok)
	o.HandleFunc("/readyz", func(w http.ResponseWriter, _ *http.Request) {
		w.WriteHeader(readyStatus)
		_, _ = w.Write([]byte(`{"error":{"code":"not_ready"}}`))
	})
	as, osrv := httptest.NewServer(a), httptest.NewServer(o)
	t.Cleanup(as.Close)
	t.Cleanup(osrv.Close)
	return as.Listener.Addr().String(), osrv.Listener.Addr().String()
}

func writeConfig(t *testing.T, agent, ops string) string {
	t.Helper()
	p := filepath.Join(t.TempDir(), "gateway.yaml")
	body := "agent:\n  listen: \"" + agent + "\"\nops:\n  listen: \"" + ops + "\"\nservers:\n  fetch:\n    allowed_domains: [\"*\"]\n"
	if err := os.WriteFile(p, []byte(body), 0o644); err != nil {
		t.Fatal(err)
	}
	return p
}

func TestRunHealthcheck(t *testing.T) {
	readyAgent, readyOps := fakeListeners(t, http.StatusOK)
	downAgent, downOps := fakeListeners(t, http.StatusServiceUnavailable)
	closed := func() string {
		ln, err := net.Listen("tcp", "127.0.0.1:0")
		if err != nil {
			t.Fatal(err)
		}
		addr := ln.Addr().String()
		ln.Close()
		return addr
	}()
	tests := []struct {
		name     string
		args     []string
		config   string
		wantCode int
		wantOut  []string
	}{
		{name: "both ready", config: writeConfig(t, readyAgent, readyOps), wantCode: 0, wantOut: []string{"ok   agent API", "ok   ops API", "/readyz"}},
		{name: "database down fails readiness", config: writeConfig(t, downAgent, downOps), wantCode: 1, wantOut: []string{"ok   agent API", "FAIL ops API", "status 503"}},
		{name: "database down still live", args: []string{"--live"}, config: writeConfig(t, downAgent, downOps), wantCode: 0, wantOut: []string{"ok   ops API", "/healthz"}},
		{name: "agent listener gone", config: writeConfig(t, closed, readyOps), wantCode: 1, wantOut: []string{"FAIL agent API"}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			var out, errb bytes.Buffer
			args := append([]string{"--config", tt.config}, tt.args...)
			code := runHealthcheck(context.Background(), Env{Args: args, Getenv: func(string) string { return "" }, Stdout: &out, Stderr: &errb})
			if code != tt.wantCode {
				t.Fatalf("exit %d, want %d\nstdout:\n%s\nstderr:\n%s", code, tt.wantCode, out.String(), errb.String())
			}
			for _, w := range tt.wantOut {
				if !strings.Contains(out.String(), w) {
					t.Errorf("output lacks %q:\n%s", w, out.String())
				}
			}
		})
	}
}

func TestRunHealthcheckBadConfig(t *testing.T) {
	p := filepath.Join(t.TempDir(), "gateway.yaml")
	if err := os.WriteFile(p, []byte("agent:\n  lisen: \":8080\"\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	var out, errb bytes.Buffer
	code := runHealthcheck(context.Background(), Env{Args: []string{"--config", p}, Getenv: func(string) string { return "" }, Stdout: &out, Stderr: &errb})
	if code != 1 || !strings.Contains(errb.String(), "lisen") {
		t.Fatalf("exit %d, stderr %q: want 1 and an error naming the unknown key", code, errb.String())
	}
}

// TestShippedConfigsParse loads the gateway.yaml files that ship with the
// images and the Compose stack: the gateway parses its configuration
// strictly and would refuse to start on a typo.
func TestShippedConfigsParse(t *testing.T) {
	root := filepath.Join("..", "..", "..")
	for _, rel := range []string{"images/gateway/gateway.yaml", "compose/gateway.yaml", "compose/gateway.servers.yaml", "compose/cloudrun/gateway.yaml", "compose/kubernetes/base/gateway.yaml"} {
		t.Run(rel, func(t *testing.T) {
			cfg, err := config.Load(filepath.Join(root, rel))
			if err != nil {
				t.Fatal(err)
			}
			// serve refuses to start without a fetch allowlist.
			if len(cfg.Servers["fetch"].AllowedDomains) == 0 {
				t.Errorf("%s: servers.fetch.allowed_domains is empty; serve would refuse to start", rel)
			}
			if cfg.Sandbox != "/workspace" || cfg.PolicyDir != "/etc/ironcurtain/policy" {
				t.Errorf("%s: sandbox %q, policy_dir %q: the images put them at /workspace and /etc/ironcurtain/policy", rel, cfg.Sandbox, cfg.PolicyDir)
			}
			if cfg.Database.UnsafeNoDatabase {
				t.Errorf("%s: database.unsafe_no_database is set", rel)
			}
			if len(cfg.Egress.UnsafeAllowAddresses) > 0 || cfg.Egress.UnsafeSkipSNICheck || cfg.Relay.UnsafeAllowServerTools {
				t.Errorf("%s: an Unsafe switch is on", rel)
			}
		})
	}
}
