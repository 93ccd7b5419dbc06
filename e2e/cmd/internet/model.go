package main

import (
	"bytes"
	"crypto/subtle"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net/http"
	"os"
	"strings"
)

// maxModelBody bounds a model request body.
const maxModelBody = 8 << 20

// step is one scripted model turn: code to run with execute_code, or the
// final answer. In Final, {{last_result}} is replaced by the text of the
// last tool result the agent sent back.
type step struct {
	Say   string `json:"say,omitempty"`
	Code  string `json:"code,omitempty"`
	Final string `json:"final,omitempty"`
}

// script is the model-script file.
type script struct {
	Steps []step `json:"steps"`
}

func loadScript(path string) ([]step, error) {
	b, err := os.ReadFile(path)
	if err != nil {
		return nil, fmt.Errorf("loading the model script: %w", err)
	}
	return parseScript(b)
}

func parseScript(b []byte) ([]step, error) {
	dec := json.NewDecoder(bytes.NewReader(b))
	dec.DisallowUnknownFields()
	var s script
	if err := dec.Decode(&s); err != nil {
		return nil, fmt.Errorf("parsing the model script: %w", err)
	}
	if len(s.Steps) == 0 {
		return nil, errors.New("parsing the model script: no steps")
	}
	for i, st := range s.Steps {
		if (st.Code == "") == (st.Final == "") {
			return nil, fmt.Errorf("parsing the model script: steps[%d]: exactly one of code and final", i)
		}
	}
	return s.Steps, nil
}

// model is the fake Anthropic Messages API.
type model struct {
	key       string   // the key the relay must inject
	forbidden []string // values that must never arrive (agent tokens)
	steps     []step
}

// messagesRequest is the part of a Messages API request the fake reads.
type messagesRequest struct {
	Model    string `json:"model"`
	Messages []struct {
		Role    string          `json:"role"`
		Content json.RawMessage `json:"content"`
	} `json:"messages"`
}

// serve answers one request and returns a note for the log (never a
// credential).
func (m *model) serve(w http.ResponseWriter, r *http.Request) string {
	if r.Method != http.MethodPost || r.URL.Path != "/v1/messages" {
		apiError(w, http.StatusNotFound, "not_found_error", "only POST /v1/messages exists here")
		return "not found"
	}
	body, err := io.ReadAll(io.LimitReader(r.Body, maxModelBody+1))
	if err != nil || len(body) > maxModelBody {
		apiError(w, http.StatusBadRequest, "invalid_request_error", "unreadable or oversized body")
		return "bad body"
	}
	if what := m.leak(r.Header, body); what != "" {
		apiError(w, http.StatusBadRequest, "invalid_request_error", "e2e: an agent credential reached the model provider ("+what+")")
		return "leak: " + what
	}
	switch got := r.Header.Get("X-Api-Key"); {
	case got == "":
		apiError(w, http.StatusUnauthorized, "authentication_error", "x-api-key header is required")
		return "key missing"
	case subtle.ConstantTimeCompare([]byte(got), []byte(m.key)) != 1:
		apiError(w, http.StatusUnauthorized, "authentication_error", "invalid x-api-key")
		return "key wrong"
	}
	if r.Header.Get("Anthropic-Version") == "" {
		apiError(w, http.StatusBadRequest, "invalid_request_error", "anthropic-version header is required")
		return "no version"
	}
	reply, err := m.reply(body)
	if err != nil {
		apiError(w, http.StatusBadRequest, "invalid_request_error", err.Error())
		return "bad request: " + err.Error()
	}
	writeJSON(w, http.StatusOK, reply)
	return "key ok"
}

// leak names where a forbidden value appears in the request, or "".
func (m *model) leak(h http.Header, body []byte) string {
	for _, f := range m.forbidden {
		for name, vs := range h {
			for _, v := range vs {
				if strings.Contains(v, f) {
					return "header " + name
				}
			}
		}
		if bytes.Contains(body, []byte(f)) {
			return "body"
		}
	}
	return ""
}

// reply plays the step whose index is the number of assistant turns so far.
func (m *model) reply(body []byte) (map[string]any, error) {
	var req messagesRequest
	if err := json.Unmarshal(body, &req); err != nil {
		return nil, fmt.Errorf("body is not a Messages API request: %v", err)
	}
	if len(req.Messages) == 0 {
		return nil, errors.New("messages: empty")
	}
	turn := 0
	for _, msg := range req.Messages {
		if msg.Role == "assistant" {
			turn++
		}
	}
	if turn >= len(m.steps) {
		return nil, fmt.Errorf("the e2e model script has %d steps and the conversation asks for step %d", len(m.steps), turn+1)
	}
	st := m.steps[turn]
	var content []map[string]any
	stop := "end_turn"
	if st.Code != "" {
		say := st.Say
		if say == "" {
			say = "Running code."
		}
		content = append(content,
			map[string]any{"type": "text", "text": say},
			map[string]any{"type": "tool_use", "id": fmt.Sprintf("toolu_e2e_%02d", turn), "name": "execute_code", "input": map[string]any{"code": st.Code}})
		stop = "tool_use"
	} else {
		last := lastToolResult(req.Messages[len(req.Messages)-1].Content)
		content = append(content, map[string]any{"type": "text", "text": strings.ReplaceAll(st.Final, "{{last_result}}", last)})
	}
	return map[string]any{
		"id": fmt.Sprintf("msg_e2e_%02d", turn), "type": "message", "role": "assistant",
		"model": req.Model, "content": content, "stop_reason": stop, "stop_sequence": nil,
		"usage": map[string]any{"input_tokens": 100 + len(body)/64, "output_tokens": 20},
	}, nil
}

// lastToolResult returns the text of the tool_result blocks of a user
// message's content (string content is returned as is).
func lastToolResult(raw json.RawMessage) string {
	var s string
	if json.Unmarshal(raw, &s) == nil {
		return s
	}
	var blocks []struct {
		Type    string          `json:"type"`
		Text    string          `json:"text"`
		Content json.RawMessage `json:"content"`
	}
	if json.Unmarshal(raw, &blocks) != nil {
		return ""
	}
	var out []string
	for _, b := range blocks {
		if b.Type == "tool_result" {
			out = append(out, lastToolResult(b.Content))
		} else if b.Type == "text" {
			out = append(out, b.Text)
		}
	}
	return strings.Join(out, "\n")
}

func apiError(w http.ResponseWriter, status int, typ, msg string) {
	writeJSON(w, status, map[string]any{"type": "error", "error": map[string]any{"type": typ, "message": msg}})
}
