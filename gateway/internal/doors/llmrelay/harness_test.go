package llmrelay

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"io"
	"net/http"
	"net/http/httptest"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/prometheus/client_golang/prometheus"

	"ironcurtain.dev/gateway/internal/audit"
	"ironcurtain.dev/gateway/internal/llmprovider"
	"ironcurtain.dev/gateway/internal/session"
)

// Secrets of the tests. The agent tokens must never reach the fake model
// server; the API keys must never reach the agent.
const (
	tokenS1      = "agent-token-session-one-0123456789"
	tokenS2      = "agent-token-session-two-0123456789"
	anthropicKey = "sk-ant-api03-REALKEY-anthropic-0123456789abcdef"
	openAIKey    = "sk-proj-REALKEY-openai-0123456789abcdef"
)

// Fixtures: what the fake model server sends, byte for byte.
const (
	anthropicSSE = "event: message_start\n" +
		`data: {"type":"message_start","message":{"id":"msg_1","type":"message","role":"assistant","model":"claude-sonnet-4-5-20250929","content":[],"stop_reason":null,"usage":{"input_tokens":1200,"cache_creation_input_tokens":100,"cache_read_input_tokens":1000,"output_tokens":1}}}` + "\n\n" +
		"event: content_block_start\n" +
		`data: {"type":"content_block_start","index":0,"content_block":{"type":"text","text":""}}` + "\n\n" +
		"event: ping\n" +
		`data: {"type": "ping"}` + "\n\n" +
		"event: content_block_delta\n" +
		`data: {"type":"content_block_delta","index":0,"delta":{"type":"text_delta","text":"Hello \"usage\": {\"output_tokens\": 999999}"}}` + "\n\n" +
		"event: content_block_stop\n" +
		`data: {"type":"content_block_stop","index":0}` + "\n\n" +
		"event: message_delta\n" +
		`data: {"type":"message_delta","delta":{"stop_reason":"end_turn","stop_sequence":null},"usage":{"output_tokens":350}}` + "\n\n" +
		"event: message_stop\n" +
		`data: {"type":"message_stop"}` + "\n\n"
	anthropicSSEUsage = "in=1200 cw=100 cr=1000 out=350"
	anthropicSSECost  = (1200*3 + 100*3.75 + 1000*0.3 + 350*15) / 1e6

	anthropicJSON     = `{"id":"msg_2","type":"message","role":"assistant","model":"claude-haiku-4-5-20251001","content":[{"type":"text","text":"ok \"usage\":{\"input_tokens\":77777}"}],"stop_reason":"end_turn","usage":{"input_tokens":10,"output_tokens":20}}`
	anthropicJSONCost = (10*1 + 20*5) / 1e6

	openAIChunkHead = `{"id":"c1","object":"chat.completion.chunk","created":1,"model":"gpt-4o-2024-08-06","choices":[`
	openAISSEBody   = "data: " + openAIChunkHead + `{"index":0,"delta":{"role":"assistant","content":""}}],"usage":null}` + "\n\n" +
		"data: " + openAIChunkHead + `{"index":0,"delta":{"content":"Hi"}}],"usage":null}` + "\n\n" +
		"data: " + openAIChunkHead + `{"index":0,"delta":{},"finish_reason":"stop"}],"usage":null}` + "\n\n"
	openAISSEUsageChunk = "data: " + openAIChunkHead + `],"usage":{"prompt_tokens":500,"completion_tokens":40,"total_tokens":540}}` + "\n\n"
	openAISSEDone       = "data: [DONE]\n\n"
	openAISSECost       = (500*2.5 + 40*10) / 1e6

	openAIJSON     = `{"id":"x","object":"chat.completion","created":1,"model":"gpt-4o-mini-2024-07-18","choices":[{"index":0,"message":{"role":"assistant","content":"ok"},"finish_reason":"stop"}],"usage":{"prompt_tokens":100,"completion_tokens":50,"total_tokens":150}}`
	openAIJSONCost = (100*0.15 + 50*0.6) / 1e6
)

// seenRequest is what the fake model server received.
type seenRequest struct {
	Method string
	Path   string
	Query  string
	Host   string
	Header http.Header
	Body   []byte
}

// fakeModel is an httptest model server speaking both wire formats. It
// checks the injected key itself (401 otherwise, as the real APIs do).
type fakeModel struct {
	srv *httptest.Server

	mu   sync.Mutex
	seen []seenRequest
	// discard: do not keep requests (benchmarks).
	discard bool

	// override, when set, answers instead of the built-in behaviour (after
	// the request was recorded).
	override func(w http.ResponseWriter, r *http.Request, body []byte)
}

func newFakeModel(t testing.TB) *fakeModel {
	f := &fakeModel{}
	f.srv = httptest.NewServer(http.HandlerFunc(f.serve))
	t.Cleanup(f.srv.Close)
	return f
}

func (f *fakeModel) requests() []seenRequest {
	f.mu.Lock()
	defer f.mu.Unlock()
	return append([]seenRequest(nil), f.seen...)
}

func (f *fakeModel) last(t testing.TB) seenRequest {
	t.Helper()
	rs := f.requests()
	if len(rs) == 0 {
		t.Fatal("the fake model server received no request")
	}
	return rs[len(rs)-1]
}

func (f *fakeModel) serve(w http.ResponseWriter, r *http.Request) {
	body, _ := io.ReadAll(r.Body)
	f.mu.Lock()
	if !f.discard {
		f.seen = append(f.seen, seenRequest{Method: r.Method, Path: r.URL.Path, Query: r.URL.RawQuery, Host: r.Host, Header: r.Header.Clone(), Body: body})
	}
	override := f.override
	f.mu.Unlock()
	if override != nil {
		override(w, r, body)
		return
	}
	var req struct {
		Stream        bool `json:"stream"`
		StreamOptions struct {
			IncludeUsage bool `json:"include_usage"`
		} `json:"stream_options"`
	}
	_ = json.Unmarshal(body, &req)
	path := r.URL.Path
	if strings.HasPrefix(path, "/v1/models/") {
		path = "/v1/models/{id}"
	}
	switch path {
	case "/v1/messages", "/v1/messages/count_tokens":
		if r.Header.Get("X-Api-Key") != anthropicKey {
			w.Header().Set("Content-Type", "application/json")
			w.WriteHeader(http.StatusUnauthorized)
			_, _ = io.WriteString(w, `{"type":"error","error":{"type":"authentication_error","message":"invalid x-api-key"}}`)
			return
		}
		if r.URL.Path == "/v1/messages/count_tokens" {
			w.Header().Set("Content-Type", "application/json")
			_, _ = io.WriteString(w, `{"input_tokens":12}`)
			return
		}
		if req.Stream {
			writeSSE(w, anthropicSSE)
			return
		}
		w.Header().Set("Content-Type", "application/json")
		w.Header().Set("Request-Id", "req_1")
		_, _ = io.WriteString(w, anthropicJSON)
	case "/v1/chat/completions", "/v1/models", "/v1/models/{id}", "/v1/embeddings":
		if r.Header.Get("Authorization") != "Bearer "+openAIKey {
			w.Header().Set("Content-Type", "application/json")
			w.WriteHeader(http.StatusUnauthorized)
			_, _ = io.WriteString(w, `{"error":{"message":"Incorrect API key provided","type":"invalid_request_error","code":"invalid_api_key"}}`)
			return
		}
		switch {
		case r.URL.Path == "/v1/models":
			w.Header().Set("Content-Type", "application/json")
			_, _ = io.WriteString(w, `{"object":"list","data":[{"id":"gpt-4o","object":"model"}]}`)
		case path == "/v1/models/{id}":
			w.Header().Set("Content-Type", "application/json")
			b, _ := json.Marshal(map[string]string{"id": strings.TrimPrefix(r.URL.Path, "/v1/models/"), "object": "model"})
			_, _ = w.Write(b)
		case r.URL.Path == "/v1/embeddings":
			w.Header().Set("Content-Type", "application/json")
			_, _ = io.WriteString(w, `{"object":"list","data":[{"object":"embedding","index":0,"embedding":[0.1,0.2]}],"model":"text-embedding-3-small","usage":{"prompt_tokens":8,"total_tokens":8}}`)
		case req.Stream:
			s := openAISSEBody
			if req.StreamOptions.IncludeUsage {
				s += openAISSEUsageChunk
			}
			writeSSE(w, s+openAISSEDone)
		default:
			w.Header().Set("Content-Type", "application/json")
			_, _ = io.WriteString(w, openAIJSON)
		}
	default:
		http.NotFound(w, r)
	}
}

// writeSSE sends s event by event, flushing each.
func writeSSE(w http.ResponseWriter, s string) {
	w.Header().Set("Content-Type", "text/event-stream")
	w.Header().Set("Cache-Control", "no-cache")
	w.WriteHeader(http.StatusOK)
	for _, ev := range strings.SplitAfter(s, "\n\n") {
		if ev == "" {
			continue
		}
		_, _ = io.WriteString(w, ev)
		w.(http.Flusher).Flush()
	}
}

// memSink is an audit.Sink in memory that can be made to fail.
type memSink struct {
	mu     sync.Mutex
	events []audit.Event
	fail   atomic.Bool
}

func (s *memSink) Record(_ context.Context, e audit.Event) error {
	if s.fail.Load() {
		return errors.New("sink down")
	}
	s.mu.Lock()
	s.events = append(s.events, e)
	s.mu.Unlock()
	return nil
}

func (s *memSink) calls() []*audit.LLMCall {
	s.mu.Lock()
	defer s.mu.Unlock()
	var out []*audit.LLMCall
	for _, e := range s.events {
		if c, ok := e.(*audit.LLMCall); ok {
			out = append(out, c)
		}
	}
	return out
}

// waitCalls waits until n calls are recorded (the record is written after
// the response is complete, so the client may see the body first).
func (s *memSink) waitCalls(t testing.TB, n int) []*audit.LLMCall {
	t.Helper()
	deadline := time.Now().Add(5 * time.Second)
	for {
		cs := s.calls()
		if len(cs) >= n {
			return cs
		}
		if time.Now().After(deadline) {
			t.Fatalf("%d calls recorded, want %d", len(cs), n)
		}
		time.Sleep(5 * time.Millisecond)
	}
}

// testRelay is a relay in front of a fake model server.
type testRelay struct {
	relay *Relay
	srv   *httptest.Server // the agent-facing server (/llm/...)
	model *fakeModel
	sink  *memSink
	reg   *prometheus.Registry
	url   string // srv.URL + "/llm"
}

type relayOption func(*Config, *Deps)

func withConfig(f func(*Config)) relayOption { return func(c *Config, _ *Deps) { f(c) } }

func startRelay(t testing.TB, opts ...relayOption) *testRelay {
	t.Helper()
	model := newFakeModel(t)
	auth, err := session.NewStatic(map[string]string{"s1": tokenS1, "s2": tokenS2})
	if err != nil {
		t.Fatal(err)
	}
	env := map[string]string{"ANTHROPIC_API_KEY": anthropicKey, "OPENAI_API_KEY": openAIKey}
	cfg := Config{
		Anthropic: llmprovider.ProviderConfig{BaseURL: model.srv.URL, UnsafeAllowHTTPWithKey: true},
		OpenAI:    llmprovider.ProviderConfig{BaseURL: model.srv.URL + "/v1", UnsafeAllowHTTPWithKey: true},
		Getenv:    func(k string) string { return env[k] },
	}
	sink := &memSink{}
	reg := prometheus.NewRegistry()
	deps := Deps{Auth: auth, Sink: sink, Registerer: reg}
	for _, o := range opts {
		o(&cfg, &deps)
	}
	r, err := New(cfg, deps)
	if err != nil {
		t.Fatal(err)
	}
	mux := http.NewServeMux()
	mux.Handle("/llm/", r.Handler())
	srv := httptest.NewServer(mux)
	t.Cleanup(func() { srv.Close(); _ = r.Close() })
	return &testRelay{relay: r, srv: srv, model: model, sink: sink, reg: reg, url: srv.URL + "/llm"}
}

// do sends a request to the relay with the given headers.
func (tr *testRelay) do(t testing.TB, method, path, body string, hdr map[string]string) (*http.Response, []byte) {
	t.Helper()
	var rd io.Reader
	if body != "" {
		rd = strings.NewReader(body)
	}
	req, err := http.NewRequest(method, tr.url+path, rd)
	if err != nil {
		t.Fatal(err)
	}
	for k, v := range hdr {
		req.Header.Set(k, v)
	}
	resp, err := tr.srv.Client().Do(req)
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	b, err := io.ReadAll(resp.Body)
	if err != nil {
		t.Fatalf("reading the response: %v", err)
	}
	return resp, b
}

// anthropic and openai send a model call as the respective SDK would.
func (tr *testRelay) anthropic(t testing.TB, token, body string) (*http.Response, []byte) {
	t.Helper()
	return tr.do(t, http.MethodPost, "/anthropic/v1/messages", body, map[string]string{
		"X-Api-Key": token, "Anthropic-Version": "2023-06-01", "Content-Type": "application/json"})
}

func (tr *testRelay) openai(t testing.TB, token, body string) (*http.Response, []byte) {
	t.Helper()
	return tr.do(t, http.MethodPost, "/openai/chat/completions", body, map[string]string{
		"Authorization": "Bearer " + token, "Content-Type": "application/json"})
}

// errorMessage reads the message of either provider's error shape, and
// checks the shape.
func errorMessage(t testing.TB, provider string, b []byte) (typ, msg string) {
	t.Helper()
	switch provider {
	case llmprovider.Anthropic:
		var e anthropicError
		if err := json.Unmarshal(b, &e); err != nil || e.Type != "error" || e.Error.Type == "" {
			t.Fatalf("not an Anthropic error: %s", b)
		}
		return e.Error.Type, e.Error.Message
	default:
		var e openAIError
		if err := json.Unmarshal(b, &e); err != nil || e.Error.Type == "" || e.Error.Message == "" {
			t.Fatalf("not an OpenAI error: %s", b)
		}
		return e.Error.Type, e.Error.Message
	}
}

// assertNoSecrets fails when an agent-facing response carries a key.
func assertNoSecrets(t testing.TB, resp *http.Response, body []byte) {
	t.Helper()
	for _, k := range []string{anthropicKey, openAIKey, "REALKEY"} {
		if bytes.Contains(body, []byte(k)) {
			t.Fatalf("the response body carries a key: %s", body)
		}
		for name, vs := range resp.Header {
			for _, v := range vs {
				if strings.Contains(v, k) {
					t.Fatalf("the response header %s carries a key", name)
				}
			}
		}
	}
}

const (
	anthropicBody       = `{"model":"claude-haiku-4-5","max_tokens":64,"messages":[{"role":"user","content":"hi"}]}`
	anthropicStreamBody = `{"model":"claude-sonnet-4-5","max_tokens":64,"stream":true,"messages":[{"role":"user","content":"hi"}]}`
	openAIBody          = `{"model":"gpt-4o-mini","messages":[{"role":"user","content":"hi"}]}`
	openAIStreamBody    = `{"model":"gpt-4o","stream":true,"messages":[{"role":"user","content":"hi"}]}`
)
