package autoapprove

import (
	"context"
	"errors"
	"fmt"
	"io"
	"net"
	"net/http"
	"strings"
	"time"

	"github.com/anthropics/anthropic-sdk-go"
	aoption "github.com/anthropics/anthropic-sdk-go/option"
	"github.com/openai/openai-go/v3"
	ooption "github.com/openai/openai-go/v3/option"

	"ironcurtain.dev/gateway/internal/llmprovider"
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

// errResponseTooLarge: the response body passed maxResponseBytes.
var errResponseTooLarge = fmt.Errorf("the model's response exceeds %d bytes", maxResponseBytes)

// client calls one provider's API directly (as the relay does: plain HTTP,
// the relay's base URL and key), never through a proxy from the
// environment, with the provider's official SDK. The SDK services are built
// bare (not with NewClient, which reads ANTHROPIC_*/OPENAI_* variables), and
// never retry: one review is one model call, as the budget counts it.
type client struct {
	up        llmprovider.Upstream
	model     string
	maxTokens int
	hc        *http.Client
	messages  anthropic.MessageService
	chat      openai.ChatCompletionService
}

func newClient(up llmprovider.Upstream, model string, maxTokens int) *client {
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
	c := &client{up: up, model: model, maxTokens: maxTokens, hc: &http.Client{
		Transport: limitedBody{base: tr, max: maxResponseBytes},
		// A model API does not redirect; following one could carry the key
		// elsewhere.
		CheckRedirect: func(*http.Request, []*http.Request) error { return http.ErrUseLastResponse },
	}}
	base := up.URL("") // the API root with a trailing slash: the SDKs append their paths
	switch up.Provider {
	case llmprovider.Anthropic:
		opts := []aoption.RequestOption{aoption.WithBaseURL(base), aoption.WithHTTPClient(c.hc), aoption.WithMaxRetries(0)}
		if !up.Keyless() {
			opts = append(opts, aoption.WithAPIKey(up.Key()))
		}
		c.messages = anthropic.NewMessageService(opts...)
	case llmprovider.OpenAI:
		opts := []ooption.RequestOption{ooption.WithBaseURL(base), ooption.WithHTTPClient(c.hc), ooption.WithMaxRetries(0)}
		if !up.Keyless() {
			opts = append(opts, ooption.WithAPIKey(up.Key()))
		}
		c.chat = openai.NewChatCompletionService(opts...)
	}
	return c
}

func (c *client) close() { c.hc.CloseIdleConnections() }

// complete sends the prompt and returns the answer text. ctx bounds it.
func (c *client) complete(ctx context.Context, p prompt) (reply, error) {
	switch c.up.Provider {
	case llmprovider.Anthropic:
		return c.anthropic(ctx, p)
	case llmprovider.OpenAI:
		return c.openai(ctx, p)
	}
	return reply{}, fmt.Errorf("provider %q is not supported", c.up.Provider)
}

func (c *client) anthropic(ctx context.Context, p prompt) (reply, error) {
	msg, err := c.messages.New(ctx, anthropic.MessageNewParams{
		Model:     anthropic.Model(c.model),
		MaxTokens: int64(c.maxTokens),
		System:    []anthropic.TextBlockParam{{Text: p.System}},
		Messages:  []anthropic.MessageParam{anthropic.NewUserMessage(anthropic.NewTextBlock(p.User))},
	})
	if err != nil {
		return reply{}, c.callError(err)
	}
	var r reply
	if msg.JSON.Usage.Valid() {
		r.InputTokens, r.OutputTokens, r.HaveUsage = msg.Usage.InputTokens, msg.Usage.OutputTokens, true
	}
	if msg.StopReason != anthropic.StopReasonEndTurn {
		return r, fmt.Errorf("%w (stop_reason %q)", errIncomplete, short(string(msg.StopReason)))
	}
	var text strings.Builder
	for _, b := range msg.Content {
		if b.Type != "text" {
			return r, fmt.Errorf("%w (a %q content block)", errIncomplete, short(b.Type))
		}
		text.WriteString(b.Text)
	}
	r.Text = text.String()
	return r, nil
}

func (c *client) openai(ctx context.Context, p prompt) (reply, error) {
	resp, err := c.chat.New(ctx, openai.ChatCompletionNewParams{
		Model:               c.model,
		MaxCompletionTokens: openai.Int(int64(c.maxTokens)),
		Messages:            []openai.ChatCompletionMessageParamUnion{openai.SystemMessage(p.System), openai.UserMessage(p.User)},
	})
	if err != nil {
		return reply{}, c.callError(err)
	}
	var r reply
	if resp.JSON.Usage.Valid() {
		r.InputTokens, r.OutputTokens, r.HaveUsage = resp.Usage.PromptTokens, resp.Usage.CompletionTokens, true
	}
	if len(resp.Choices) != 1 {
		return r, fmt.Errorf("%w (%d choices)", errIncomplete, len(resp.Choices))
	}
	ch := resp.Choices[0]
	switch {
	case ch.FinishReason != "stop":
		return r, fmt.Errorf("%w (finish_reason %q)", errIncomplete, short(ch.FinishReason))
	case ch.Message.Refusal != "", len(ch.Message.ToolCalls) > 0, !ch.Message.JSON.Content.Valid():
		return r, fmt.Errorf("%w (a refusal, tool call or no content)", errIncomplete)
	}
	r.Text = ch.Message.Content
	return r, nil
}

// apiError is a non-2xx answer of the model API.
type apiError struct {
	Status int
	Body   string // first bytes, key masked
}

func (e *apiError) Error() string { return fmt.Sprintf("model API answered %d: %s", e.Status, e.Body) }

// callError turns an SDK error into one that holds no key: an answer of
// the API becomes an apiError with the start of its body; anything else
// keeps its text, masked (it is not wrapped, so the SDK's error, which
// holds the request, does not travel on).
func (c *client) callError(err error) error {
	var ae *anthropic.Error
	if errors.As(err, &ae) {
		return &apiError{Status: ae.StatusCode, Body: short(c.up.Redact(ae.RawJSON()))}
	}
	var oe *openai.Error
	if errors.As(err, &oe) {
		return &apiError{Status: oe.StatusCode, Body: short(c.up.Redact(oe.RawJSON()))}
	}
	if errors.Is(err, errResponseTooLarge) {
		return errResponseTooLarge
	}
	return fmt.Errorf("calling the model API: %s", c.up.Redact(err.Error()))
}

// limitedBody fails reading a response body past max bytes.
type limitedBody struct {
	base http.RoundTripper
	max  int64
}

func (l limitedBody) RoundTrip(req *http.Request) (*http.Response, error) {
	resp, err := l.base.RoundTrip(req)
	if err != nil {
		return nil, err
	}
	resp.Body = &capReader{rc: resp.Body, left: l.max}
	return resp, nil
}

// capReader reads rc and fails with errResponseTooLarge once more than
// left bytes came.
type capReader struct {
	rc   io.ReadCloser
	left int64
}

func (r *capReader) Read(p []byte) (int, error) {
	if r.left < 0 {
		return 0, errResponseTooLarge
	}
	if int64(len(p)) > r.left+1 {
		p = p[:r.left+1]
	}
	n, err := r.rc.Read(p)
	r.left -= int64(n)
	if r.left < 0 {
		return 0, errResponseTooLarge
	}
	return n, err
}

func (r *capReader) Close() error { return r.rc.Close() }

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
