package main

import (
	"bytes"
	"context"
	"fmt"
	"io"
	"log/slog"
	"maps"
	"net"
	"net/http"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"ironcurtain.dev/gateway/internal/store"
	"ironcurtain.dev/gateway/internal/store/pgtest"
)

func TestMain(m *testing.M) {
	if os.Getenv(runTestAgentEnv) == "1" { // the stand-in agent of TestRunDocker, in its container
		os.Exit(runTestAgent())
	}
	os.Exit(pgtest.Main(m))
}

const (
	testAgentToken    = "agent-token-for-serve-test-0123"
	testOperatorToken = "operator-token-for-serve-test-0123"
)

// freeAddr returns a loopback address that was free a moment ago.
func freeAddr(t *testing.T) string {
	t.Helper()
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	defer ln.Close()
	return ln.Addr().String()
}

type servedGateway struct {
	api, proxy, ops string
	sandbox         string // the configured sandbox
}

// startGateway runs serve with the shipped policy on a fresh database and
// returns its addresses; the gateway stops at the end of the test. extra
// adds environment variables (serve_tracing_test.go: OTEL_*).
func startGateway(t *testing.T, extra ...map[string]string) servedGateway {
	t.Helper()
	return startGatewayYAML(t, "", extra...)
}

// startGatewayYAML is startGateway with more gateway.yaml (top-level
// sections appended to the file).
func startGatewayYAML(t *testing.T, moreYAML string, extra ...map[string]string) servedGateway {
	t.Helper()
	return startGatewayWith(t, nil, moreYAML, extra...)
}

// startGatewayWith is startGatewayYAML with more servers: moreServers
// returns the entries under servers: (indented by two spaces) for the
// gateway's addresses (as an external server that dials the proxy needs).
func startGatewayWith(t *testing.T, moreServers func(servedGateway) string, moreYAML string, extra ...map[string]string) servedGateway {
	t.Helper()
	db := pgtest.New(t)
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	t.Cleanup(cancel)
	if _, err := store.MigrateUp(ctx, db.Pool, 0); err != nil {
		t.Fatal(err)
	}
	dir := t.TempDir()
	sandbox := filepath.Join(dir, "workspace")
	if err := os.Mkdir(sandbox, 0o755); err != nil {
		t.Fatal(err)
	}
	policyDir, err := filepath.Abs("../../policies/base")
	if err != nil {
		t.Fatal(err)
	}
	g := servedGateway{api: freeAddr(t), proxy: freeAddr(t), ops: freeAddr(t), sandbox: sandbox}
	servers := ""
	if moreServers != nil {
		servers = moreServers(g)
	}
	cfg := fmt.Sprintf(`sandbox: %s
policy_dir: %s
servers:
  fetch:
    allowed_domains: [example.com]
%sagent:
  listen: %s
egress:
  listen: %s
  allowed_hosts: [example.com]
ops:
  listen: %s
git:
  mirror_dir: %s
audit:
  spool_dir: %s
`, sandbox, policyDir, servers, g.api, g.proxy, g.ops, filepath.Join(dir, "mirror"), filepath.Join(dir, "spool")) + moreYAML
	cfgPath := filepath.Join(dir, "gateway.yaml")
	if err := os.WriteFile(cfgPath, []byte(cfg), 0o600); err != nil {
		t.Fatal(err)
	}
	env := map[string]string{
		"IRONCURTAIN_DATABASE_URL":   db.DSN,
		"IRONCURTAIN_AGENT_TOKEN":    testAgentToken,
		"IRONCURTAIN_OPERATOR_TOKEN": testOperatorToken,
		"PATH":                       os.Getenv("PATH"),
	}
	for _, m := range extra {
		maps.Copy(env, m)
	}
	getenv := func(k string) string { return env[k] }

	var logs bytes.Buffer
	serveUntilReady(t, cfgPath, getenv, slog.New(slog.NewJSONHandler(&syncWriter{w: &logs}, nil)), "http://"+g.api+"/healthz")
	return g
}

// serveUntilReady runs serve in the background until the test ends (then
// it must stop, without error, within 30s) and waits up to 30s for ready
// to answer 200; serve ending first fails the test.
func serveUntilReady(t *testing.T, cfgPath string, getenv func(string) string, log *slog.Logger, ready string) {
	t.Helper()
	ctx, stop := context.WithCancel(context.Background())
	done := make(chan error, 1)
	go func() { done <- serve(ctx, cfgPath, getenv, log) }()
	t.Cleanup(func() {
		stop()
		select {
		case err := <-done:
			if err != nil {
				t.Errorf("serve returned %v", err)
			}
		case <-time.After(30 * time.Second):
			t.Error("serve did not stop within 30s")
		}
	})
	deadline := time.Now().Add(30 * time.Second)
	for {
		resp, err := http.Get(ready)
		if err == nil {
			resp.Body.Close()
			if resp.StatusCode == http.StatusOK {
				return
			}
		}
		select {
		case err := <-done:
			t.Fatalf("serve ended early: %v", err)
		default:
		}
		if time.Now().After(deadline) {
			t.Fatalf("gateway did not answer %s: %v", ready, err)
		}
		time.Sleep(100 * time.Millisecond)
	}
}

type syncWriter struct{ w io.Writer }

func (s *syncWriter) Write(p []byte) (int, error) { return s.w.Write(append([]byte(nil), p...)) }

// TestServeWiring checks what only the wiring can get wrong: each port
// serves what it should, and each token works only where it belongs.
func TestServeWiring(t *testing.T) {
	g := startGateway(t)
	mcpInit := `{"jsonrpc":"2.0","id":1,"method":"initialize","params":{"protocolVersion":"2025-06-18","capabilities":{},"clientInfo":{"name":"t","version":"1"}}}`
	tests := []struct {
		name       string
		method     string
		url        string
		auth       string
		body       string
		header     map[string]string
		wantStatus int
		wantBody   string
	}{
		{name: "agent api health", method: "GET", url: "http://" + g.api + "/healthz", wantStatus: 200},
		{name: "ops ready", method: "GET", url: "http://" + g.ops + "/readyz", wantStatus: 200},
		{name: "ops health names the build", method: "GET", url: "http://" + g.ops + "/healthz", wantStatus: 200, wantBody: `"go":"go1.`},
		{name: "ops metrics name the build", method: "GET", url: "http://" + g.ops + "/metrics", auth: "Bearer " + testOperatorToken, wantStatus: 200, wantBody: "ironcurtain_build_info{go=\"go1."},
		{name: "mcp without token", method: "POST", url: "http://" + g.api + "/mcp", body: mcpInit, wantStatus: 401},
		{name: "mcp with operator token", method: "POST", url: "http://" + g.api + "/mcp", auth: "Bearer " + testOperatorToken, body: mcpInit, wantStatus: 401},
		{name: "mcp with agent token", method: "POST", url: "http://" + g.api + "/mcp", auth: "Bearer " + testAgentToken, body: mcpInit, wantStatus: 200},
		{name: "ops with agent token", method: "GET", url: "http://" + g.ops + "/v1/escalations", auth: "Bearer " + testAgentToken, wantStatus: 401},
		{name: "ops metrics with agent token", method: "GET", url: "http://" + g.ops + "/metrics", auth: "Bearer " + testAgentToken, wantStatus: 401},
		{name: "ops metrics with operator token", method: "GET", url: "http://" + g.ops + "/metrics", auth: "Bearer " + testOperatorToken, wantStatus: 200, wantBody: "ironcurtain_mcp_auth_failures_total"},
		{name: "ops not on the agent port", method: "GET", url: "http://" + g.api + "/v1/escalations", auth: "Bearer " + testOperatorToken, wantStatus: 404},
		{name: "mcp not on the ops port", method: "POST", url: "http://" + g.ops + "/mcp", auth: "Bearer " + testAgentToken, body: mcpInit, wantStatus: 404},
		{name: "relay names the missing key", method: "POST", url: "http://" + g.api + "/llm/anthropic/v1/messages", header: map[string]string{"x-api-key": testAgentToken, "anthropic-version": "2023-06-01"}, body: `{"model":"claude-sonnet-4-5","max_tokens":5,"messages":[{"role":"user","content":"hi"}]}`, wantStatus: 503, wantBody: "ANTHROPIC_API_KEY"},
		{name: "relay with operator token", method: "POST", url: "http://" + g.api + "/llm/anthropic/v1/messages", header: map[string]string{"x-api-key": testOperatorToken}, body: `{}`, wantStatus: 401},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			req, err := http.NewRequest(tt.method, tt.url, strings.NewReader(tt.body))
			if err != nil {
				t.Fatal(err)
			}
			if tt.auth != "" {
				req.Header.Set("Authorization", tt.auth)
			}
			if tt.body != "" {
				req.Header.Set("Content-Type", "application/json")
				req.Header.Set("Accept", "application/json, text/event-stream")
			}
			for k, v := range tt.header {
				req.Header.Set(k, v)
			}
			resp, err := http.DefaultClient.Do(req)
			if err != nil {
				t.Fatal(err)
			}
			defer resp.Body.Close()
			body, _ := io.ReadAll(resp.Body)
			short := body
			if len(short) > 300 {
				short = short[:300]
			}
			if resp.StatusCode != tt.wantStatus {
				t.Fatalf("status %d, want %d; body %q", resp.StatusCode, tt.wantStatus, short)
			}
			if tt.wantBody != "" && !strings.Contains(string(body), tt.wantBody) {
				t.Fatalf("body %q... does not contain %q", short, tt.wantBody)
			}
		})
	}

	t.Run("proxy without credentials", func(t *testing.T) {
		conn, err := net.DialTimeout("tcp", g.proxy, 5*time.Second)
		if err != nil {
			t.Fatal(err)
		}
		defer conn.Close()
		fmt.Fprintf(conn, "CONNECT example.com:443 HTTP/1.1\r\nHost: example.com:443\r\n\r\n")
		_ = conn.SetReadDeadline(time.Now().Add(10 * time.Second))
		buf := make([]byte, 64)
		n, _ := conn.Read(buf)
		if !strings.Contains(string(buf[:n]), " 407 ") {
			t.Fatalf("proxy answered %q, want 407", buf[:n])
		}
	})
}

// TestServeRefusesBadStart checks the errors a deployment sees first.
func TestServeRefusesBadStart(t *testing.T) {
	db := pgtest.New(t)                          // not migrated
	migrated := pgtest.New(t, pgtest.Migrated()) // schema current
	dir := t.TempDir()
	if err := os.Mkdir(filepath.Join(dir, "ws"), 0o755); err != nil {
		t.Fatal(err)
	}
	policyDir, _ := filepath.Abs("../../policies/base")
	cfgPath := filepath.Join(dir, "gateway.yaml")
	base := fmt.Sprintf("sandbox: %s\npolicy_dir: %s\nagent:\n  listen: %s\negress:\n  listen: %s\nops:\n  listen: %s\ngit:\n  mirror_dir: %s\naudit:\n  spool_dir: %s\n",
		filepath.Join(dir, "ws"), policyDir, freeAddr(t), freeAddr(t), freeAddr(t), filepath.Join(dir, "mirror"), filepath.Join(dir, "spool"))
	if err := os.WriteFile(cfgPath, []byte(base+fetchServersYAML), 0o600); err != nil {
		t.Fatal(err)
	}
	noFetch := filepath.Join(dir, "no-fetch.yaml")
	if err := os.WriteFile(noFetch, []byte(base), 0o600); err != nil {
		t.Fatal(err)
	}
	log := slog.New(slog.NewTextHandler(io.Discard, nil))
	tests := []struct {
		name string
		cfg  string // default cfgPath
		env  map[string]string
		want string
	}{
		// No agent token at all: serve_sessions_only_test.go (with a database, minted sessions only).
		{name: "operator token equals agent token", env: map[string]string{"IRONCURTAIN_DATABASE_URL": db.DSN, "IRONCURTAIN_AGENT_TOKEN": testAgentToken, "IRONCURTAIN_OPERATOR_TOKEN": testAgentToken}, want: "agent"},
		{name: "metrics token equals agent token", env: map[string]string{"IRONCURTAIN_DATABASE_URL": db.DSN, "IRONCURTAIN_AGENT_TOKEN": testAgentToken, "IRONCURTAIN_OPERATOR_TOKEN": testOperatorToken, "IRONCURTAIN_METRICS_TOKEN": testAgentToken}, want: "an agent token is also a metrics token"},
		{name: "metrics token equals operator token", env: map[string]string{"IRONCURTAIN_DATABASE_URL": db.DSN, "IRONCURTAIN_AGENT_TOKEN": testAgentToken, "IRONCURTAIN_OPERATOR_TOKEN": testOperatorToken, "IRONCURTAIN_METRICS_TOKEN": testOperatorToken}, want: "a metrics token is also an operator token"},
		{name: "metrics token too short", env: map[string]string{"IRONCURTAIN_DATABASE_URL": db.DSN, "IRONCURTAIN_AGENT_TOKEN": testAgentToken, "IRONCURTAIN_OPERATOR_TOKEN": testOperatorToken, "IRONCURTAIN_METRICS_TOKEN": "short"}, want: "IRONCURTAIN_METRICS_TOKEN"},
		{name: "no database", env: map[string]string{"IRONCURTAIN_AGENT_TOKEN": testAgentToken, "IRONCURTAIN_OPERATOR_TOKEN": testOperatorToken}, want: "IRONCURTAIN_DATABASE_URL"},
		{name: "no fetch allowlist", cfg: noFetch, env: map[string]string{"IRONCURTAIN_DATABASE_URL": migrated.DSN, "IRONCURTAIN_AGENT_TOKEN": testAgentToken, "IRONCURTAIN_OPERATOR_TOKEN": testOperatorToken}, want: "servers.fetch.allowed_domains"},
		{name: "schema missing", env: map[string]string{"IRONCURTAIN_DATABASE_URL": db.DSN, "IRONCURTAIN_AGENT_TOKEN": testAgentToken, "IRONCURTAIN_OPERATOR_TOKEN": testOperatorToken}, want: "migrate up"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
			defer cancel()
			path := cfgPath
			if tt.cfg != "" {
				path = tt.cfg
			}
			err := serve(ctx, path, func(k string) string { return tt.env[k] }, log)
			if err == nil || !strings.Contains(err.Error(), tt.want) {
				t.Fatalf("serve = %v, want an error mentioning %q", err, tt.want)
			}
		})
	}
}
