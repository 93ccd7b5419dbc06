package main

import (
	"context"
	"fmt"
	"io"
	"log/slog"
	"net/http"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"ironcurtain.dev/gateway/internal/store/pgtest"
)

// TestServeWithoutStaticAgentTokens: a gateway whose agents all use minted
// sessions (the Kubernetes deployment, docs/kubernetes.md) holds no agent
// token and starts with a database; without one there would be no session
// at all, and it refuses to start.
func TestServeWithoutStaticAgentTokens(t *testing.T) {
	log := slog.New(slog.NewTextHandler(io.Discard, nil))
	policyDir, err := filepath.Abs("../../policies/base")
	if err != nil {
		t.Fatal(err)
	}
	writeConfig := func(t *testing.T, extra string) (string, servedGateway) {
		t.Helper()
		dir := t.TempDir()
		if err := os.Mkdir(filepath.Join(dir, "ws"), 0o755); err != nil {
			t.Fatal(err)
		}
		g := servedGateway{api: freeAddr(t), proxy: freeAddr(t), ops: freeAddr(t)}
		cfg := fmt.Sprintf("sandbox: %s\npolicy_dir: %s\nservers:\n  fetch:\n    allowed_domains: [example.com]\nagent:\n  listen: %s\negress:\n  listen: %s\nops:\n  listen: %s\ngit:\n  mirror_dir: %s\naudit:\n  spool_dir: %s\n%s",
			filepath.Join(dir, "ws"), policyDir, g.api, g.proxy, g.ops, filepath.Join(dir, "mirror"), filepath.Join(dir, "spool"), extra)
		p := filepath.Join(dir, "gateway.yaml")
		if err := os.WriteFile(p, []byte(cfg), 0o600); err != nil {
			t.Fatal(err)
		}
		return p, g
	}

	t.Run("no database, no token: refused", func(t *testing.T) {
		// audit is the last section of the base configuration: its JSON-lines file follows.
		cfgPath, _ := writeConfig(t, "  jsonl_file: "+filepath.Join(t.TempDir(), "audit.jsonl")+"\ndatabase:\n  unsafe_no_database: true\n")
		ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
		defer cancel()
		env := map[string]string{"IRONCURTAIN_OPERATOR_TOKEN": testOperatorToken}
		err := serve(ctx, cfgPath, func(k string) string { return env[k] }, log)
		if err == nil || !strings.Contains(err.Error(), "IRONCURTAIN_AGENT_TOKEN") {
			t.Fatalf("serve = %v, want an error naming IRONCURTAIN_AGENT_TOKEN", err)
		}
	})

	t.Run("a database and no token: minted sessions only", func(t *testing.T) {
		db := pgtest.New(t, pgtest.Migrated())
		cfgPath, g := writeConfig(t, "")
		env := map[string]string{"IRONCURTAIN_DATABASE_URL": db.DSN, "IRONCURTAIN_OPERATOR_TOKEN": testOperatorToken, "PATH": os.Getenv("PATH")}
		serveUntilReady(t, cfgPath, func(k string) string { return env[k] }, log, "http://"+g.ops+"/readyz")
		// No static token: every agent token is refused until a session is minted.
		req, _ := http.NewRequest(http.MethodPost, "http://"+g.api+"/mcp", strings.NewReader(`{"jsonrpc":"2.0","id":1,"method":"initialize","params":{}}`))
		req.Header.Set("Authorization", "Bearer "+testAgentToken)
		req.Header.Set("Content-Type", "application/json")
		req.Header.Set("Accept", "application/json, text/event-stream")
		resp, err := http.DefaultClient.Do(req)
		if err != nil {
			t.Fatal(err)
		}
		resp.Body.Close()
		if resp.StatusCode != http.StatusUnauthorized {
			t.Fatalf("MCP with an unknown token: status %d, want 401", resp.StatusCode)
		}
	})
}
