package autoapprove

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net/http"
	"net/http/httptest"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"ironcurtain.dev/gateway/internal/escalation"
	"ironcurtain.dev/gateway/internal/llmprovider"
)

const testKey = "sk-test-auto-approver-key"

// fakeModel is an Anthropic Messages API that answers with text (or runs
// handle) and records what it was sent.
type fakeModel struct {
	srv   *httptest.Server
	calls atomic.Int64
	mu    sync.Mutex
	last  messagesBody
	keyOK bool
	// answer is the text the model replies (when handle is nil).
	answer string
	handle func(w http.ResponseWriter, r *http.Request, body messagesBody)
}

type messagesBody struct {
	Model     string `json:"model"`
	MaxTokens int    `json:"max_tokens"`
	System    string `json:"system"`
	Messages  []struct {
		Role    string `json:"role"`
		Content string `json:"content"`
	} `json:"messages"`
}

// textBlocks is a Messages API text field: a string, or text blocks (as the
// SDK sends system and content), read as their concatenated text.
type textBlocks string

func (t *textBlocks) UnmarshalJSON(b []byte) error {
	var s string
	if err := json.Unmarshal(b, &s); err == nil {
		*t = textBlocks(s)
		return nil
	}
	var blocks []struct {
		Type string `json:"type"`
		Text string `json:"text"`
	}
	if err := json.Unmarshal(b, &blocks); err != nil {
		return err
	}
	var sb strings.Builder
	for _, bl := range blocks {
		if bl.Type != "text" {
			return fmt.Errorf("a %q block where text was expected", bl.Type)
		}
		sb.WriteString(bl.Text)
	}
	*t = textBlocks(sb.String())
	return nil
}

// decodeMessages reads a Messages API request body.
func decodeMessages(b []byte) (messagesBody, error) {
	var wire struct {
		Model     string     `json:"model"`
		MaxTokens int        `json:"max_tokens"`
		System    textBlocks `json:"system"`
		Messages  []struct {
			Role    string     `json:"role"`
			Content textBlocks `json:"content"`
		} `json:"messages"`
	}
	if err := json.Unmarshal(b, &wire); err != nil {
		return messagesBody{}, err
	}
	body := messagesBody{Model: wire.Model, MaxTokens: wire.MaxTokens, System: string(wire.System)}
	for _, m := range wire.Messages {
		body.Messages = append(body.Messages, struct {
			Role    string `json:"role"`
			Content string `json:"content"`
		}{Role: m.Role, Content: string(m.Content)})
	}
	return body, nil
}

func newFakeModel(t *testing.T, answer string) *fakeModel {
	t.Helper()
	f := &fakeModel{answer: answer}
	f.srv = httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		f.calls.Add(1)
		b, _ := io.ReadAll(r.Body)
		body, err := decodeMessages(b)
		if err != nil || r.URL.Path != "/v1/messages" || r.Method != http.MethodPost {
			http.Error(w, "bad request", http.StatusBadRequest)
			return
		}
		f.mu.Lock()
		f.last = body
		f.keyOK = r.Header.Get("X-Api-Key") == testKey && !strings.Contains(string(b), testKey)
		answer := f.answer
		f.mu.Unlock()
		if f.handle != nil {
			f.handle(w, r, body)
			return
		}
		writeMessage(w, answer, "end_turn")
	}))
	t.Cleanup(f.srv.Close)
	return f
}

func writeMessage(w http.ResponseWriter, text, stop string) {
	w.Header().Set("Content-Type", "application/json")
	_ = json.NewEncoder(w).Encode(map[string]any{
		"type": "message", "role": "assistant", "model": "claude-haiku-4-5",
		"content":     []map[string]any{{"type": "text", "text": text}},
		"stop_reason": stop,
		"usage":       map[string]any{"input_tokens": 900, "output_tokens": 40},
	})
}

type fakeHistory struct {
	ds  []Decision
	err error
}

func (h fakeHistory) Recent(context.Context, string, string, int) ([]Decision, error) {
	return h.ds, h.err
}

func testConfig(t *testing.T, f *fakeModel, mut func(*Config)) Config {
	t.Helper()
	up, err := llmprovider.Resolve(llmprovider.Anthropic, llmprovider.ProviderConfig{BaseURL: f.srv.URL, UnsafeAllowHTTPWithKey: true},
		func(k string) string {
			if k == llmprovider.DefaultAnthropicKeyEnv {
				return testKey
			}
			return ""
		})
	if err != nil {
		t.Fatal(err)
	}
	c := Config{Upstream: up, Model: "claude-haiku-4-5", Timeout: 5 * time.Second, MaxOutputTokens: 300,
		MaxPromptBytes: 32 << 10, RecentDecisions: 10, RatePerMinute: 100, MaxConcurrent: 4,
		Budget: Budget{CallsPerDay: 100, TokensPerDay: 1_000_000, CostUSDPerDay: 10}}
	if mut != nil {
		mut(&c)
	}
	return c
}

func newTestApprover(t *testing.T, f *fakeModel, h History, mut func(*Config)) *Approver {
	t.Helper()
	if h == nil {
		h = fakeHistory{ds: []Decision{{At: time.Now().Add(-time.Minute), Tool: "filesystem__read_file", Decision: "allow", Rule: "allow-reads"}}}
	}
	a, err := New(testConfig(t, f, mut), Deps{History: h})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = a.Close() })
	return a
}

func ruleReq() escalation.Request {
	return escalation.Request{CallID: "c1", SessionID: "s1", Kind: escalation.KindToolCall, Server: "filesystem", Tool: "delete_file",
		Args: json.RawMessage(`{"path":"/workspace/notes.txt"}`), PolicyArgs: json.RawMessage(`{"path":"/workspace/notes.txt"}`),
		Rule: "escalate-deletes", Reason: "deletes need a human", RuleEscalation: true}
}

func TestReviewVerdicts(t *testing.T) {
	tests := []struct {
		name        string
		answer      string
		wantApprove bool
		wantOutcome string
	}{
		{"approve", `{"verdict":"approve","reasoning":"a note in the workspace"}`, true, escalation.OutcomeApproved},
		{"approve with white space", "\n {\"reasoning\": \"fine\", \"verdict\": \"approve\"}\n", true, escalation.OutcomeApproved},
		{"leave to a human", `{"verdict":"human","reasoning":"unsure"}`, false, escalation.OutcomeHuman},
		{"deny is never obeyed", `{"verdict":"deny","reasoning":"dangerous"}`, false, escalation.OutcomeModelDenied},
		{"prose", `I approve this call.`, false, escalation.OutcomeMalformed},
		{"prose then JSON", `Sure: {"verdict":"approve","reasoning":"x"}`, false, escalation.OutcomeMalformed},
		{"code fence", "```json\n{\"verdict\":\"approve\",\"reasoning\":\"x\"}\n```", false, escalation.OutcomeMalformed},
		{"text after the object", `{"verdict":"approve","reasoning":"x"} and more`, false, escalation.OutcomeMalformed},
		{"two objects", `{"verdict":"human","reasoning":"x"}{"verdict":"approve","reasoning":"x"}`, false, escalation.OutcomeMalformed},
		{"duplicate verdict", `{"verdict":"human","verdict":"approve","reasoning":"x"}`, false, escalation.OutcomeMalformed},
		{"extra member", `{"verdict":"approve","reasoning":"x","scope":"all"}`, false, escalation.OutcomeMalformed},
		{"missing reasoning", `{"verdict":"approve"}`, false, escalation.OutcomeMalformed},
		{"capitalised", `{"verdict":"Approve","reasoning":"x"}`, false, escalation.OutcomeMalformed},
		{"padded verdict", `{"verdict":"approve ","reasoning":"x"}`, false, escalation.OutcomeMalformed},
		{"boolean", `{"verdict":true,"reasoning":"x"}`, false, escalation.OutcomeMalformed},
		{"nested", `{"verdict":{"v":"approve"},"reasoning":"x"}`, false, escalation.OutcomeMalformed},
		{"array", `[{"verdict":"approve","reasoning":"x"}]`, false, escalation.OutcomeMalformed},
		{"empty", ``, false, escalation.OutcomeMalformed},
		{"reasoning too long", `{"verdict":"approve","reasoning":"` + strings.Repeat("x", 2001) + `"}`, false, escalation.OutcomeMalformed},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			f := newFakeModel(t, tt.answer)
			a := newTestApprover(t, f, nil, nil)
			v := a.Review(context.Background(), ruleReq())
			if v.Approve != tt.wantApprove || v.Outcome != tt.wantOutcome {
				t.Fatalf("verdict %+v, want approve=%v outcome %s", v, tt.wantApprove, tt.wantOutcome)
			}
			if v.Model != "claude-haiku-4-5" || v.Tokens != 940 || !(v.CostUSD > 0) {
				t.Errorf("verdict %+v: want the model, 940 tokens and a cost", v)
			}
			if f.calls.Load() != 1 || !f.keyOK {
				t.Errorf("model calls %d, key in header only %v", f.calls.Load(), f.keyOK)
			}
		})
	}
}

func TestReviewModelFailuresLeaveToHuman(t *testing.T) {
	tests := []struct {
		name    string
		handle  func(w http.ResponseWriter, r *http.Request, body messagesBody)
		outcome string
	}{
		{"server error", func(w http.ResponseWriter, _ *http.Request, _ messagesBody) {
			http.Error(w, `{"error":"overloaded `+testKey+`"}`, http.StatusServiceUnavailable)
		}, escalation.OutcomeError},
		{"not JSON", func(w http.ResponseWriter, _ *http.Request, _ messagesBody) { _, _ = io.WriteString(w, "<html>") }, escalation.OutcomeError},
		{"cut at max_tokens", func(w http.ResponseWriter, _ *http.Request, _ messagesBody) {
			writeMessage(w, `{"verdict":"approve","reasoning":"x"}`, "max_tokens")
		}, escalation.OutcomeError},
		{"tool use", func(w http.ResponseWriter, _ *http.Request, _ messagesBody) {
			_ = json.NewEncoder(w).Encode(map[string]any{"content": []map[string]any{{"type": "tool_use"}}, "stop_reason": "end_turn"})
		}, escalation.OutcomeError},
		{"redirect", func(w http.ResponseWriter, r *http.Request, _ messagesBody) {
			http.Redirect(w, r, "http://example.invalid/v1/messages", http.StatusTemporaryRedirect)
		}, escalation.OutcomeError},
		{"response too large", func(w http.ResponseWriter, _ *http.Request, _ messagesBody) {
			writeMessage(w, `{"verdict":"approve","reasoning":"`+strings.Repeat("x", maxResponseBytes)+`"}`, "end_turn")
		}, escalation.OutcomeError},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			f := newFakeModel(t, "")
			f.handle = tt.handle
			a := newTestApprover(t, f, nil, nil)
			v := a.Review(context.Background(), ruleReq())
			if v.Approve || v.Outcome != tt.outcome {
				t.Fatalf("verdict %+v, want outcome %s and no approval", v, tt.outcome)
			}
			if strings.Contains(v.Reasoning, testKey) {
				t.Fatalf("the key leaked into the stored reasoning: %q", v.Reasoning)
			}
		})
	}
}

func TestReviewTimeout(t *testing.T) {
	f := newFakeModel(t, "")
	release := make(chan struct{})
	t.Cleanup(func() { close(release) })
	f.handle = func(w http.ResponseWriter, r *http.Request, _ messagesBody) {
		select {
		case <-release:
		case <-r.Context().Done():
		}
		writeMessage(w, `{"verdict":"approve","reasoning":"late"}`, "end_turn")
	}
	a := newTestApprover(t, f, nil, func(c *Config) { c.Timeout = 200 * time.Millisecond })
	start := time.Now()
	v := a.Review(context.Background(), ruleReq())
	if v.Approve || v.Outcome != escalation.OutcomeTimeout {
		t.Fatalf("verdict %+v, want a timeout left to a human", v)
	}
	if d := time.Since(start); d > 3*time.Second {
		t.Fatalf("the review took %s with a 200ms timeout", d)
	}
	if v.Tokens == 0 {
		t.Error("a timed-out call charged no tokens: the budget would not count it")
	}
}

func TestReviewBudgets(t *testing.T) {
	approve := `{"verdict":"approve","reasoning":"ok"}`
	t.Run("calls per day", func(t *testing.T) {
		f := newFakeModel(t, approve)
		a := newTestApprover(t, f, nil, func(c *Config) { c.Budget.CallsPerDay = 2 })
		for i, want := range []string{escalation.OutcomeApproved, escalation.OutcomeApproved, escalation.OutcomeBudget, escalation.OutcomeBudget} {
			v := a.Review(context.Background(), ruleReq())
			if v.Outcome != want || v.Approve != (want == escalation.OutcomeApproved) {
				t.Fatalf("review %d: %+v, want %s", i, v, want)
			}
		}
		if f.calls.Load() != 2 {
			t.Fatalf("the model was called %d times, want 2 (the budget stops the rest before any call)", f.calls.Load())
		}
	})
	t.Run("tokens per day", func(t *testing.T) {
		f := newFakeModel(t, approve)
		// One call uses 940 tokens; its usage is known only after it, so the
		// call that crosses the limit runs and the next is refused.
		a := newTestApprover(t, f, nil, func(c *Config) { c.Budget.TokensPerDay = 1000 })
		for i := range 2 {
			if v := a.Review(context.Background(), ruleReq()); !v.Approve {
				t.Fatalf("review %d: %+v", i, v)
			}
		}
		if v := a.Review(context.Background(), ruleReq()); v.Approve || v.Outcome != escalation.OutcomeBudget || f.calls.Load() != 2 {
			t.Fatalf("third review %+v, want budget (model calls %d)", v, f.calls.Load())
		}
	})
	t.Run("cost per day", func(t *testing.T) {
		f := newFakeModel(t, approve)
		a := newTestApprover(t, f, nil, func(c *Config) { c.Budget.CostUSDPerDay = 0.0001 })
		_ = a.Review(context.Background(), ruleReq())
		if v := a.Review(context.Background(), ruleReq()); v.Approve || v.Outcome != escalation.OutcomeBudget {
			t.Fatalf("second review %+v, want budget", v)
		}
	})
	t.Run("seeded from earlier spend", func(t *testing.T) {
		f := newFakeModel(t, approve)
		a := newTestApprover(t, f, nil, func(c *Config) { c.Budget.CallsPerDay = 5 })
		if err := a.Seed(context.Background(), escalation.AutoSpend{Calls: 5}); err != nil {
			t.Fatal(err)
		}
		if v := a.Review(context.Background(), ruleReq()); v.Approve || v.Outcome != escalation.OutcomeBudget || f.calls.Load() != 0 {
			t.Fatalf("review %+v after the day's budget was seeded as spent (model calls %d)", v, f.calls.Load())
		}
	})
	t.Run("a new UTC day resets the budget", func(t *testing.T) {
		f := newFakeModel(t, approve)
		now := time.Date(2026, 1, 1, 23, 59, 0, 0, time.UTC)
		var mu sync.Mutex
		clock := func() time.Time { mu.Lock(); defer mu.Unlock(); return now }
		c := testConfig(t, f, func(c *Config) { c.Budget.CallsPerDay = 1 })
		a, err := New(c, Deps{History: fakeHistory{}, Now: clock})
		if err != nil {
			t.Fatal(err)
		}
		if v := a.Review(context.Background(), ruleReq()); !v.Approve {
			t.Fatalf("%+v", v)
		}
		if v := a.Review(context.Background(), ruleReq()); v.Outcome != escalation.OutcomeBudget {
			t.Fatalf("%+v", v)
		}
		mu.Lock()
		now = now.Add(2 * time.Minute)
		mu.Unlock()
		if v := a.Review(context.Background(), ruleReq()); !v.Approve {
			t.Fatalf("after midnight: %+v", v)
		}
	})
}

func TestReviewRateLimit(t *testing.T) {
	f := newFakeModel(t, `{"verdict":"approve","reasoning":"ok"}`)
	a := newTestApprover(t, f, nil, func(c *Config) { c.RatePerMinute = 2 })
	for i, want := range []string{escalation.OutcomeApproved, escalation.OutcomeApproved, escalation.OutcomeRateLimited} {
		if v := a.Review(context.Background(), ruleReq()); v.Outcome != want {
			t.Fatalf("review %d: %+v, want %s", i, v, want)
		}
	}
	t.Run("concurrency", func(t *testing.T) {
		f := newFakeModel(t, "")
		block := make(chan struct{})
		f.handle = func(w http.ResponseWriter, _ *http.Request, _ messagesBody) {
			<-block
			writeMessage(w, `{"verdict":"approve","reasoning":"ok"}`, "end_turn")
		}
		a := newTestApprover(t, f, nil, func(c *Config) { c.MaxConcurrent = 1 })
		done := make(chan escalation.Verdict)
		go func() { done <- a.Review(context.Background(), ruleReq()) }()
		for f.calls.Load() == 0 {
			time.Sleep(time.Millisecond)
		}
		if v := a.Review(context.Background(), ruleReq()); v.Approve || v.Outcome != escalation.OutcomeRateLimited {
			t.Fatalf("second concurrent review %+v, want rate_limited", v)
		}
		close(block)
		if v := <-done; !v.Approve {
			t.Fatalf("first review %+v", v)
		}
	})
}

// TestIneligibleNeverSent: what a structural check escalated, an egress
// request, a retry attaching to an earlier escalation, or anything not
// marked as a compiled rule's escalation never reaches the model, even
// when the Approver is asked directly.
func TestIneligibleNeverSent(t *testing.T) {
	f := newFakeModel(t, `{"verdict":"approve","reasoning":"ok"}`)
	a := newTestApprover(t, f, nil, nil)
	tests := map[string]func(*escalation.Request){
		"structural escalation": func(r *escalation.Request) { r.RuleEscalation = false; r.Rule = "structural-domain-escalate" },
		"not marked":            func(r *escalation.Request) { r.RuleEscalation = false },
		"egress":                func(r *escalation.Request) { r.Kind = escalation.KindEgress },
		"attach":                func(r *escalation.Request) { r.Attach = true; r.ID = "e1" },
		"structural rule name":  func(r *escalation.Request) { r.Rule = "structural-loop-breaker" },
	}
	for name, mut := range tests {
		t.Run(name, func(t *testing.T) {
			r := ruleReq()
			mut(&r)
			if v := a.Review(context.Background(), r); v.Approve {
				t.Fatalf("approved: %+v", v)
			}
		})
	}
	if n := f.calls.Load(); n != 0 {
		t.Fatalf("the model was asked %d times", n)
	}
}

func TestReviewHistoryErrorLeavesToHuman(t *testing.T) {
	f := newFakeModel(t, `{"verdict":"approve","reasoning":"ok"}`)
	a := newTestApprover(t, f, fakeHistory{err: errors.New("db down")}, nil)
	if v := a.Review(context.Background(), ruleReq()); v.Approve || v.Outcome != escalation.OutcomeError || f.calls.Load() != 0 {
		t.Fatalf("verdict %+v (model calls %d)", v, f.calls.Load())
	}
}

func TestReviewTooLarge(t *testing.T) {
	f := newFakeModel(t, `{"verdict":"approve","reasoning":"ok"}`)
	a := newTestApprover(t, f, nil, func(c *Config) { c.MaxPromptBytes = 2048 })
	r := ruleReq()
	r.Args = json.RawMessage(`{"path":"/workspace/` + strings.Repeat("a", 4000) + `"}`)
	if v := a.Review(context.Background(), r); v.Approve || v.Outcome != escalation.OutcomeTooLarge || f.calls.Load() != 0 {
		t.Fatalf("verdict %+v (model calls %d)", v, f.calls.Load())
	}
}

func TestNewRefusesUnpricedModel(t *testing.T) {
	f := newFakeModel(t, "")
	_, err := New(testConfig(t, f, func(c *Config) { c.Model = "my-local-model" }), Deps{History: fakeHistory{}})
	if err == nil || !strings.Contains(err.Error(), "relay.prices") {
		t.Fatalf("err %v, want one naming relay.prices", err)
	}
}

func TestOpenAIProvider(t *testing.T) {
	var got struct {
		Model               string `json:"model"`
		MaxCompletionTokens int    `json:"max_completion_tokens"`
		Messages            []struct {
			Role, Content string
		} `json:"messages"`
	}
	var auth string
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		auth = r.Header.Get("Authorization")
		_ = json.NewDecoder(r.Body).Decode(&got)
		w.Header().Set("Content-Type", "application/json") // as OpenAI, Ollama and vLLM answer
		_ = json.NewEncoder(w).Encode(map[string]any{
			"choices": []map[string]any{{"finish_reason": "stop", "message": map[string]any{"role": "assistant", "content": `{"verdict":"approve","reasoning":"fine"}`}}},
			"usage":   map[string]any{"prompt_tokens": 500, "completion_tokens": 20},
		})
	}))
	t.Cleanup(srv.Close)
	up, err := llmprovider.Resolve(llmprovider.OpenAI, llmprovider.ProviderConfig{BaseURL: srv.URL + "/v1", UnsafeAllowHTTPWithKey: true},
		func(string) string { return testKey })
	if err != nil {
		t.Fatal(err)
	}
	a, err := New(Config{Upstream: up, Model: "gpt-4o-mini", Timeout: 5 * time.Second, MaxOutputTokens: 100, MaxPromptBytes: 4096,
		RecentDecisions: 5, RatePerMinute: 10, MaxConcurrent: 1, Budget: Budget{CallsPerDay: 5, TokensPerDay: 10000, CostUSDPerDay: 1}},
		Deps{History: fakeHistory{}})
	if err != nil {
		t.Fatal(err)
	}
	v := a.Review(context.Background(), ruleReq())
	if !v.Approve || v.Tokens != 520 {
		t.Fatalf("verdict %+v", v)
	}
	if auth != "Bearer "+testKey || got.Model != "gpt-4o-mini" || got.MaxCompletionTokens != 100 || len(got.Messages) != 2 || got.Messages[0].Role != "system" {
		t.Fatalf("request: auth %q, body %+v", auth, got)
	}
}

// TestModelCallNotRetried: one review is one model call, as the budget
// counts it (the SDKs retry 429 and 5xx answers unless told not to).
func TestModelCallNotRetried(t *testing.T) {
	for _, status := range []int{http.StatusTooManyRequests, http.StatusServiceUnavailable} {
		f := newFakeModel(t, "")
		f.handle = func(w http.ResponseWriter, _ *http.Request, _ messagesBody) {
			http.Error(w, `{"type":"error","error":{"type":"overloaded_error","message":"busy"}}`, status)
		}
		a := newTestApprover(t, f, nil, nil)
		v := a.Review(context.Background(), ruleReq())
		if v.Approve || v.Outcome != escalation.OutcomeError || f.calls.Load() != 1 {
			t.Fatalf("status %d: verdict %+v after %d model calls, want one call left to a human", status, v, f.calls.Load())
		}
		if !strings.Contains(v.Reasoning, fmt.Sprintf("model API answered %d", status)) {
			t.Errorf("status %d: reasoning %q does not name the answer", status, v.Reasoning)
		}
	}
}
