package main

import (
	"bytes"
	"log/slog"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"ironcurtain.dev/gateway/config"
	"ironcurtain.dev/gateway/secretscan"
)

// The gateway's own secrets are matched exactly by the policy's scanner and
// never written to the log; a value too short to match is named by label.
func TestSetGatewaySecrets(t *testing.T) {
	dir := t.TempDir()
	gitTok := filepath.Join(dir, "git-token")
	opTok := filepath.Join(dir, "op-token")
	if err := os.WriteFile(gitTok, []byte("git-token-value-0123456789\n"), 0o600); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(opTok, []byte("operator-token-file-9876543210"), 0o600); err != nil {
		t.Fatal(err)
	}
	metricsTok := filepath.Join(dir, "metrics-token")
	if err := os.WriteFile(metricsTok, []byte("metrics-token-file-1357924680\n"), 0o600); err != nil {
		t.Fatal(err)
	}
	cfg, err := config.Parse(filepath.Join(dir, "gateway.yaml"), []byte(`
git: {token_file: `+gitTok+`}
ops: {operator_token_files: {alice: `+opTok+`}, metrics_token_files: {prometheus: `+metricsTok+`}}
`+fetchServersYAML))
	if err != nil {
		t.Fatal(err)
	}
	env := map[string]string{
		"GITHUB_TOKEN":               "github-token-value-abcdefghij",
		"ANTHROPIC_API_KEY":          "anthropic-key-value-klmnopqrst",
		"OPENAI_API_KEY":             "short",
		"IRONCURTAIN_OPERATOR_TOKEN": "operator-token-env-uvwxyz0123",
		"IRONCURTAIN_METRICS_TOKEN":  "metrics-token-env-abcdef012345",
		"DATABASE_URL":               "postgres://ic:db-password-4567890@db:5432/ic",
	}
	agents := map[string]string{"agent": "agent-token-value-0011223344", "nightly": "agent-token-nightly-5566778899"}
	var logBuf bytes.Buffer
	log := slog.New(slog.NewTextHandler(&logBuf, nil))
	if err := setGatewaySecrets(cfg, func(k string) string { return env[k] }, agents, log); err != nil {
		t.Fatal(err)
	}
	sc, err := cfg.SecretScanner()
	if err != nil {
		t.Fatal(err)
	}
	want := map[string]string{
		"agent-token-value-0011223344":   "agent token agent",
		"agent-token-nightly-5566778899": "agent token nightly",
		"github-token-value-abcdefghij":  "github token",
		"git-token-value-0123456789":     "git token",
		"anthropic-key-value-klmnopqrst": "anthropic api key",
		"operator-token-env-uvwxyz0123":  "operator token",
		"operator-token-file-9876543210": "operator token alice",
		"metrics-token-env-abcdef012345": "metrics token",
		"metrics-token-file-1357924680":  "metrics token prometheus",
	}
	if env[cfg.Database.URLVariable()] != "" {
		want["db-password-4567890"] = "database password"
	}
	for v, label := range want {
		hits := sc.Detector().ScanText("body", "x "+v+" y")
		if len(hits) != 1 || hits[0].Kind != secretscan.KindExact || hits[0].Excerpt != "["+label+"]" {
			t.Errorf("%s: hits = %+v", label, hits)
		}
		if strings.Contains(logBuf.String(), v) {
			t.Errorf("the log shows the %s", label)
		}
	}
	if !strings.Contains(logBuf.String(), "openai api key") {
		t.Errorf("the log does not name the secret too short to match: %s", logBuf.String())
	}
}
