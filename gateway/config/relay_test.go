package config

import (
	"strings"
	"testing"
	"time"
)

func TestRelaySection(t *testing.T) {
	c, err := Parse("/cfg/gateway.yaml", withFetch(`
relay:
  anthropic:
    base_url: https://api.anthropic.com/
  openai:
    base_url: http://ollama:11434/v1
    api_key_env: ""
  max_body_bytes: 1048576
  timeout: 5m
  stream_idle_timeout: 30s
  max_concurrent_per_session: 4
  budget: {max_tokens: 1000000, max_cost_usd: 12.5}
  session_budgets:
    nightly: {max_cost_usd: 50}
  prices:
    "llama3.1": {input_per_mtok: 0, output_per_mtok: 0}
    "my-model": {input_per_mtok: 1, output_per_mtok: 2, cache_read_per_mtok: 0.5}
  unsafe_allow_server_tools: true
`))
	if err != nil {
		t.Fatal(err)
	}
	r := c.Relay
	if r.Anthropic.BaseURL != "https://api.anthropic.com/" || r.Anthropic.APIKeyEnv != nil {
		t.Fatalf("anthropic %+v", r.Anthropic)
	}
	if r.OpenAI.APIKeyEnv == nil || *r.OpenAI.APIKeyEnv != "" {
		t.Fatal("an explicit empty api_key_env must stay distinguishable from an absent one")
	}
	if r.Timeout != 5*time.Minute || r.StreamIdleTimeout != 30*time.Second || r.MaxConcurrentPerSession != 4 || r.MaxBodyBytes != 1<<20 {
		t.Fatalf("relay %+v", r)
	}
	if !r.UnsafeAllowServerTools {
		t.Fatal("unsafe_allow_server_tools not read")
	}
	if r.Budget.MaxTokens != 1000000 || r.Budget.MaxCostUSD != 12.5 || r.SessionBudgets["nightly"].MaxCostUSD != 50 {
		t.Fatalf("budgets %+v %+v", r.Budget, r.SessionBudgets)
	}
	if p := r.Prices["my-model"]; p.OutputPerMTok != 2 || p.CacheReadPerMTok == nil || *p.CacheReadPerMTok != 0.5 || p.CacheWritePerMTok != nil {
		t.Fatalf("prices %+v", r.Prices)
	}
}

func TestRelaySectionErrors(t *testing.T) {
	tests := []struct {
		name string
		yaml string
		want string
	}{
		{name: "http with a key", yaml: "relay:\n  openai:\n    base_url: http://vllm:8000/v1\n", want: "gateway.yaml: relay.openai.base_url"},
		{name: "http with a named key", yaml: "relay:\n  openai:\n    base_url: http://vllm:8000/v1\n    api_key_env: VLLM_KEY\n", want: "clear text"},
		{name: "user info", yaml: "relay:\n  anthropic:\n    base_url: https://k:s@api.anthropic.com\n", want: "relay.anthropic.base_url"},
		{name: "query", yaml: "relay:\n  anthropic:\n    base_url: https://api.anthropic.com/?x=1\n", want: "query"},
		{name: "scheme", yaml: "relay:\n  anthropic:\n    base_url: ftp://api.anthropic.com\n", want: "scheme"},
		{name: "relative", yaml: "relay:\n  anthropic:\n    base_url: api.anthropic.com\n", want: "relay.anthropic.base_url"},
		{name: "dot segment", yaml: "relay:\n  openai:\n    base_url: https://h/v1/../x\n", want: "dot segments"},
		{name: "backslash", yaml: "relay:\n  openai:\n    base_url: 'https://h\\@evil/v1'\n", want: "backslash"},
		{name: "port", yaml: "relay:\n  openai:\n    base_url: https://h:70000/v1\n", want: "relay.openai.base_url"},
		{name: "env name", yaml: "relay:\n  openai:\n    api_key_env: \"sk-abc\"\n", want: "relay.openai.api_key_env"},
		{name: "body size", yaml: "relay:\n  max_body_bytes: -1\n", want: "relay.max_body_bytes"},
		{name: "timeout", yaml: "relay:\n  timeout: -1s\n", want: "relay.timeout"},
		{name: "idle", yaml: "relay:\n  stream_idle_timeout: -1s\n", want: "relay.stream_idle_timeout"},
		{name: "concurrency", yaml: "relay:\n  max_concurrent_per_session: -2\n", want: "relay.max_concurrent_per_session"},
		{name: "budget tokens", yaml: "relay:\n  budget: {max_tokens: -5}\n", want: "relay.budget.max_tokens"},
		{name: "budget nan", yaml: "relay:\n  budget: {max_cost_usd: .nan}\n", want: "relay.budget.max_cost_usd"},
		{name: "session budget inf", yaml: "relay:\n  session_budgets:\n    s1: {max_cost_usd: .inf}\n", want: "relay.session_budgets.s1.max_cost_usd"},
		{name: "price negative", yaml: "relay:\n  prices:\n    m: {input_per_mtok: -1}\n", want: "relay.prices.m.input_per_mtok"},
		{name: "price cache nan", yaml: "relay:\n  prices:\n    m: {cache_write_per_mtok: .nan}\n", want: "relay.prices.m.cache_write_per_mtok"},
		{name: "price name", yaml: "relay:\n  prices:\n    \" m\": {input_per_mtok: 1}\n", want: "relay.prices. m"},
		{name: "unknown key", yaml: "relay:\n  anthropic:\n    api_key: sk-ant-xyz\n", want: "relay.anthropic.api_key: unknown key"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			_, err := Parse("gateway.yaml", withFetch(tt.yaml))
			if err == nil || !strings.Contains(err.Error(), tt.want) {
				t.Fatalf("err %v, want %q", err, tt.want)
			}
			if strings.Contains(tt.yaml, "sk-ant-xyz") && strings.Contains(err.Error(), "sk-ant-xyz") {
				t.Fatal("the error repeats a secret")
			}
		})
	}
}

func TestParseRelayBaseURL(t *testing.T) {
	tests := []struct {
		name     string
		in       string
		wantPath string
		wantErr  bool
	}{
		{name: "anthropic", in: "https://api.anthropic.com", wantPath: ""},
		{name: "trailing slash", in: "https://api.openai.com/v1/", wantPath: "/v1"},
		{name: "ollama", in: "http://ollama:11434/v1", wantPath: "/v1"},
		{name: "ipv6", in: "http://[::1]:8000/v1", wantPath: "/v1"},
		{name: "fragment", in: "https://h/v1#x", wantErr: true},
		{name: "empty query", in: "https://h/v1?", wantErr: true},
		{name: "escape", in: "https://h/v%2f1", wantErr: true},
		{name: "control", in: "https://h/v1\x00", wantErr: true},
		{name: "no host", in: "https:///v1", wantErr: true},
		{name: "opaque", in: "https:h", wantErr: true},
		{name: "port zero", in: "https://h:0", wantErr: true},
		{name: "port sign", in: "https://h:+80", wantErr: true},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			u, err := ParseRelayBaseURL(tt.in)
			if tt.wantErr {
				if err == nil {
					t.Fatalf("accepted %q as %v", tt.in, u)
				}
				return
			}
			if err != nil || u.Path != tt.wantPath {
				t.Fatalf("%v %v", u, err)
			}
		})
	}
}
