package main

import (
	"bytes"
	"log/slog"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"ironcurtain.dev/gateway/internal/config"
)

func TestExternalTransportModes(t *testing.T) {
	dir := t.TempDir()
	tok := filepath.Join(dir, "token")
	if err := os.WriteFile(tok, []byte("remote-secret-9\n"), 0o600); err != nil {
		t.Fatal(err)
	}
	yaml := "servers:\n  vetted:\n    command: /usr/local/bin/vetted-mcp\n" +
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
	cfg, err := config.Parse(filepath.Join(dir, "gateway.yaml"), []byte("github:\n  token_file: "+open+"\ndatabase:\n  url_file: "+closed+"\n"))
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
