// Package fakemodel is an HTTP server that speaks the Anthropic Messages and
// OpenAI Chat Completions wire formats and answers from recorded replies, so
// every model-backed step of the compiler is tested through the real
// provider SDKs without a key or a network.
package fakemodel

import (
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"net/http/httptest"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	"ironcurtain.dev/compiler"
)

// RejectedKey is the API key the server answers with HTTP 401.
const RejectedKey = "rejected-key"

// Request is what the server received, decoded from either wire format.
type Request struct {
	Provider string // "anthropic" or "openai"
	Model    string
	System   string
	Messages []compiler.Message
}

// Last returns the content of the last message.
func (r Request) Last() string {
	if len(r.Messages) == 0 {
		return ""
	}
	return r.Messages[len(r.Messages)-1].Content
}

// Answer is one reply: Text with HTTP 200, or an error Status.
type Answer struct {
	Text   string `json:"text,omitempty"`
	Status int    `json:"status,omitempty"`
}

// Responder chooses the answer to a request.
type Responder func(Request) Answer

// Server is a running fake. Close it when done.
type Server struct {
	srv     *httptest.Server
	respond Responder
	latency time.Duration
	calls   atomic.Int64

	inFlight    atomic.Int64 // requests waiting out the latency now
	maxInFlight atomic.Int64 // the most that ever waited at once

	mu   sync.Mutex
	seen []Request
}

// Option configures a Server.
type Option func(*Server)

// WithLatency delays every answer by d (the simulated model latency).
func WithLatency(d time.Duration) Option { return func(s *Server) { s.latency = d } }

// New starts a server answering with respond.
func New(respond Responder, opts ...Option) *Server {
	s := &Server{respond: respond}
	for _, o := range opts {
		o(s)
	}
	mux := http.NewServeMux()
	mux.HandleFunc("POST /v1/messages", s.anthropic)
	mux.HandleFunc("POST /v1/chat/completions", s.openai)
	s.srv = httptest.NewServer(mux)
	return s
}

// Close stops the server.
func (s *Server) Close() { s.srv.Close() }

// AnthropicURL is the base URL for the Anthropic SDK.
func (s *Server) AnthropicURL() string { return s.srv.URL }

// OpenAIURL is the base URL for the OpenAI SDK.
func (s *Server) OpenAIURL() string { return s.srv.URL + "/v1" }

// Calls is the number of requests answered so far.
func (s *Server) Calls() int { return int(s.calls.Load()) }

// MaxInFlight is the largest number of requests that were waiting out the
// simulated latency at the same time: how much concurrency the client used.
func (s *Server) MaxInFlight() int { return int(s.maxInFlight.Load()) }

// Requests returns a copy of every request received, in arrival order.
func (s *Server) Requests() []Request {
	s.mu.Lock()
	defer s.mu.Unlock()
	return append([]Request(nil), s.seen...)
}

func (s *Server) record(r Request) {
	s.calls.Add(1)
	s.mu.Lock()
	s.seen = append(s.seen, r)
	s.mu.Unlock()
}

func (s *Server) wait(r *http.Request) bool {
	if s.latency <= 0 {
		return true
	}
	n := s.inFlight.Add(1)
	defer s.inFlight.Add(-1)
	for {
		m := s.maxInFlight.Load()
		if n <= m || s.maxInFlight.CompareAndSwap(m, n) {
			break
		}
	}
	t := time.NewTimer(s.latency)
	defer t.Stop()
	select {
	case <-t.C:
		return true
	case <-r.Context().Done():
		return false
	}
}

// text is a string or an array of {type:"text", text} blocks in both formats.
type text string

func (t *text) UnmarshalJSON(b []byte) error {
	var s string
	if err := json.Unmarshal(b, &s); err == nil {
		*t = text(s)
		return nil
	}
	var blocks []struct {
		Type string `json:"type"`
		Text string `json:"text"`
	}
	if err := json.Unmarshal(b, &blocks); err != nil {
		return fmt.Errorf("decoding content: %w", err)
	}
	var sb strings.Builder
	for _, bl := range blocks {
		sb.WriteString(bl.Text)
	}
	*t = text(sb.String())
	return nil
}

func (s *Server) anthropic(w http.ResponseWriter, r *http.Request) {
	if r.Header.Get("X-Api-Key") == RejectedKey {
		writeError(w, http.StatusUnauthorized, `{"type":"error","error":{"type":"authentication_error","message":"invalid x-api-key"}}`)
		return
	}
	var body struct {
		Model    string `json:"model"`
		System   text   `json:"system"`
		Messages []struct {
			Role    string `json:"role"`
			Content text   `json:"content"`
		} `json:"messages"`
	}
	if err := decode(r.Body, &body); err != nil {
		writeError(w, http.StatusBadRequest, `{"type":"error","error":{"type":"invalid_request_error","message":"bad json"}}`)
		return
	}
	req := Request{Provider: "anthropic", Model: body.Model, System: string(body.System)}
	for _, m := range body.Messages {
		req.Messages = append(req.Messages, compiler.Message{Role: compiler.Role(m.Role), Content: string(m.Content)})
	}
	s.record(req)
	ans := s.respond(req)
	if !s.wait(r) {
		return
	}
	if ans.Status != 0 && ans.Status != http.StatusOK {
		writeError(w, ans.Status, `{"type":"error","error":{"type":"api_error","message":"recorded failure"}}`)
		return
	}
	writeJSON(w, map[string]any{
		"id": "msg_fake", "type": "message", "role": "assistant", "model": body.Model,
		"content":     []map[string]any{{"type": "text", "text": ans.Text}},
		"stop_reason": "end_turn",
		"usage":       map[string]any{"input_tokens": len(req.System) / 4, "output_tokens": len(ans.Text) / 4},
	})
}

func (s *Server) openai(w http.ResponseWriter, r *http.Request) {
	if r.Header.Get("Authorization") == "Bearer "+RejectedKey {
		writeError(w, http.StatusUnauthorized, `{"error":{"message":"Incorrect API key provided","type":"invalid_request_error","code":"invalid_api_key"}}`)
		return
	}
	var body struct {
		Model    string `json:"model"`
		Messages []struct {
			Role    string `json:"role"`
			Content text   `json:"content"`
		} `json:"messages"`
	}
	if err := decode(r.Body, &body); err != nil {
		writeError(w, http.StatusBadRequest, `{"error":{"message":"bad json","type":"invalid_request_error"}}`)
		return
	}
	req := Request{Provider: "openai", Model: body.Model}
	for _, m := range body.Messages {
		if m.Role == "system" || m.Role == "developer" {
			req.System += string(m.Content)
			continue
		}
		req.Messages = append(req.Messages, compiler.Message{Role: compiler.Role(m.Role), Content: string(m.Content)})
	}
	s.record(req)
	ans := s.respond(req)
	if !s.wait(r) {
		return
	}
	if ans.Status != 0 && ans.Status != http.StatusOK {
		writeError(w, ans.Status, `{"error":{"message":"recorded failure","type":"server_error"}}`)
		return
	}
	writeJSON(w, map[string]any{
		"id": "chatcmpl-fake", "object": "chat.completion", "created": 0, "model": body.Model,
		"choices": []map[string]any{{
			"index": 0, "finish_reason": "stop",
			"message": map[string]any{"role": "assistant", "content": ans.Text},
		}},
		"usage": map[string]any{"prompt_tokens": len(req.System) / 4, "completion_tokens": len(ans.Text) / 4, "total_tokens": 0},
	})
}

func decode(r io.Reader, v any) error {
	b, err := io.ReadAll(io.LimitReader(r, 64<<20))
	if err != nil {
		return err
	}
	return json.Unmarshal(b, v)
}

func writeJSON(w http.ResponseWriter, v any) {
	w.Header().Set("Content-Type", "application/json")
	_ = json.NewEncoder(w).Encode(v)
}

func writeError(w http.ResponseWriter, status int, body string) {
	w.Header().Set("Content-Type", "application/json")
	w.WriteHeader(status)
	_, _ = io.WriteString(w, body)
}
