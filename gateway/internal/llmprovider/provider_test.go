package llmprovider

import (
	"net/http"
	"strings"
	"testing"
)

func TestNewAndResolve(t *testing.T) {
	env := map[string]string{"ANTHROPIC_API_KEY": "ak", "BROKEN": "a\nb"}
	getenv := func(k string) string { return env[k] }
	tests := []struct {
		name        string
		provider    string
		pc          ProviderConfig
		wantNewErr  string
		wantResolve string // error of Resolve; "" when it succeeds
		wantHeader  http.Header
	}{
		{name: "anthropic default", provider: Anthropic,
			wantHeader: http.Header{"X-Api-Key": {"ak"}, "Anthropic-Version": {DefaultAnthropicVersion}}},
		{name: "openai key unset", provider: OpenAI, wantResolve: "OPENAI_API_KEY is not set"},
		{name: "keyless", provider: OpenAI, pc: ProviderConfig{BaseURL: "http://ollama:11434/v1", Keyless: true}, wantHeader: http.Header{}},
		{name: "line break in the key", provider: Anthropic, pc: ProviderConfig{APIKeyEnv: "BROKEN"}, wantNewErr: "line break"},
		{name: "plain http with a key", provider: Anthropic, pc: ProviderConfig{BaseURL: "http://x.example"}, wantNewErr: "clear text"},
		{name: "unknown provider", provider: "gemini", wantNewErr: `provider "gemini"`},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			_, err := New(tt.provider, tt.pc, getenv)
			if tt.wantNewErr != "" {
				if err == nil || !strings.Contains(err.Error(), tt.wantNewErr) {
					t.Fatalf("New: err %v, want %q", err, tt.wantNewErr)
				}
				return
			}
			if err != nil {
				t.Fatalf("New: %v", err)
			}
			up, err := Resolve(tt.provider, tt.pc, getenv)
			if tt.wantResolve != "" {
				if err == nil || !strings.Contains(err.Error(), tt.wantResolve) {
					t.Fatalf("Resolve: err %v, want %q", err, tt.wantResolve)
				}
				return
			}
			if err != nil {
				t.Fatalf("Resolve: %v", err)
			}
			h := http.Header{}
			up.SetAuth(h)
			if len(h) != len(tt.wantHeader) {
				t.Fatalf("header %v, want %v", h, tt.wantHeader)
			}
			for k, v := range tt.wantHeader {
				if h.Get(k) != v[0] {
					t.Errorf("%s = %q, want %q", k, h.Get(k), v[0])
				}
			}
			if up.Key() != "" && strings.Contains(up.Redact("key "+up.Key()), up.Key()) {
				t.Error("Redact left the key in place")
			}
		})
	}
}
