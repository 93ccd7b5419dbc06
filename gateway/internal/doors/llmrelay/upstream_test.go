package llmrelay

import (
	"net/http"
	"strings"
	"testing"
)

func TestResolveUpstream(t *testing.T) {
	env := map[string]string{"ANTHROPIC_API_KEY": "ak", "MY_KEY": "mk"}
	getenv := func(k string) string { return env[k] }
	tests := []struct {
		name     string
		cfg      Config
		provider string
		wantURL  string
		wantHdr  map[string]string
		wantErr  string
	}{
		{name: "anthropic default", cfg: Config{}, provider: Anthropic, wantURL: "https://api.anthropic.com/v1/messages",
			wantHdr: map[string]string{"X-Api-Key": "ak", "Anthropic-Version": DefaultAnthropicVersion}},
		{name: "openai named key", cfg: Config{OpenAI: ProviderConfig{BaseURL: "https://llm.example/v1/", APIKeyEnv: "MY_KEY"}}, provider: OpenAI,
			wantURL: "https://llm.example/v1/chat/completions", wantHdr: map[string]string{"Authorization": "Bearer mk"}},
		{name: "keyless local", cfg: Config{OpenAI: ProviderConfig{BaseURL: "http://ollama:11434/v1", Keyless: true}}, provider: OpenAI,
			wantURL: "http://ollama:11434/v1/chat/completions", wantHdr: map[string]string{"Authorization": ""}},
		{name: "missing key", cfg: Config{}, provider: OpenAI, wantErr: "OPENAI_API_KEY is not set"},
		{name: "plain http with a key", cfg: Config{Anthropic: ProviderConfig{BaseURL: "http://x.example"}}, provider: Anthropic, wantErr: "clear text"},
		{name: "unknown provider", provider: "gemini", wantErr: `provider "gemini"`},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			tt.cfg.Getenv = getenv
			up, err := ResolveUpstream(tt.cfg, tt.provider)
			if tt.wantErr != "" {
				if err == nil || !strings.Contains(err.Error(), tt.wantErr) {
					t.Fatalf("err %v, want %q", err, tt.wantErr)
				}
				return
			}
			if err != nil {
				t.Fatal(err)
			}
			path := "v1/messages"
			if tt.provider == OpenAI {
				path = "chat/completions"
			}
			if got := up.URL(path); got != tt.wantURL {
				t.Fatalf("URL %q, want %q", got, tt.wantURL)
			}
			h := http.Header{}
			up.SetAuth(h)
			for k, v := range tt.wantHdr {
				if h.Get(k) != v {
					t.Errorf("%s = %q, want %q", k, h.Get(k), v)
				}
			}
			if up.Redact("error: key ak mk") == "error: key ak mk" && !strings.Contains(tt.name, "keyless") {
				t.Error("Redact left the key in place")
			}
		})
	}
}

func TestEstimateCost(t *testing.T) {
	if c, ok := EstimateCost(nil, "claude-haiku-4-5-20251001", 1_000_000, 1_000_000); !ok || c != 6 {
		t.Fatalf("haiku: %v %v, want 6 (1 + 5)", c, ok)
	}
	if _, ok := EstimateCost(nil, "my-local-model", 1, 1); ok {
		t.Fatal("an unknown model has a price")
	}
	if c, ok := EstimateCost(map[string]Price{"my-local-model": price(0, 0)}, "my-local-model", 10, 10); !ok || c != 0 {
		t.Fatalf("override: %v %v", c, ok)
	}
}
