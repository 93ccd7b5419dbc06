package config

import (
	"strings"
	"testing"
	"time"
)

func TestAutoApproverSection(t *testing.T) {
	c, err := Parse("/cfg/gateway.yaml", withFetch(`
escalation:
  auto_approver:
    enabled: true
    provider: openai
    model: llama3.1:8b
    timeout: 5s
    max_output_tokens: 200
    max_prompt_bytes: 4096
    recent_decisions: 3
    rate_per_minute: 6
    max_concurrent: 2
    budget: {max_calls_per_day: 10, max_tokens_per_day: 5000, max_cost_usd_per_day: 0.5}
`))
	if err != nil {
		t.Fatal(err)
	}
	a := c.Escalation.AutoApprover
	want := AutoApproverConfig{Enabled: true, Provider: "openai", Model: "llama3.1:8b", Timeout: 5 * time.Second,
		MaxOutputTokens: 200, MaxPromptBytes: 4096, RecentDecisions: 3, RatePerMinute: 6, MaxConcurrent: 2,
		Budget: AutoApproverBudget{MaxCallsPerDay: 10, MaxTokensPerDay: 5000, MaxCostUSDPerDay: 0.5}}
	if a != want || a.WithDefaults() != want {
		t.Fatalf("auto_approver = %+v, want %+v", a, want)
	}
}

func TestAutoApproverOffByDefault(t *testing.T) {
	c, err := Parse("/cfg/gateway.yaml", withFetch("escalation:\n  timeout: 60s\n"))
	if err != nil {
		t.Fatal(err)
	}
	a := c.Escalation.AutoApprover
	if a.Enabled {
		t.Fatal("the auto-approver is on without being configured")
	}
	d := a.WithDefaults()
	if d.Timeout != DefaultAutoApproverTimeout || d.Budget.MaxCallsPerDay != DefaultAutoApproverCallsPerDay ||
		d.Budget.MaxTokensPerDay != DefaultAutoApproverTokensPerDay || d.Budget.MaxCostUSDPerDay != DefaultAutoApproverCostUSDPerDay ||
		d.RatePerMinute != DefaultAutoApproverRatePerMinute || d.MaxPromptBytes != DefaultAutoApproverMaxPromptBytes {
		t.Fatalf("defaults %+v", d)
	}
}

func TestAutoApproverSectionErrors(t *testing.T) {
	const pre = "escalation:\n  auto_approver:\n"
	tests := []struct {
		name, yaml, want string
	}{
		{"enabled without provider", pre + "    enabled: true\n    model: m\n", "escalation.auto_approver.provider: required when enabled"},
		{"enabled without model", pre + "    enabled: true\n    provider: anthropic\n", "escalation.auto_approver.model: required when enabled"},
		{"unknown provider", pre + "    provider: gemini\n", `escalation.auto_approver.provider: "gemini"`},
		{"model with a space", pre + "    model: \"a b\"\n", "escalation.auto_approver.model"},
		{"model with a newline", pre + "    model: \"a\\nb\"\n", "escalation.auto_approver.model"},
		{"timeout too short", pre + "    timeout: 10ms\n", "escalation.auto_approver.timeout"},
		{"timeout too long", pre + "    timeout: 1h\n", "escalation.auto_approver.timeout"},
		{"negative timeout", pre + "    timeout: -1s\n", "escalation.auto_approver.timeout"},
		{"output tokens", pre + "    max_output_tokens: 100000\n", "escalation.auto_approver.max_output_tokens"},
		{"prompt bytes", pre + "    max_prompt_bytes: 10\n", "escalation.auto_approver.max_prompt_bytes"},
		{"recent decisions", pre + "    recent_decisions: -1\n", "escalation.auto_approver.recent_decisions"},
		{"rate", pre + "    rate_per_minute: -5\n", "escalation.auto_approver.rate_per_minute"},
		{"concurrency", pre + "    max_concurrent: 1000\n", "escalation.auto_approver.max_concurrent"},
		{"calls budget", pre + "    budget: {max_calls_per_day: -1}\n", "escalation.auto_approver.budget.max_calls_per_day"},
		{"tokens budget", pre + "    budget: {max_tokens_per_day: -1}\n", "escalation.auto_approver.budget.max_tokens_per_day"},
		{"cost budget", pre + "    budget: {max_cost_usd_per_day: -1}\n", "escalation.auto_approver.budget.max_cost_usd_per_day"},
		{"cost budget NaN", pre + "    budget: {max_cost_usd_per_day: .nan}\n", "escalation.auto_approver.budget.max_cost_usd_per_day"},
		{"unknown key", pre + "    enable: true\n", "escalation.auto_approver.enable: unknown key"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			_, err := Parse("/cfg/gateway.yaml", withFetch(tt.yaml))
			if err == nil || !strings.Contains(err.Error(), tt.want) {
				t.Fatalf("error %v, want it to contain %q", err, tt.want)
			}
		})
	}
}
