package model

import (
	"context"
	"encoding/json"
	"errors"
	"io"
	"net/http"
	"net/http/httptest"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"testing"
)

const agentToken = "agent-token-0123456789abcdef"

// fakeRelay records requests and answers with canned bodies in order.
type fakeRelay struct {
	mu       sync.Mutex
	path     string
	bodies   []string
	requests []recorded
}

type recorded struct {
	path    string
	headers http.Header
	body    map[string]any
}

func (f *fakeRelay) ServeHTTP(w http.ResponseWriter, r *http.Request) {
	raw, _ := io.ReadAll(r.Body)
	var body map[string]any
	_ = json.Unmarshal(raw, &body)
	f.mu.Lock()
	defer f.mu.Unlock()
	f.requests = append(f.requests, recorded{path: r.URL.Path, headers: r.Header.Clone(), body: body})
	if r.URL.Path != f.path {
		http.Error(w, `{"error":{"message":"wrong path `+r.URL.Path+`"}}`, http.StatusNotFound)
		return
	}
	i := len(f.requests) - 1
	if i >= len(f.bodies) {
		i = len(f.bodies) - 1
	}
	w.Header().Set("Content-Type", "application/json")
	_, _ = io.WriteString(w, f.bodies[i])
}

// hostileEnv sets the variables the SDKs would read by default: none of
// them may influence where requests go or which key is sent.
func hostileEnv(t *testing.T) {
	for k, v := range map[string]string{
		"ANTHROPIC_API_KEY":    "sk-ant-real-key-must-not-be-sent",
		"ANTHROPIC_AUTH_TOKEN": "real-auth-token-must-not-be-sent",
		"ANTHROPIC_BASE_URL":   "http://127.0.0.1:1/wrong",
		"OPENAI_API_KEY":       "sk-real-openai-key-must-not-be-sent",
		"OPENAI_BASE_URL":      "http://127.0.0.1:1/wrong",
		"OPENAI_ORG_ID":        "org-must-not-be-sent",
		"HTTP_PROXY":           "http://agent:token@127.0.0.1:1",
		"HTTPS_PROXY":          "http://agent:token@127.0.0.1:1",
	} {
		t.Setenv(k, v)
	}
}

func assertNoRealKey(t *testing.T, h http.Header) {
	t.Helper()
	for name, vals := range h {
		for _, v := range vals {
			if strings.Contains(v, "must-not-be-sent") {
				t.Errorf("header %s carries an environment credential", name)
			}
		}
	}
}

func TestAnthropicThroughRelay(t *testing.T) {
	hostileEnv(t)
	relay := &fakeRelay{path: "/llm/anthropic/v1/messages", bodies: []string{
		`{"id":"msg_1","type":"message","role":"assistant","model":"claude-test","content":[{"type":"text","text":"Let me look."},{"type":"tool_use","id":"toolu_1","name":"execute_code","input":{"code":"return 1"}}],"stop_reason":"tool_use","usage":{"input_tokens":120,"output_tokens":30,"cache_read_input_tokens":5,"cache_creation_input_tokens":0}}`,
		`{"id":"msg_2","type":"message","role":"assistant","model":"claude-test","content":[{"type":"text","text":"Done."}],"stop_reason":"end_turn","usage":{"input_tokens":200,"output_tokens":7}}`,
	}}
	srv := httptest.NewServer(relay)
	defer srv.Close()
	m, err := New("anthropic:claude-test", Config{BaseURL: srv.URL + "/llm", Token: agentToken})
	if err != nil {
		t.Fatal(err)
	}
	ctx := context.Background()
	conv := []Message{{Role: User, Text: "count files"}}
	r1, err := m.Complete(ctx, Request{System: "sys", Messages: conv, MaxTokens: 1000})
	if err != nil {
		t.Fatal(err)
	}
	if r1.Text != "Let me look." || len(r1.Calls) != 1 || r1.Calls[0].Code != "return 1" || r1.Calls[0].ID != "toolu_1" {
		t.Fatalf("reply = %+v", r1)
	}
	if r1.Usage != (Usage{InputTokens: 125, OutputTokens: 30}) {
		t.Errorf("usage = %+v", r1.Usage)
	}
	conv = append(conv,
		Message{Role: Assistant, Text: r1.Text, Calls: r1.Calls},
		Message{Role: User, Results: []ToolResult{{CallID: "toolu_1", Content: "status: error", IsError: true}}})
	r2, err := m.Complete(ctx, Request{System: "sys", Messages: conv, MaxTokens: 1000})
	if err != nil {
		t.Fatal(err)
	}
	if r2.Text != "Done." || len(r2.Calls) != 0 || r2.Usage.Total() != 207 {
		t.Errorf("reply = %+v", r2)
	}

	relay.mu.Lock()
	defer relay.mu.Unlock()
	if len(relay.requests) != 2 {
		t.Fatalf("relay saw %d requests", len(relay.requests))
	}
	for _, req := range relay.requests {
		if req.path != relay.path {
			t.Errorf("path = %s", req.path)
		}
		if got := req.headers.Get("X-Api-Key"); got != agentToken {
			t.Errorf("x-api-key = %q, want the agent token", got)
		}
		if req.headers.Get("Authorization") != "" {
			t.Errorf("an Authorization header was sent")
		}
		assertNoRealKey(t, req.headers)
	}
	first := relay.requests[0].body
	tools, _ := first["tools"].([]any)
	if len(tools) != 1 || tools[0].(map[string]any)["name"] != ToolName {
		t.Errorf("tools = %v", first["tools"])
	}
	if sys, _ := json.Marshal(first["system"]); !strings.Contains(string(sys), `"sys"`) {
		t.Errorf("system prompt not sent: %s", sys)
	}
	second, _ := json.Marshal(relay.requests[1].body["messages"])
	for _, want := range []string{`"tool_use_id":"toolu_1"`, `"is_error":true`, `"type":"tool_use"`, `"code":"return 1"`} {
		if !strings.Contains(string(second), want) {
			t.Errorf("second request lacks %s: %s", want, second)
		}
	}
}

func TestOpenAIThroughRelay(t *testing.T) {
	hostileEnv(t)
	relay := &fakeRelay{path: "/llm/openai/chat/completions", bodies: []string{
		`{"id":"c1","object":"chat.completion","created":1,"model":"gpt-test","choices":[{"index":0,"finish_reason":"tool_calls","message":{"role":"assistant","content":null,"tool_calls":[{"id":"call_1","type":"function","function":{"name":"execute_code","arguments":"{\"code\":\"return 2\"}"}},{"id":"call_2","type":"function","function":{"name":"execute_code","arguments":"not json"}}]}}],"usage":{"prompt_tokens":100,"completion_tokens":20,"total_tokens":120}}`,
		`{"id":"c2","object":"chat.completion","created":2,"model":"gpt-test","choices":[{"index":0,"finish_reason":"stop","message":{"role":"assistant","content":"All done."}}],"usage":{"prompt_tokens":150,"completion_tokens":5,"total_tokens":155}}`,
	}}
	srv := httptest.NewServer(relay)
	defer srv.Close()
	m, err := New("openai:gpt-test", Config{BaseURL: srv.URL + "/llm/", Token: agentToken})
	if err != nil {
		t.Fatal(err)
	}
	ctx := context.Background()
	conv := []Message{{Role: User, Text: "do it"}}
	r1, err := m.Complete(ctx, Request{System: "sys", Messages: conv, MaxTokens: 500})
	if err != nil {
		t.Fatal(err)
	}
	if len(r1.Calls) != 2 || r1.Calls[0].Code != "return 2" || r1.Calls[1].Invalid == "" {
		t.Fatalf("calls = %+v", r1.Calls)
	}
	if r1.Usage != (Usage{InputTokens: 100, OutputTokens: 20}) {
		t.Errorf("usage = %+v", r1.Usage)
	}
	conv = append(conv,
		Message{Role: Assistant, Calls: r1.Calls},
		Message{Role: User, Results: []ToolResult{{CallID: "call_1", Content: "status: ok"}, {CallID: "call_2", Content: "bad input", IsError: true}}})
	r2, err := m.Complete(ctx, Request{System: "sys", Messages: conv, MaxTokens: 500})
	if err != nil {
		t.Fatal(err)
	}
	if r2.Text != "All done." || r2.Usage.Total() != 155 {
		t.Errorf("reply = %+v", r2)
	}
	relay.mu.Lock()
	defer relay.mu.Unlock()
	for _, req := range relay.requests {
		if got := req.headers.Get("Authorization"); got != "Bearer "+agentToken {
			t.Errorf("authorization = %q, want the agent token", got)
		}
		assertNoRealKey(t, req.headers)
	}
	msgs, _ := json.Marshal(relay.requests[1].body["messages"])
	for _, want := range []string{`"role":"system"`, `"role":"tool"`, `"tool_call_id":"call_2"`, `"tool_calls"`} {
		if !strings.Contains(string(msgs), want) {
			t.Errorf("second request lacks %s: %s", want, msgs)
		}
	}
	if mt := relay.requests[0].body["max_completion_tokens"]; mt != float64(500) {
		t.Errorf("max_completion_tokens = %v", mt)
	}
}

func TestRelayErrorIsReported(t *testing.T) {
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		w.Header().Set("Content-Type", "application/json")
		w.WriteHeader(http.StatusTooManyRequests)
		_, _ = io.WriteString(w, `{"type":"error","error":{"type":"budget","message":"session token budget exhausted"}}`)
	}))
	defer srv.Close()
	m, err := New("anthropic:x", Config{BaseURL: srv.URL, Token: agentToken, MaxRetries: 1})
	if err != nil {
		t.Fatal(err)
	}
	_, err = m.Complete(context.Background(), Request{Messages: []Message{{Role: User, Text: "hi"}}, MaxTokens: 10})
	if err == nil || !strings.Contains(err.Error(), "429") {
		t.Errorf("err = %v", err)
	}
}

func TestNew(t *testing.T) {
	dir := t.TempDir()
	tr := filepath.Join(dir, "t.yaml")
	if err := os.WriteFile(tr, []byte("steps:\n  - final: hi\n"), 0o600); err != nil {
		t.Fatal(err)
	}
	tests := []struct {
		name    string
		id      string
		cfg     Config
		want    string
		wantErr string
	}{
		{name: "anthropic", id: "anthropic:claude-x", cfg: Config{BaseURL: "http://g/llm", Token: agentToken}, want: "anthropic:claude-x"},
		{name: "openai", id: "openai:gpt-x", cfg: Config{BaseURL: "http://g/llm", Token: agentToken}, want: "openai:gpt-x"},
		{name: "replay", id: "replay:" + tr, want: "replay:" + tr},
		{name: "no provider", id: "claude-x", wantErr: "want provider:model"},
		{name: "unknown provider is not a fallback", id: "gemini:x", cfg: Config{BaseURL: "http://g", Token: agentToken}, wantErr: "unknown provider"},
		{name: "missing base url", id: "openai:gpt-x", cfg: Config{Token: agentToken}, wantErr: "IRONCURTAIN_MODEL_BASE_URL"},
		{name: "missing token", id: "anthropic:c", cfg: Config{BaseURL: "http://g"}, wantErr: "IRONCURTAIN_AGENT_TOKEN"},
		{name: "missing transcript", id: "replay:" + filepath.Join(dir, "nope.yaml"), wantErr: "loading replay transcript"},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			m, err := New(tc.id, tc.cfg)
			if tc.wantErr != "" {
				if err == nil || !strings.Contains(err.Error(), tc.wantErr) {
					t.Fatalf("err = %v, want %q", err, tc.wantErr)
				}
				return
			}
			if err != nil {
				t.Fatal(err)
			}
			if m.Name() != tc.want {
				t.Errorf("name = %q", m.Name())
			}
		})
	}
	if _, err := New("bogus", Config{}); !errors.Is(err, ErrUsage) {
		t.Errorf("err = %v, want ErrUsage", err)
	}
}
