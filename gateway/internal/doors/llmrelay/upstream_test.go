package llmrelay

import (
	"net/http"
	"strings"
	"testing"

	"ironcurtain.dev/gateway/internal/llmprovider"
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
		{name: "anthropic default", cfg: Config{}, provider: llmprovider.Anthropic, wantURL: "https://api.anthropic.com/v1/messages",
			wantHdr: map[string]string{"X-Api-Key": "ak", "Anthropic-Version": llmprovider.DefaultAnthropicVersion}},
		{name: "openai named key", cfg: Config{OpenAI: llmprovider.ProviderConfig{BaseURL: "https://llm.example/v1/", APIKeyEnv: "MY_KEY"}}, provider: llmprovider.OpenAI,
			wantURL: "https://llm.example/v1/chat/completions", wantHdr: map[string]string{"Authorization": "Bearer mk"}},
		{name: "keyless local", cfg: Config{OpenAI: llmprovider.ProviderConfig{BaseURL: "http://ollama:11434/v1", Keyless: true}}, provider: llmprovider.OpenAI,
			wantURL: "http://ollama:11434/v1/chat/completions", wantHdr: map[string]string{"Authorization": ""}},
		{name: "missing key", cfg: Config{}, provider: llmprovider.OpenAI, wantErr: "OPENAI_API_KEY is not set"},
		{name: "plain http with a key", cfg: Config{Anthropic: llmprovider.ProviderConfig{BaseURL: "http://x.example"}}, provider: llmprovider.Anthropic, wantErr: "clear text"},
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
			if tt.provider == llmprovider.OpenAI {
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
