package llmrelay

import (
	"bufio"
	"encoding/json"
	"fmt"
	"io"
	"math"
	"net"
	"net/http"
	"strings"
	"testing"
	"time"

	"github.com/prometheus/client_golang/prometheus/testutil"

	"ironcurtain.dev/gateway/internal/llmprovider"
)

func approx(a, b float64) bool { return math.Abs(a-b) < 1e-12 }

// TestKeyInjected: the fake server checks the real key arrives in the
// provider's header, and the test checks that the agent token and every
// other inbound credential did not.
func TestKeyInjected(t *testing.T) {
	tests := []struct {
		name       string
		path       string
		body       string
		authHeader map[string]string
		wantHeader string // header the key must arrive in
		wantValue  string
	}{
		{name: "anthropic x-api-key", path: "/anthropic/v1/messages", body: anthropicBody,
			authHeader: map[string]string{"X-Api-Key": tokenS1, "Anthropic-Version": "2023-06-01"},
			wantHeader: "X-Api-Key", wantValue: anthropicKey},
		{name: "anthropic bearer", path: "/anthropic/v1/messages", body: anthropicBody,
			authHeader: map[string]string{"Authorization": "Bearer " + tokenS1},
			wantHeader: "X-Api-Key", wantValue: anthropicKey},
		{name: "openai bearer", path: "/openai/chat/completions", body: openAIBody,
			authHeader: map[string]string{"Authorization": "Bearer " + tokenS1},
			wantHeader: "Authorization", wantValue: "Bearer " + openAIKey},
		{name: "openai x-api-key", path: "/openai/chat/completions", body: openAIBody,
			authHeader: map[string]string{"X-Api-Key": tokenS1},
			wantHeader: "Authorization", wantValue: "Bearer " + openAIKey},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			tr := startRelay(t)
			hdr := map[string]string{
				"Content-Type":        "application/json",
				"Cookie":              "session=" + tokenS1,
				"Proxy-Authorization": "Basic " + tokenS1,
				"X-Forwarded-For":     "10.0.0.7",
				"Openai-Organization": "org-attacker",
				"Api-Key":             tokenS1,
				"X-Goog-Api-Key":      tokenS1,
				"X-Stainless-Lang":    "go",
				"Anthropic-Beta":      "prompt-caching-2024-07-31",
			}
			for k, v := range tt.authHeader {
				hdr[k] = v
			}
			resp, body := tr.do(t, http.MethodPost, tt.path, tt.body, hdr)
			if resp.StatusCode != http.StatusOK {
				t.Fatalf("status %d: %s", resp.StatusCode, body)
			}
			assertNoSecrets(t, resp, body)
			got := tr.model.last(t)
			if v := got.Header.Get(tt.wantHeader); v != tt.wantValue {
				t.Fatalf("%s = %q, want the gateway's key", tt.wantHeader, v)
			}
			for name, vs := range got.Header {
				for _, v := range vs {
					if strings.Contains(v, tokenS1) {
						t.Fatalf("the agent token reached the model server in %s", name)
					}
				}
			}
			if strings.Contains(string(got.Body), tokenS1) {
				t.Fatal("the agent token reached the model server in the body")
			}
			for _, h := range []string{"Cookie", "Proxy-Authorization", "X-Forwarded-For", "Openai-Organization", "Api-Key", "X-Goog-Api-Key"} {
				if got.Header.Get(h) != "" {
					t.Fatalf("inbound header %s reached the model server", h)
				}
			}
			if got.Header.Get("X-Stainless-Lang") != "go" || got.Header.Get("Anthropic-Beta") == "" {
				t.Fatalf("SDK headers were not passed: %v", got.Header)
			}
			if strings.HasPrefix(tt.path, "/anthropic") && got.Header.Get("Anthropic-Version") != llmprovider.DefaultAnthropicVersion {
				t.Fatalf("anthropic-version = %q", got.Header.Get("Anthropic-Version"))
			}
			if got.Body == nil || string(got.Body) != tt.body {
				t.Fatalf("body changed on the way: %s", got.Body)
			}
		})
	}
}

// TestUnknownToken: no, a wrong, a conflicting or a non-bearer credential
// gets a 401 in the provider's error shape and nothing goes upstream.
func TestUnknownToken(t *testing.T) {
	tests := []struct {
		name     string
		provider string
		path     string
		hdr      map[string]string
	}{
		{name: "anthropic none", provider: llmprovider.Anthropic, path: "/anthropic/v1/messages", hdr: nil},
		{name: "anthropic wrong", provider: llmprovider.Anthropic, path: "/anthropic/v1/messages", hdr: map[string]string{"X-Api-Key": "not-a-token-of-any-session"}},
		{name: "anthropic real key", provider: llmprovider.Anthropic, path: "/anthropic/v1/messages", hdr: map[string]string{"X-Api-Key": anthropicKey}},
		{name: "anthropic conflicting", provider: llmprovider.Anthropic, path: "/anthropic/v1/messages", hdr: map[string]string{"X-Api-Key": tokenS1, "Authorization": "Bearer " + tokenS2}},
		{name: "openai none", provider: llmprovider.OpenAI, path: "/openai/chat/completions", hdr: nil},
		{name: "openai wrong", provider: llmprovider.OpenAI, path: "/openai/chat/completions", hdr: map[string]string{"Authorization": "Bearer sk-whatever-0123456789"}},
		{name: "openai basic", provider: llmprovider.OpenAI, path: "/openai/chat/completions", hdr: map[string]string{"Authorization": "Basic " + tokenS1}},
		{name: "openai empty bearer", provider: llmprovider.OpenAI, path: "/openai/chat/completions", hdr: map[string]string{"Authorization": "Bearer "}},
		{name: "openai token prefix", provider: llmprovider.OpenAI, path: "/openai/chat/completions", hdr: map[string]string{"Authorization": "Bearer " + tokenS1[:20]}},
		{name: "unknown path unauthenticated", provider: llmprovider.OpenAI, path: "/openai/files", hdr: nil},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			tr := startRelay(t)
			resp, body := tr.do(t, http.MethodPost, tt.path, openAIBody, tt.hdr)
			if resp.StatusCode != http.StatusUnauthorized {
				t.Fatalf("status %d, want 401: %s", resp.StatusCode, body)
			}
			typ, msg := errorMessage(t, tt.provider, body)
			if tt.provider == llmprovider.Anthropic && typ != "authentication_error" {
				t.Fatalf("type %q", typ)
			}
			if !strings.Contains(msg, "agent token") {
				t.Fatalf("message %q does not say what is wrong", msg)
			}
			if resp.Header.Get("X-Should-Retry") != "false" {
				t.Fatal("a 401 must not be retried by the SDK")
			}
			assertNoSecrets(t, resp, body)
			if n := len(tr.model.requests()); n != 0 {
				t.Fatalf("%d requests reached the model server", n)
			}
			if n := len(tr.sink.calls()); n != 0 {
				t.Fatalf("an unauthenticated request was recorded in a session: %d", n)
			}
		})
	}
}

// TestMissingKey: a provider whose key variable is unset answers 503
// naming the variable; a keyless endpoint sends no credential at all.
func TestMissingKey(t *testing.T) {
	tests := []struct {
		name     string
		provider string
		cfg      func(*Config)
		env      map[string]string
		path     string
		body     string
		wantVar  string
	}{
		{name: "anthropic default variable", provider: llmprovider.Anthropic, path: "/anthropic/v1/messages", body: anthropicBody,
			env: map[string]string{"OPENAI_API_KEY": openAIKey}, wantVar: "ANTHROPIC_API_KEY"},
		{name: "openai default variable", provider: llmprovider.OpenAI, path: "/openai/chat/completions", body: openAIBody,
			env: map[string]string{"ANTHROPIC_API_KEY": anthropicKey}, wantVar: "OPENAI_API_KEY"},
		{name: "openai custom variable", provider: llmprovider.OpenAI, path: "/openai/chat/completions", body: openAIBody,
			cfg: func(c *Config) { c.OpenAI.APIKeyEnv = "VLLM_API_KEY" }, env: map[string]string{"OPENAI_API_KEY": openAIKey}, wantVar: "VLLM_API_KEY"},
		{name: "blank value", provider: llmprovider.Anthropic, path: "/anthropic/v1/messages", body: anthropicBody,
			env: map[string]string{"ANTHROPIC_API_KEY": "  "}, wantVar: "ANTHROPIC_API_KEY"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			tr := startRelay(t, withConfig(func(c *Config) {
				c.Getenv = func(k string) string { return tt.env[k] }
				if tt.cfg != nil {
					tt.cfg(c)
				}
			}))
			resp, body := tr.do(t, http.MethodPost, tt.path, tt.body, map[string]string{"Authorization": "Bearer " + tokenS1})
			if resp.StatusCode != http.StatusServiceUnavailable {
				t.Fatalf("status %d, want 503: %s", resp.StatusCode, body)
			}
			_, msg := errorMessage(t, tt.provider, body)
			if !strings.Contains(msg, tt.wantVar) {
				t.Fatalf("message %q does not name %s", msg, tt.wantVar)
			}
			if n := len(tr.model.requests()); n != 0 {
				t.Fatalf("%d requests reached the model server", n)
			}
			cs := tr.sink.waitCalls(t, 1)
			if cs[0].StatusCode != 0 || !strings.Contains(cs[0].Error, "no_key") {
				t.Fatalf("record %+v", cs[0])
			}
		})
	}
	t.Run("keyless endpoint", func(t *testing.T) {
		tr := startRelay(t, withConfig(func(c *Config) {
			c.OpenAI = llmprovider.ProviderConfig{BaseURL: c.OpenAI.BaseURL, Keyless: true}
			c.Getenv = func(string) string { return "" }
		}))
		tr.model.override = func(w http.ResponseWriter, r *http.Request, _ []byte) {
			w.Header().Set("Content-Type", "application/json")
			_, _ = io.WriteString(w, openAIJSON)
		}
		resp, body := tr.openai(t, tokenS1, openAIBody)
		if resp.StatusCode != http.StatusOK {
			t.Fatalf("status %d: %s", resp.StatusCode, body)
		}
		got := tr.model.last(t)
		for _, h := range []string{"Authorization", "X-Api-Key"} {
			if got.Header.Get(h) != "" {
				t.Fatalf("a keyless endpoint received %s", h)
			}
		}
	})
}

// TestUsageRecorded: one audit.LLMCall per call with model (as the
// upstream reports it), tokens and estimated cost, for JSON and SSE in
// both wire formats; the session's spend and the metrics follow.
func TestUsageRecorded(t *testing.T) {
	tests := []struct {
		name       string
		provider   string
		body       string
		wantModel  string
		wantIn     int64
		wantOut    int64
		wantCost   float64
		wantStream bool
		wantPath   string
		wantLabel  string
	}{
		{name: "anthropic json", provider: llmprovider.Anthropic, body: anthropicBody, wantModel: "claude-haiku-4-5-20251001",
			wantIn: 10, wantOut: 20, wantCost: anthropicJSONCost, wantPath: "/v1/messages", wantLabel: "claude-haiku-4-5"},
		{name: "anthropic sse with cache", provider: llmprovider.Anthropic, body: anthropicStreamBody, wantModel: "claude-sonnet-4-5-20250929",
			wantIn: 1200 + 100 + 1000, wantOut: 350, wantCost: anthropicSSECost, wantStream: true, wantPath: "/v1/messages", wantLabel: "claude-sonnet-4-5"},
		{name: "openai json", provider: llmprovider.OpenAI, body: openAIBody, wantModel: "gpt-4o-mini-2024-07-18",
			wantIn: 100, wantOut: 50, wantCost: openAIJSONCost, wantPath: "/chat/completions", wantLabel: "gpt-4o-mini"},
		{name: "openai sse (usage requested by the relay)", provider: llmprovider.OpenAI, body: openAIStreamBody, wantModel: "gpt-4o-2024-08-06",
			wantIn: 500, wantOut: 40, wantCost: openAISSECost, wantStream: true, wantPath: "/chat/completions", wantLabel: "gpt-4o"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			tr := startRelay(t)
			var resp *http.Response
			var body []byte
			if tt.provider == llmprovider.Anthropic {
				resp, body = tr.anthropic(t, tokenS2, tt.body)
			} else {
				resp, body = tr.openai(t, tokenS2, tt.body)
			}
			if resp.StatusCode != http.StatusOK {
				t.Fatalf("status %d: %s", resp.StatusCode, body)
			}
			cs := tr.sink.waitCalls(t, 1)
			c := cs[0]
			if c.SessionID != "s2" || c.Provider != tt.provider || c.Model != tt.wantModel || c.Path != tt.wantPath ||
				c.Stream != tt.wantStream || c.StatusCode != 200 || c.InputTokens != tt.wantIn || c.OutputTokens != tt.wantOut {
				t.Fatalf("record %+v", c)
			}
			if !approx(c.CostUSD, tt.wantCost) {
				t.Fatalf("cost %v, want %v", c.CostUSD, tt.wantCost)
			}
			if c.ID == "" || c.Time.IsZero() || c.Duration <= 0 {
				t.Fatalf("record %+v", c)
			}
			if c.Error != "" {
				t.Fatalf("a clean call has an error note: %q", c.Error)
			}
			tokens, cost := tr.relay.Spent("s2")
			if tokens != tt.wantIn+tt.wantOut || !approx(cost, tt.wantCost) {
				t.Fatalf("spent %d, %v", tokens, cost)
			}
			if v := testutil.ToFloat64(tr.relay.metrics.tokens.WithLabelValues(tt.provider, tt.wantLabel, "output")); v != float64(tt.wantOut) {
				t.Fatalf("output token metric %v", v)
			}
			if v := testutil.ToFloat64(tr.relay.metrics.requests.WithLabelValues(tt.provider, "200")); v != 1 {
				t.Fatalf("request metric %v", v)
			}
		})
	}
}

// TestUnmeteredEndpoints: count_tokens, models and embeddings are relayed;
// only embeddings consume tokens.
func TestUnmeteredEndpoints(t *testing.T) {
	tests := []struct {
		name    string
		method  string
		path    string
		body    string
		hdr     string
		val     string
		wantIn  int64
		wantRec string // recorded path
	}{
		{name: "count_tokens", method: http.MethodPost, path: "/anthropic/v1/messages/count_tokens", body: anthropicBody, hdr: "X-Api-Key", val: tokenS1, wantRec: "/v1/messages/count_tokens"},
		{name: "models", method: http.MethodGet, path: "/openai/models", hdr: "Authorization", val: "Bearer " + tokenS1, wantRec: "/models"},
		{name: "model", method: http.MethodGet, path: "/openai/models/gpt-4o", hdr: "Authorization", val: "Bearer " + tokenS1, wantRec: "/models/gpt-4o"},
		{name: "embeddings", method: http.MethodPost, path: "/openai/embeddings", body: `{"model":"text-embedding-3-small","input":"x"}`, hdr: "Authorization", val: "Bearer " + tokenS1, wantIn: 8, wantRec: "/embeddings"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			tr := startRelay(t)
			resp, body := tr.do(t, tt.method, tt.path, tt.body, map[string]string{tt.hdr: tt.val})
			if resp.StatusCode != http.StatusOK {
				t.Fatalf("status %d: %s", resp.StatusCode, body)
			}
			c := tr.sink.waitCalls(t, 1)[0]
			if c.Path != tt.wantRec || c.InputTokens != tt.wantIn || c.OutputTokens != 0 || c.Error != "" {
				t.Fatalf("record %+v", c)
			}
		})
	}
}

// TestAbsoluteFormCannotRedirect: a request line naming another host, or
// a Host header, does not change where the relay sends the call.
func TestAbsoluteFormCannotRedirect(t *testing.T) {
	tr := startRelay(t)
	conn, err := net.Dial("tcp", tr.srv.Listener.Addr().String())
	if err != nil {
		t.Fatal(err)
	}
	defer conn.Close()
	body := anthropicBody
	fmt.Fprintf(conn, "POST http://evil.example:8080/llm/anthropic/v1/messages HTTP/1.1\r\nHost: evil.example:8080\r\nX-Api-Key: %s\r\nX-Forwarded-Host: evil.example\r\nContent-Type: application/json\r\nContent-Length: %d\r\nConnection: close\r\n\r\n%s", tokenS1, len(body), body)
	resp, err := http.ReadResponse(bufio.NewReader(conn), nil)
	if err != nil {
		t.Fatal(err)
	}
	resp.Body.Close()
	if resp.StatusCode != http.StatusOK {
		t.Fatalf("status %d", resp.StatusCode)
	}
	got := tr.model.last(t)
	if got.Host != tr.model.srv.Listener.Addr().String() || got.Header.Get("X-Forwarded-Host") != "" {
		t.Fatalf("upstream Host %q / %v", got.Host, got.Header)
	}
}

// TestResponseHeadersFiltered: cookies, hop-by-hop headers and any header
// that quotes the key are not passed to the agent; others are.
func TestResponseHeadersFiltered(t *testing.T) {
	tr := startRelay(t)
	tr.model.override = func(w http.ResponseWriter, _ *http.Request, _ []byte) {
		h := w.Header()
		h.Set("Content-Type", "application/json")
		h.Set("Set-Cookie", "a=b")
		h.Set("X-Debug-Auth", "Bearer "+openAIKey)
		h.Set("Connection", "X-Hop")
		h.Set("X-Hop", "1")
		h.Set("Openai-Processing-Ms", "12")
		_, _ = io.WriteString(w, openAIJSON)
	}
	resp, body := tr.openai(t, tokenS1, openAIBody)
	assertNoSecrets(t, resp, body)
	for _, h := range []string{"Set-Cookie", "X-Debug-Auth", "X-Hop"} {
		if resp.Header.Get(h) != "" {
			t.Fatalf("%s reached the agent", h)
		}
	}
	if resp.Header.Get("Openai-Processing-Ms") != "12" {
		t.Fatal("a provider header was dropped")
	}
}

// TestErrorBodyScrubbed: an upstream error that quotes the key (or a
// masked form of it) reaches the agent without it; status and shape stay.
func TestErrorBodyScrubbed(t *testing.T) {
	tests := []struct {
		name     string
		provider string
		status   int
		body     string
	}{
		{name: "openai masked key", provider: llmprovider.OpenAI, status: 401,
			body: `{"error":{"message":"Incorrect API key provided: sk-proj-********************************cdef. You can find your API key at https://platform.openai.com/account/api-keys.","type":"invalid_request_error","param":null,"code":"invalid_api_key"}}`},
		{name: "openai whole key", provider: llmprovider.OpenAI, status: 400, body: `{"error":{"message":"bad header Authorization: Bearer ` + openAIKey + `","type":"invalid_request_error"}}`},
		{name: "anthropic whole key", provider: llmprovider.Anthropic, status: 401, body: `{"type":"error","error":{"type":"authentication_error","message":"invalid x-api-key ` + anthropicKey + `"}}`},
		{name: "vLLM plain text", provider: llmprovider.OpenAI, status: 500, body: "internal error with key " + openAIKey + "\n"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			tr := startRelay(t)
			tr.model.override = func(w http.ResponseWriter, _ *http.Request, _ []byte) {
				w.Header().Set("Content-Type", "application/json")
				w.WriteHeader(tt.status)
				_, _ = io.WriteString(w, tt.body)
			}
			var resp *http.Response
			var body []byte
			if tt.provider == llmprovider.Anthropic {
				resp, body = tr.anthropic(t, tokenS1, anthropicBody)
			} else {
				resp, body = tr.openai(t, tokenS1, openAIBody)
			}
			if resp.StatusCode != tt.status {
				t.Fatalf("status %d", resp.StatusCode)
			}
			assertNoSecrets(t, resp, body)
			if strings.Contains(string(body), "cdef") {
				t.Fatalf("the key's tail reached the agent: %s", body)
			}
			if !strings.Contains(string(body), "[redacted]") {
				t.Fatalf("body %s", body)
			}
			c := tr.sink.waitCalls(t, 1)[0]
			if c.StatusCode != tt.status || c.InputTokens != 0 || strings.Contains(c.Error, "REALKEY") {
				t.Fatalf("record %+v", c)
			}
		})
	}
}

// TestOpenAIStreamUsageRequested: a streaming chat request gets
// stream_options.include_usage=true (added or switched on); everything
// else in the body is unchanged.
func TestOpenAIStreamUsageRequested(t *testing.T) {
	tests := []struct {
		name string
		body string
		want string
	}{
		{name: "absent", body: `{"model":"gpt-4o","stream":true,"messages":[]}`,
			want: `{"model":"gpt-4o","stream":true,"messages":[],"stream_options":{"include_usage":true}}`},
		{name: "switched off", body: `{"model":"gpt-4o", "stream_options": {"include_usage": false}, "stream":true,"messages":[]}`,
			want: `{"model":"gpt-4o", "stream_options": {"include_usage":true}, "stream":true,"messages":[]}`},
		{name: "already on", body: `{"model":"gpt-4o","stream":true,"stream_options":{"include_usage":true},"messages":[]}`,
			want: `{"model":"gpt-4o","stream":true,"stream_options":{"include_usage":true},"messages":[]}`},
		{name: "not streaming", body: `{"model":"gpt-4o","stream":false,"messages":[]}`,
			want: `{"model":"gpt-4o","stream":false,"messages":[]}`},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			tr := startRelay(t)
			resp, body := tr.openai(t, tokenS1, tt.body)
			if resp.StatusCode != http.StatusOK {
				t.Fatalf("status %d: %s", resp.StatusCode, body)
			}
			if got := string(tr.model.last(t).Body); got != tt.want {
				t.Fatalf("upstream body %s, want %s", got, tt.want)
			}
		})
	}
}

// TestUpstreamFailures: unreachable, slow, redirecting upstreams give the
// agent a short error in the provider's shape.
func TestUpstreamFailures(t *testing.T) {
	tests := []struct {
		name       string
		setup      func(tr *testRelay)
		cfg        func(c *Config)
		wantStatus int
	}{
		{name: "redirect", wantStatus: http.StatusBadGateway, setup: func(tr *testRelay) {
			tr.model.override = func(w http.ResponseWriter, r *http.Request, _ []byte) {
				http.Redirect(w, r, "http://169.254.169.254/latest/meta-data", http.StatusFound)
			}
		}},
		{name: "timeout", wantStatus: http.StatusGatewayTimeout, cfg: func(c *Config) { c.Timeout = 100 * time.Millisecond }, setup: func(tr *testRelay) {
			tr.model.override = func(w http.ResponseWriter, r *http.Request, _ []byte) {
				select {
				case <-r.Context().Done():
				case <-time.After(5 * time.Second):
				}
			}
		}},
		{name: "unreachable", wantStatus: http.StatusBadGateway, cfg: func(c *Config) {
			ln, _ := net.Listen("tcp", "127.0.0.1:0")
			addr := ln.Addr().String()
			ln.Close()
			c.OpenAI.BaseURL = "http://" + addr + "/v1"
		}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			var opts []relayOption
			if tt.cfg != nil {
				opts = append(opts, withConfig(tt.cfg))
			}
			tr := startRelay(t, opts...)
			if tt.setup != nil {
				tt.setup(tr)
			}
			resp, body := tr.openai(t, tokenS1, openAIBody)
			if resp.StatusCode != tt.wantStatus {
				t.Fatalf("status %d: %s", resp.StatusCode, body)
			}
			_, msg := errorMessage(t, llmprovider.OpenAI, body)
			if strings.Contains(msg, "127.0.0.1") || strings.Contains(msg, "169.254") || resp.Header.Get("Location") != "" {
				t.Fatalf("upstream detail reached the agent: %q", msg)
			}
			c := tr.sink.waitCalls(t, 1)[0]
			if c.Error == "" {
				t.Fatalf("record %+v", c)
			}
		})
	}
}

// TestUnknownModelPrice: a model without a price costs 0, and the record
// and a metric say so.
func TestUnknownModelPrice(t *testing.T) {
	tr := startRelay(t)
	tr.model.override = func(w http.ResponseWriter, _ *http.Request, _ []byte) {
		w.Header().Set("Content-Type", "application/json")
		_, _ = io.WriteString(w, `{"model":"llama3.1:8b","choices":[],"usage":{"prompt_tokens":7,"completion_tokens":3}}`)
	}
	resp, body := tr.openai(t, tokenS1, `{"model":"llama3.1:8b","messages":[]}`)
	if resp.StatusCode != http.StatusOK {
		t.Fatalf("status %d: %s", resp.StatusCode, body)
	}
	c := tr.sink.waitCalls(t, 1)[0]
	if c.CostUSD != 0 || c.InputTokens != 7 || c.OutputTokens != 3 || !strings.Contains(c.Error, `no price for model "llama3.1:8b"`) {
		t.Fatalf("record %+v", c)
	}
	if v := testutil.ToFloat64(tr.relay.metrics.unpriced.WithLabelValues(llmprovider.OpenAI)); v != 1 {
		t.Fatalf("unpriced metric %v", v)
	}
	if v := testutil.ToFloat64(tr.relay.metrics.tokens.WithLabelValues(llmprovider.OpenAI, unknownModelLabel, "input")); v != 7 {
		t.Fatalf("token metric %v", v)
	}
}

// TestAuditFailureRefuses: after a failed audit write new calls are
// refused until a write (of the refusal) succeeds again.
func TestAuditFailureRefuses(t *testing.T) {
	tr := startRelay(t)
	tr.sink.fail.Store(true)
	if resp, body := tr.anthropic(t, tokenS1, anthropicBody); resp.StatusCode != http.StatusOK {
		t.Fatalf("status %d: %s", resp.StatusCode, body)
	}
	waitFor(t, func() bool { return tr.relay.rec.Down() })
	resp, body := tr.anthropic(t, tokenS1, anthropicBody)
	if resp.StatusCode != http.StatusServiceUnavailable {
		t.Fatalf("status %d: %s", resp.StatusCode, body)
	}
	if n := len(tr.model.requests()); n != 1 {
		t.Fatalf("%d requests upstream", n)
	}
	tr.sink.fail.Store(false)
	resp, _ = tr.anthropic(t, tokenS1, anthropicBody) // refused, but the refusal is recorded
	if resp.StatusCode != http.StatusServiceUnavailable {
		t.Fatalf("status %d", resp.StatusCode)
	}
	waitFor(t, func() bool { return !tr.relay.rec.Down() })
	if resp, body := tr.anthropic(t, tokenS1, anthropicBody); resp.StatusCode != http.StatusOK {
		t.Fatalf("status %d: %s", resp.StatusCode, body)
	}
	if v := testutil.ToFloat64(tr.relay.metrics.auditFailures); v < 1 {
		t.Fatalf("audit failure metric %v", v)
	}
}

func waitFor(t testing.TB, cond func() bool) {
	t.Helper()
	deadline := time.Now().Add(5 * time.Second)
	for !cond() {
		if time.Now().After(deadline) {
			t.Fatal("condition not reached")
		}
		time.Sleep(5 * time.Millisecond)
	}
}

// TestNewChecks: New refuses missing dependencies and unsafe upstreams.
func TestNewChecks(t *testing.T) {
	tr := startRelay(t)
	auth := tr.relay.auth
	tests := []struct {
		name    string
		cfg     Config
		deps    Deps
		wantErr string
	}{
		{name: "no auth", deps: Deps{Sink: &memSink{}}, wantErr: "no authenticator"},
		{name: "no sink", deps: Deps{Auth: auth}, wantErr: "no audit sink"},
		{name: "http with key", cfg: Config{Anthropic: llmprovider.ProviderConfig{BaseURL: "http://api.example"}}, deps: Deps{Auth: auth, Sink: &memSink{}}, wantErr: "clear text"},
		{name: "bad base", cfg: Config{OpenAI: llmprovider.ProviderConfig{BaseURL: "https://u:p@api.example/v1"}}, deps: Deps{Auth: auth, Sink: &memSink{}}, wantErr: "user info"},
		{name: "bad prefix", cfg: Config{Prefix: "llm"}, deps: Deps{Auth: auth, Sink: &memSink{}}, wantErr: "prefix"},
		{name: "keyless http ok", cfg: Config{OpenAI: llmprovider.ProviderConfig{BaseURL: "http://ollama:11434/v1", Keyless: true}}, deps: Deps{Auth: auth, Sink: &memSink{}}},
		{name: "key with newline", cfg: Config{Getenv: func(string) string { return "a\nb" }}, deps: Deps{Auth: auth, Sink: &memSink{}}, wantErr: "line break"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			r, err := New(tt.cfg, tt.deps)
			if tt.wantErr == "" {
				if err != nil {
					t.Fatal(err)
				}
				_ = r.Close()
				return
			}
			if err == nil || !strings.Contains(err.Error(), tt.wantErr) {
				t.Fatalf("err %v, want %q", err, tt.wantErr)
			}
		})
	}
}

// TestRefusalShapes: every refusal is valid JSON in the provider's shape.
func TestRefusalShapes(t *testing.T) {
	for _, k := range []errKind{kindInvalid, kindAuth, kindPermission, kindNotFound, kindMethod, kindTooLarge, kindRateLimit, kindBudget, kindUnavailable, kindUpstream, kindTimeout} {
		for _, p := range []string{llmprovider.Anthropic, llmprovider.OpenAI, ""} {
			t.Run(fmt.Sprintf("%s/%d", p, k), func(t *testing.T) {
				w := &recorder{h: http.Header{}}
				writeRefusal(w, p, &refusal{status: 400, kind: k, msg: "m \"quoted\""})
				var v map[string]any
				if err := json.Unmarshal(w.body, &v); err != nil {
					t.Fatalf("%s: %v", w.body, err)
				}
				_, msg := errorMessage(t, p, w.body)
				if msg != "m \"quoted\"" {
					t.Fatalf("message %q", msg)
				}
			})
		}
	}
}

type recorder struct {
	h    http.Header
	code int
	body []byte
}

func (r *recorder) Header() http.Header         { return r.h }
func (r *recorder) WriteHeader(c int)           { r.code = c }
func (r *recorder) Write(b []byte) (int, error) { r.body = append(r.body, b...); return len(b), nil }
