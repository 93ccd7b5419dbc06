// Package model is the agent's view of a language model: a provider-neutral
// conversation (user text, assistant text, execute_code calls and their
// results), one Complete call per step, and token usage as the provider
// reports it. Implementations: Anthropic and OpenAI-compatible (official
// SDKs pointed at the gateway's relay, authenticated with the agent token)
// and Replay (a scripted transcript, for tests and the offline demo).
//
// The SDK clients are built without their environment defaults: the agent
// never picks up ANTHROPIC_API_KEY, OPENAI_API_KEY, profiles or base URLs
// from its environment, and never uses a proxy to reach the relay.
package model

import (
	"context"
	"errors"
	"fmt"
	"net/http"
	"strings"
	"time"
)

// ToolName is the one tool the model is given.
const ToolName = "execute_code"

// ToolDescription describes execute_code to the model.
const ToolDescription = "Run TypeScript in the IronCurtain sandbox. The code is the body of an async function: " +
	"call the synchronous tool functions declared in the system prompt, use console.log for notes and " +
	"`return` a value to hand it back. The result (output, returned value, or the error with its line) comes back as text."

// toolSchema is the JSON Schema of execute_code's input.
var toolSchema = map[string]any{
	"type": "object",
	"properties": map[string]any{
		"code": map[string]any{"type": "string", "description": "TypeScript source to run."},
	},
	"required": []string{"code"},
}

// Role of a message.
type Role string

// Roles.
const (
	User      Role = "user"
	Assistant Role = "assistant"
)

// ToolCall is one execute_code call the model made.
type ToolCall struct {
	ID   string
	Code string
	// Invalid is set when the call's input could not be read (no code
	// string); the runner answers it with an error result.
	Invalid string
}

// ToolResult answers a ToolCall.
type ToolResult struct {
	CallID  string
	Content string
	IsError bool
}

// Message is one turn of the conversation. A user message carries Text
// and/or Results; an assistant message carries Text and/or Calls.
type Message struct {
	Role    Role
	Text    string
	Calls   []ToolCall
	Results []ToolResult
}

// Request is one step's input.
type Request struct {
	System    string
	Messages  []Message
	MaxTokens int64 // output tokens for this reply
}

// Usage is what the provider reported for one reply.
type Usage struct {
	InputTokens  int64
	OutputTokens int64
}

// Total returns input plus output tokens.
func (u Usage) Total() int64 { return u.InputTokens + u.OutputTokens }

// Response is the model's reply.
type Response struct {
	Text       string
	Calls      []ToolCall
	Usage      Usage
	StopReason string
}

// Model produces the next reply of a conversation.
type Model interface {
	Complete(ctx context.Context, req Request) (Response, error)
	// Name identifies the model ("anthropic:claude-…", "replay:demo.yaml").
	Name() string
}

// Config holds what the SDK-backed models need.
type Config struct {
	BaseURL    string        // the gateway relay, e.g. http://gateway:8080/llm
	Token      string        // the agent token, sent as the API key
	HTTPClient *http.Client  // default: a direct (no proxy) client
	Timeout    time.Duration // per request; default 5 minutes
	MaxRetries int           // default 2
}

// ErrUsage marks a model id or configuration the user got wrong.
var ErrUsage = errors.New("invalid model configuration")

// New returns the model named by id: "anthropic:<model>", "openai:<model>"
// or "replay:<transcript path>". There is no fallback: any other id is an
// error.
func New(id string, cfg Config) (Model, error) {
	provider, name, ok := strings.Cut(id, ":")
	if !ok || strings.TrimSpace(name) == "" {
		return nil, fmt.Errorf("model %q: %w: want provider:model (anthropic:…, openai:…) or replay:path", id, ErrUsage)
	}
	switch provider {
	case "anthropic", "openai":
		if strings.TrimSpace(cfg.BaseURL) == "" {
			return nil, fmt.Errorf("model %q: %w: the model base URL (IRONCURTAIN_MODEL_BASE_URL) is empty", id, ErrUsage)
		}
		if cfg.Token == "" {
			return nil, fmt.Errorf("model %q: %w: the agent token (IRONCURTAIN_AGENT_TOKEN) is empty", id, ErrUsage)
		}
		if provider == "anthropic" {
			return newAnthropic(name, cfg), nil
		}
		return newOpenAI(name, cfg), nil
	case "replay":
		return LoadReplay(name)
	default:
		return nil, fmt.Errorf("model %q: %w: unknown provider %q (anthropic, openai or replay)", id, ErrUsage, provider)
	}
}

func (c Config) httpClient() *http.Client {
	if c.HTTPClient != nil {
		return c.HTTPClient
	}
	t := http.DefaultTransport.(*http.Transport).Clone()
	t.Proxy = nil // the relay is reached directly; the proxy URL carries the token
	return &http.Client{Transport: t}
}

func (c Config) timeout() time.Duration {
	if c.Timeout > 0 {
		return c.Timeout
	}
	return 5 * time.Minute
}

func (c Config) retries() int {
	if c.MaxRetries > 0 {
		return c.MaxRetries
	}
	return 2
}

// joinURL appends a path segment to a base URL without doubling slashes.
func joinURL(base, seg string) string {
	return strings.TrimRight(base, "/") + "/" + seg
}
