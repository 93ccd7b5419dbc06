package main

import (
	"bufio"
	"bytes"
	"context"
	"fmt"
	"log/slog"
	"net"
	"net/http"
	"net/http/httptest"
	"os"
	"path/filepath"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"github.com/mark3labs/mcp-go/mcp"
	mcpserver "github.com/mark3labs/mcp-go/server"

	"ironcurtain.dev/gateway/config"
	"ironcurtain.dev/gateway/internal/audit"
	"ironcurtain.dev/gateway/internal/servers/external"
)

func TestExternalTransportModes(t *testing.T) {
	dir := t.TempDir()
	tok := filepath.Join(dir, "token")
	if err := os.WriteFile(tok, []byte("remote-secret-9\n"), 0o600); err != nil {
		t.Fatal(err)
	}
	yaml := "launcher: {socket: /run/l.sock, token_file: /run/l.token}\n" +
		fetchServersYAML + "  vetted:\n    command: /usr/local/bin/vetted-mcp\n" +
		"  boxed:\n    image: example.org/boxed-mcp:1\n" +
		"  notes:\n    url: https://notes.example.com/mcp\n    bearer_token_file: " + tok + "\n"
	cfg, err := config.Parse(filepath.Join(dir, "gateway.yaml"), []byte(yaml))
	if err != nil {
		t.Fatal(err)
	}
	var logs bytes.Buffer
	log := slog.New(slog.NewTextHandler(&logs, nil))
	tr, err := externalTransport(cfg, "vetted", logSink{log}, func(string) string { return "" }, log)
	if err != nil || tr != nil {
		t.Fatalf("command: transport = %v, %v; want nil (a child process)", tr, err)
	}
	if !strings.Contains(logs.String(), "level=WARN") || !strings.Contains(logs.String(), "server=vetted") ||
		!strings.Contains(logs.String(), "loopback ports") {
		t.Fatalf("no warning naming what a command: server can see:\n%s", logs.String())
	}
	// An image: server is the launcher's (withLauncher): no transport, and
	// not the child-process warning.
	tr, err = externalTransport(cfg, "boxed", logSink{log}, func(string) string { return "" }, log)
	if err != nil || tr != nil {
		t.Fatalf("image: transport = %v, %v; want nil (the launcher's)", tr, err)
	}
	if strings.Contains(logs.String(), "server=boxed") {
		t.Fatalf("an image: server was warned about as a child process:\n%s", logs.String())
	}
	tr, err = externalTransport(cfg, "notes", logSink{log}, func(string) string { return "" }, log)
	if err != nil || tr == nil {
		t.Fatalf("url: transport = %v, %v", tr, err)
	}
	if strings.Contains(logs.String(), "remote-secret-9") {
		t.Fatal("the bearer token was logged")
	}
	// A token file others may read stops the start.
	if err := os.Chmod(tok, 0o644); err != nil {
		t.Fatal(err)
	}
	if _, err := externalTransport(cfg, "notes", logSink{log}, func(string) string { return "" }, log); err == nil ||
		!strings.Contains(err.Error(), "servers.notes.bearer_token_file") {
		t.Fatalf("exposed token file: err = %v", err)
	}
}

func TestWarnExposedSecrets(t *testing.T) {
	dir := t.TempDir()
	open := filepath.Join(dir, "gh-token")
	closed := filepath.Join(dir, "db-url")
	if err := os.WriteFile(open, []byte("ghp_x\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(closed, []byte("postgres://x\n"), 0o600); err != nil {
		t.Fatal(err)
	}
	cfg, err := config.Parse(filepath.Join(dir, "gateway.yaml"), []byte(fetchServersYAML+"github:\n  token_file: "+open+"\ndatabase:\n  url_file: "+closed+"\n"))
	if err != nil {
		t.Fatal(err)
	}
	var logs bytes.Buffer
	warnExposedSecrets(cfg, slog.New(slog.NewTextHandler(&logs, nil)))
	if !strings.Contains(logs.String(), "field=github.token_file") || !strings.Contains(logs.String(), "mode=0644") {
		t.Fatalf("no warning for the world-readable token file:\n%s", logs.String())
	}
	if strings.Contains(logs.String(), "database.url_file") || strings.Contains(logs.String(), "ghp_x") {
		t.Fatalf("warned about a 0600 file, or logged a secret:\n%s", logs.String())
	}
}

// TestURLServerFromConfig: a url: server configured in gateway.yaml (a
// sidecar on loopback, allowed for this server only) is reached through its
// Guard with the bearer token from its 0600 file; the token never reaches
// the audit rows.
func TestURLServerFromConfig(t *testing.T) {
	var sawToken atomic.Bool
	s := mcpserver.NewMCPServer("sidecar", "1")
	s.AddTool(mcp.NewTool("ping"), func(context.Context, mcp.CallToolRequest) (*mcp.CallToolResult, error) {
		return mcp.NewToolResultText("pong"), nil
	})
	h := mcpserver.NewStreamableHTTPServer(s)
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if r.Header.Get("Authorization") == "Bearer sidecar-secret-42" {
			sawToken.Store(true)
		}
		h.ServeHTTP(w, r)
	}))
	defer srv.Close()
	dir := t.TempDir()
	tok := filepath.Join(dir, "token")
	if err := os.WriteFile(tok, []byte("sidecar-secret-42\n"), 0o600); err != nil {
		t.Fatal(err)
	}
	yaml := fetchServersYAML + "  sidecar:\n    url: " + srv.URL + "/mcp\n    bearer_token_file: " + tok + "\n    unsafe_allow_addresses: [127.0.0.1]\n"
	cfg, err := config.Parse(filepath.Join(dir, "gateway.yaml"), []byte(yaml))
	if err != nil {
		t.Fatal(err)
	}
	var rows bytes.Buffer
	sink := audit.NewJSONL(&rows)
	log := slog.New(slog.DiscardHandler)
	tr, err := externalTransport(cfg, "sidecar", sink, func(string) string { return "" }, log)
	if err != nil {
		t.Fatal(err)
	}
	ext, err := external.Start(context.Background(), external.Config{Name: "sidecar", Transport: tr}, external.Deps{})
	if err != nil {
		t.Fatal(err)
	}
	defer ext.Close()
	res, err := ext.Call(context.Background(), "ping", map[string]any{})
	if err != nil || len(res.Content) != 1 || res.Content[0].Text != "pong" {
		t.Fatalf("ping = %+v, %v", res, err)
	}
	if !sawToken.Load() {
		t.Fatal("the bearer token did not reach the server")
	}
	if !strings.Contains(rows.String(), `"kind":"mcp-url"`) || strings.Contains(rows.String(), "sidecar-secret-42") {
		t.Fatalf("audit rows: want mcp-url events without the token:\n%s", rows.String())
	}
	// Without an allowance for its address the same loopback URL is refused.
	cfg2, err := config.Parse(filepath.Join(dir, "gateway.yaml"), []byte(fetchServersYAML+"  sidecar:\n    url: "+srv.URL+"/mcp\n    unsafe_allow_addresses: [10.0.0.1]\n"))
	if err != nil {
		t.Fatal(err)
	}
	tr2, err := externalTransport(cfg2, "sidecar", sink, func(string) string { return "" }, log)
	if err != nil {
		t.Fatal(err)
	}
	if _, err := external.Start(context.Background(), external.Config{Name: "sidecar", Transport: tr2}, external.Deps{}); err == nil {
		t.Fatal("a loopback url: server was reached without unsafe_allow_addresses")
	}
}

// bootEgressMode makes the test MCP server (obsMCPServerVar) send one
// request through the egress proxy before it serves, as a server that
// fetches something at start-up does, and append the proxy's status line
// (or the error) to the file bootEgressFileVar names.
const (
	bootEgressMode    = "boot-egress"
	bootEgressProxy   = "IC_SERVE_TEST_PROXY"
	bootEgressFileVar = "IC_SERVE_TEST_BOOT_FILE"
)

func bootEgress() {
	result := func() string {
		conn, err := net.DialTimeout("tcp", os.Getenv(bootEgressProxy), 5*time.Second)
		if err != nil {
			return "error: " + err.Error()
		}
		defer conn.Close()
		_ = conn.SetDeadline(time.Now().Add(5 * time.Second))
		fmt.Fprint(conn, "CONNECT example.com:443 HTTP/1.1\r\nHost: example.com:443\r\n\r\n")
		line, err := bufio.NewReader(conn).ReadString('\n')
		if err != nil {
			return "error: " + err.Error()
		}
		return strings.TrimSpace(line)
	}()
	f, err := os.OpenFile(os.Getenv(bootEgressFileVar), os.O_WRONLY|os.O_APPEND|os.O_CREATE, 0o600)
	if err == nil {
		fmt.Fprintln(f, result)
		f.Close()
	}
}

// TestServeProxyListensBeforeServersStart: an external server's first
// request at start-up, made before it answers initialize, reaches the
// egress proxy (which answers it: 407, no identity); the proxy is not
// started after the servers.
func TestServeProxyListensBeforeServersStart(t *testing.T) {
	exe, err := os.Executable()
	if err != nil {
		t.Fatal(err)
	}
	boot := filepath.Join(t.TempDir(), "boot.txt")
	startGatewayWith(t, func(g servedGateway) string {
		return fmt.Sprintf("  notes:\n    command: %s\n    env:\n      %s: %s\n      %s: %s\n      %s: %s\n",
			exe, obsMCPServerVar, bootEgressMode, bootEgressProxy, g.proxy, bootEgressFileVar, boot)
	}, "")
	b, err := os.ReadFile(boot)
	if err != nil {
		t.Fatalf("the server made no request at start-up: %v", err)
	}
	first, _, _ := strings.Cut(string(b), "\n")
	if !strings.HasPrefix(first, "HTTP/1.1 407 ") {
		t.Fatalf("the server's first request at start-up got %q, want the proxy's 407 (it must listen and serve before servers start)", first)
	}
}
