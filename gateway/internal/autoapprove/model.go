package autoapprove

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net"
	"net/http"
	"strings"
	"time"

	"ironcurtain.dev/gateway/internal/doors/llmrelay"
)

// maxResponseBytes bounds a model API response body.
const maxResponseBytes = 1 << 20

// reply is a model call's answer text and usage.
type reply struct {
	Text         string
	InputTokens  int64
	OutputTokens int64
	HaveUsage    bool
}

// errIncomplete: the model stopped for another reason than finishing its
// answer (token limit, tool use, refusal, content filter).
var errIncomplete = errors.New("the model did not finish its answer")

// client calls one provider's API directly (as the relay does: plain HTTP,
// the relay's base URL and key), never through a proxy from the environment.
type client struct {
	up        llmrelay.Upstream
	model     string
	maxTokens int
	hc        *http.Client
}

func newClient(up llmrelay.Upstream, model string, maxTokens int) *client {
	dialer := &net.Dialer{Timeout: 10 * time.Second, KeepAlive: 30 * time.Second}
	tr := &http.Transport{
		Proxy:                  nil,
		DialContext:            dialer.DialContext,
		ForceAttemptHTTP2:      true,
		MaxIdleConns:           8,
		IdleConnTimeout:        90 * time.Second,
		TLSHandshakeTimeout:    10 * time.Second,
		MaxResponseHeaderBytes: 64 << 10,
	}
	return &client{up: up, model: model, maxTokens: maxTokens, hc: &http.Client{
		Transport: tr,
		// A model API does not redirect; following one could carry the key
		// elsewhere.
		CheckRedirect: func(*http.Request, []*http.Request) error { return http.ErrUseLastResponse },
	}}
}

func (c *client) close() { c.hc.CloseIdleConnections() }

// complete sends the prompt and returns the answer text. ctx bounds it.
func (c *client) complete(ctx context.Context, p prompt) (reply, error) {
	switch c.up.Provider {
	case llmrelay.Anthropic:
		return c.anthropic(ctx, p)
	case llmrelay.OpenAI:
		return c.openai(ctx, p)
	}
	return reply{}, fmt.Errorf("provider %q is not supported", c.up.Provider)
}

func (c *client) anthropic(ctx context.Context, p prompt) (reply, error) {
	body := map[string]any{
		"model":      c.model,
		"max_tokens": c.maxTokens,
		"system":     p.System,
		"messages":   []map[string]any{{"role": "user", "content": p.User}},
	}
	var resp struct {
		Content []struct {
			Type string `json:"type"`
			Text string `json:"text"`
		} `json:"content"`
		StopReason string `json:"stop_reason"`
		Usage      *struct {
			InputTokens  int64 `json:"input_tokens"`
			OutputTokens int64 `json:"output_tokens"`
		} `json:"usage"`
	}
	if err := c.post(ctx, "v1/messages", body, &resp); err != nil {
		return reply{}, err
	}
	var r reply
	if resp.Usage != nil {
		r.InputTokens, r.OutputTokens, r.HaveUsage = resp.Usage.InputTokens, resp.Usage.OutputTokens, true
	}
	if resp.StopReason != "end_turn" {
		return r, fmt.Errorf("%w (stop_reason %q)", errIncomplete, short(resp.StopReason))
	}
	var text strings.Builder
	for _, b := range resp.Content {
		if b.Type != "text" {
			return r, fmt.Errorf("%w (a %q content block)", errIncomplete, short(b.Type))
		}
		text.WriteString(b.Text)
	}
	r.Text = text.String()
	return r, nil
}

func (c *client) openai(ctx context.Context, p prompt) (reply, error) {
	body := map[string]any{
		"model":                 c.model,
		"max_completion_tokens": c.maxTokens,
		"messages": []map[string]any{
			{"role": "system", "content": p.System},
			{"role": "user", "content": p.User},
		},
	}
	var resp struct {
		Choices []struct {
			FinishReason string `json:"finish_reason"`
			Message      struct {
				Content   *string           `json:"content"`
				Refusal   *string           `json:"refusal"`
				ToolCalls []json.RawMessage `json:"tool_calls"`
			} `json:"message"`
		} `json:"choices"`
		Usage *struct {
			PromptTokens     int64 `json:"prompt_tokens"`
			CompletionTokens int64 `json:"completion_tokens"`
		} `json:"usage"`
	}
	if err := c.post(ctx, "chat/completions", body, &resp); err != nil {
		return reply{}, err
	}
	var r reply
	if resp.Usage != nil {
		r.InputTokens, r.OutputTokens, r.HaveUsage = resp.Usage.PromptTokens, resp.Usage.CompletionTokens, true
	}
	if len(resp.Choices) != 1 {
		return r, fmt.Errorf("%w (%d choices)", errIncomplete, len(resp.Choices))
	}
	ch := resp.Choices[0]
	switch {
	case ch.FinishReason != "stop":
		return r, fmt.Errorf("%w (finish_reason %q)", errIncomplete, short(ch.FinishReason))
	case ch.Message.Refusal != nil && *ch.Message.Refusal != "", len(ch.Message.ToolCalls) > 0, ch.Message.Content == nil:
		return r, fmt.Errorf("%w (a refusal, tool call or no content)", errIncomplete)
	}
	r.Text = *ch.Message.Content
	return r, nil
}

// apiError is a non-200 answer of the model API.
type apiError struct {
	Status int
	Body   string // first bytes, key masked
}

func (e *apiError) Error() string { return fmt.Sprintf("model API answered %d: %s", e.Status, e.Body) }

func (c *client) post(ctx context.Context, path string, body any, out any) error {
	b, err := json.Marshal(body)
	if err != nil {
		return fmt.Errorf("encoding the model request: %w", err)
	}
	req, err := http.NewRequestWithContext(ctx, http.MethodPost, c.up.URL(path), bytes.NewReader(b))
	if err != nil {
		return fmt.Errorf("building the model request: %w", err)
	}
	req.Header.Set("Content-Type", "application/json")
	req.Header.Set("Accept", "application/json")
	c.up.SetAuth(req.Header)
	resp, err := c.hc.Do(req)
	if err != nil {
		return fmt.Errorf("calling the model API: %s", c.up.Redact(err.Error()))
	}
	defer resp.Body.Close()
	data, err := io.ReadAll(io.LimitReader(resp.Body, maxResponseBytes+1))
	if err != nil {
		return fmt.Errorf("reading the model's response: %s", c.up.Redact(err.Error()))
	}
	if resp.StatusCode != http.StatusOK {
		return &apiError{Status: resp.StatusCode, Body: short(c.up.Redact(string(data)))}
	}
	if len(data) > maxResponseBytes {
		return fmt.Errorf("the model's response exceeds %d bytes", maxResponseBytes)
	}
	if err := json.Unmarshal(data, out); err != nil {
		return fmt.Errorf("decoding the model's response: %w", err)
	}
	return nil
}

// short cuts text from a model API to a loggable length.
func short(s string) string {
	const n = 200
	s = strings.ToValidUTF8(s, "?")
	if len(s) <= n {
		return s
	}
	cut := n
	for cut > 0 && s[cut]&0xC0 == 0x80 {
		cut--
	}
	return s[:cut] + "…"
}
