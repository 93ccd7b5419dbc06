package llmprovider

import (
	"fmt"
	"net/http"
	"net/url"
	"strings"

	"ironcurtain.dev/gateway/config"
)

// Provider names: the first path segment after the relay's prefix, and the
// value of audit.LLMCall.Provider.
const (
	Anthropic = "anthropic"
	OpenAI    = "openai"
)

// Defaults of a provider's settings.
const (
	DefaultAnthropicBaseURL = "https://api.anthropic.com"
	DefaultOpenAIBaseURL    = "https://api.openai.com/v1"
	DefaultAnthropicKeyEnv  = "ANTHROPIC_API_KEY"
	DefaultOpenAIKeyEnv     = "OPENAI_API_KEY"
)

// DefaultAnthropicVersion is sent as anthropic-version when the caller sends
// none (the Messages API requires the header).
const DefaultAnthropicVersion = "2023-06-01"

// ProviderConfig is one upstream's settings.
type ProviderConfig struct {
	// BaseURL is the API root; an API path is appended to it.
	BaseURL string
	// APIKeyEnv names the variable holding the key (the provider's usual
	// one when empty, unless Keyless).
	APIKeyEnv string
	// Keyless: the endpoint takes no key (Ollama, a local vLLM).
	Keyless bool
	// UnsafeAllowHTTPWithKey lets a key travel over plain http.
	UnsafeAllowHTTPWithKey bool
}

// Upstream is one provider's API root and credential.
type Upstream struct {
	Provider string   // Anthropic or OpenAI
	BaseURL  *url.URL // API root, no trailing slash
	KeyEnv   string   // variable the key came from ("" when keyless)
	key      string
	keyless  bool
}

// New returns the upstream of provider (Anthropic or OpenAI) under pc,
// reading its key with getenv. A key whose variable is unset is not an
// error here (Key is then empty); Resolve makes it one.
func New(provider string, pc ProviderConfig, getenv func(string) string) (Upstream, error) {
	var defBase, defEnv string
	switch provider {
	case Anthropic:
		defBase, defEnv = DefaultAnthropicBaseURL, DefaultAnthropicKeyEnv
	case OpenAI:
		defBase, defEnv = DefaultOpenAIBaseURL, DefaultOpenAIKeyEnv
	default:
		return Upstream{}, fmt.Errorf("provider %q is not %s or %s", provider, Anthropic, OpenAI)
	}
	base, err := config.ParseRelayBaseURL(orDefault(pc.BaseURL, defBase))
	if err != nil {
		return Upstream{}, fmt.Errorf("%s base URL %q: %w", provider, pc.BaseURL, err)
	}
	u := Upstream{Provider: provider, BaseURL: base, keyless: pc.Keyless}
	if !pc.Keyless {
		u.KeyEnv = orDefault(pc.APIKeyEnv, defEnv)
		u.key = strings.TrimSpace(getenv(u.KeyEnv))
		if base.Scheme == "http" && !pc.UnsafeAllowHTTPWithKey {
			return Upstream{}, fmt.Errorf("%s base URL %q: plain http would send the API key in clear text (use https, a keyless endpoint, or UnsafeAllowHTTPWithKey)", provider, base.Redacted())
		}
		if strings.ContainsAny(u.key, "\r\n") {
			return Upstream{}, fmt.Errorf("%s API key in %s: contains a line break", provider, u.KeyEnv)
		}
	}
	return u, nil
}

// Resolve is New, and an error naming the variable when the provider needs
// a key that is not set.
func Resolve(provider string, pc ProviderConfig, getenv func(string) string) (Upstream, error) {
	u, err := New(provider, pc, getenv)
	if err != nil {
		return Upstream{}, err
	}
	if !u.keyless && u.key == "" {
		return Upstream{}, fmt.Errorf("%s: no API key: %s is not set", provider, u.KeyEnv)
	}
	return u, nil
}

// Key returns the API key ("" when keyless or unset).
func (u Upstream) Key() string { return u.key }

// Keyless reports whether the endpoint takes no key.
func (u Upstream) Keyless() bool { return u.keyless }

// URL returns the API root with path (relative, no leading slash) appended.
func (u Upstream) URL(path string) string {
	v := *u.BaseURL
	v.Path = u.BaseURL.Path + "/" + path
	v.RawPath = ""
	return v.String()
}

// SetAuth sets the provider's credential (SetKey) and, for Anthropic, the
// API version on h.
func (u Upstream) SetAuth(h http.Header) {
	if u.Provider == Anthropic {
		h.Set("Anthropic-Version", DefaultAnthropicVersion)
	}
	u.SetKey(h)
}

// SetKey sets the provider's credential on h: X-Api-Key for Anthropic,
// Authorization: Bearer for OpenAI; nothing when keyless.
func (u Upstream) SetKey(h http.Header) {
	if u.keyless {
		return
	}
	switch u.Provider {
	case Anthropic:
		h.Set("X-Api-Key", u.key)
	case OpenAI:
		h.Set("Authorization", "Bearer "+u.key)
	}
}

// Redact returns s with the upstream's key masked, so that no error text
// that echoes it is logged or stored.
func (u Upstream) Redact(s string) string {
	if u.key == "" {
		return s
	}
	return strings.ReplaceAll(s, u.key, "[REDACTED]")
}

func orDefault(v, def string) string {
	if v == "" {
		return def
	}
	return v
}
