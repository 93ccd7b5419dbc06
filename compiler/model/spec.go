// Package model connects the compiler to language models: the Anthropic and
// OpenAI-compatible providers (through their official SDKs), a concurrency
// limit shared by every step, and the JSON-lines interaction log.
//
// A model is named like the agent names it: "provider:model", for example
// "anthropic:claude-sonnet-4-6" or "openai:gpt-4.1". A bare name means
// Anthropic. Keys come only from the environment (ANTHROPIC_API_KEY,
// OPENAI_API_KEY), never from flags; base URLs from a flag or from
// ANTHROPIC_BASE_URL / OPENAI_BASE_URL, so an OpenAI-compatible server
// (Ollama, vLLM) is one URL away.
package model

import (
	"errors"
	"fmt"
	"net/url"
	"strings"
	"time"

	"ironcurtain.dev/compiler"
)

// Provider names a wire protocol.
type Provider string

const (
	// Anthropic is the Anthropic Messages API.
	Anthropic Provider = "anthropic"
	// OpenAI is the OpenAI Chat Completions API and every server compatible
	// with it.
	OpenAI Provider = "openai"
)

// DefaultSpec is the model used when none is configured.
const DefaultSpec = "anthropic:claude-sonnet-4-6"

// DefaultMaxTokens bounds a reply when the prompt does not say otherwise.
const DefaultMaxTokens = 16384

// DefaultTimeout bounds one model request, retries included.
const DefaultTimeout = 10 * time.Minute

// Spec is a parsed "provider:model" name.
type Spec struct {
	Provider Provider
	Name     string
}

// String returns the canonical "provider:model" form.
func (s Spec) String() string { return string(s.Provider) + ":" + s.Name }

// ParseSpec parses "provider:model". A name without a provider prefix is an
// Anthropic model.
func ParseSpec(v string) (Spec, error) {
	v = strings.TrimSpace(v)
	if v == "" {
		return Spec{}, errors.New("model name is empty (want provider:model, e.g. " + DefaultSpec + ")")
	}
	p, name, found := strings.Cut(v, ":")
	if !found {
		return Spec{Provider: Anthropic, Name: v}, nil
	}
	if name == "" {
		return Spec{}, fmt.Errorf("model %q has no model name after the provider", v)
	}
	switch Provider(strings.ToLower(p)) {
	case Anthropic:
		return Spec{Provider: Anthropic, Name: name}, nil
	case OpenAI:
		return Spec{Provider: OpenAI, Name: name}, nil
	}
	return Spec{}, fmt.Errorf("model %q: unknown provider %q (want anthropic or openai)", v, p)
}

// Config is everything needed to open a provider.
type Config struct {
	Spec Spec
	// BaseURL overrides the provider's endpoint; empty means the SDK default.
	BaseURL string
	// APIKey is the provider key. It is never logged.
	APIKey string
	// MaxRetries is how often the SDK retries transient failures (429, 5xx,
	// connection errors). Negative means the SDK default.
	MaxRetries int
	// Timeout bounds one request including retries; zero means DefaultTimeout.
	Timeout time.Duration
}

// keyVar and baseURLVar name the environment variables of each provider.
var (
	keyVar     = map[Provider]string{Anthropic: "ANTHROPIC_API_KEY", OpenAI: "OPENAI_API_KEY"}
	baseURLVar = map[Provider]string{Anthropic: "ANTHROPIC_BASE_URL", OpenAI: "OPENAI_BASE_URL"}
)

// ErrMissingKey is returned by ConfigFromEnv when the provider's key variable
// is unset; the message names the variable.
var ErrMissingKey = errors.New("missing API key")

// ConfigFromEnv builds a Config for spec: the key from the provider's
// environment variable, the base URL from baseURL or else the provider's
// base-URL variable.
func ConfigFromEnv(spec Spec, baseURL string, getenv func(string) string) (Config, error) {
	cfg := Config{Spec: spec, BaseURL: baseURL, MaxRetries: -1}
	if cfg.BaseURL == "" {
		cfg.BaseURL = getenv(baseURLVar[spec.Provider])
	}
	if cfg.BaseURL != "" {
		u, err := url.Parse(cfg.BaseURL)
		if err != nil || (u.Scheme != "http" && u.Scheme != "https") || u.Host == "" {
			return Config{}, fmt.Errorf("base URL %q for %s must be an absolute http(s) URL", cfg.BaseURL, spec.Provider)
		}
	}
	cfg.APIKey = getenv(keyVar[spec.Provider])
	if cfg.APIKey == "" {
		return Config{}, fmt.Errorf("%w: set %s for model %s", ErrMissingKey, keyVar[spec.Provider], spec)
	}
	return cfg, nil
}

// New opens the provider of cfg.
func New(cfg Config) (compiler.Model, error) {
	switch cfg.Spec.Provider {
	case Anthropic:
		return newAnthropic(cfg), nil
	case OpenAI:
		return newOpenAI(cfg), nil
	}
	return nil, fmt.Errorf("opening model %s: unknown provider", cfg.Spec)
}
