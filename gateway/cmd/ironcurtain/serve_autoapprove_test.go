package main

import (
	"context"
	"log/slog"
	"strings"
	"testing"

	"ironcurtain.dev/gateway/config"
)

func TestStartAutoApproverRefusals(t *testing.T) {
	const on = "escalation:\n  auto_approver:\n    enabled: true\n    provider: anthropic\n    model: claude-haiku-4-5\n"
	tests := []struct {
		name, yaml string
		env        map[string]string
		want       string
	}{
		{"off by default", "escalation:\n  timeout: 60s\n", nil, ""},
		{"no key", on, nil, "escalation.auto_approver.provider: anthropic: no API key: ANTHROPIC_API_KEY is not set"},
		{"named key unset", on + "relay:\n  anthropic:\n    api_key_env: MY_KEY\n", map[string]string{"ANTHROPIC_API_KEY": "k"}, "MY_KEY is not set"},
		{"no database", on, map[string]string{"ANTHROPIC_API_KEY": "k"}, "escalation.auto_approver needs the database"},
		{"plain http with a key", strings.Replace(on, "anthropic\n", "openai\n", 1) + "relay:\n  openai:\n    base_url: http://vllm:8000/v1\n    unsafe_allow_http_with_key: false\n", map[string]string{"OPENAI_API_KEY": "k"}, "gateway.yaml: relay.openai.base_url"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			cfg, err := config.Parse("/cfg/gateway.yaml", []byte(tt.yaml+fetchServersYAML))
			if err == nil {
				var closers closeStack
				err = startAutoApprover(context.Background(), cfg, func(k string) string { return tt.env[k] }, &storage{}, nil, slog.New(slog.DiscardHandler), &closers)
				_ = closers.close(slog.New(slog.DiscardHandler))
			}
			if tt.want == "" {
				if err != nil {
					t.Fatal(err)
				}
				return
			}
			if err == nil || !strings.Contains(err.Error(), tt.want) {
				t.Fatalf("err %v, want it to contain %q", err, tt.want)
			}
		})
	}
}
