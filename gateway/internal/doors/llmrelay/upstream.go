package llmrelay

import (
	"fmt"
	"net/http"
	"net/url"
	"os"
	"strings"
)

// Upstream is one provider's API root and credential as the relay uses
// them, for the gateway's own model calls (the auto-approver): the same
// base URL, key variable and plain-http rule as the relayed calls.
type Upstream struct {
	Provider string   // Anthropic or OpenAI
	BaseURL  *url.URL // API root, no trailing slash
	KeyEnv   string   // variable the key came from ("" when keyless)
	key      string
	keyless  bool
}

// ResolveUpstream returns the upstream of provider (Anthropic or OpenAI)
// under cfg, reading its key with cfg.Getenv (os.Getenv when nil). A
// provider that needs a key whose variable is unset is an error naming the
// variable.
func ResolveUpstream(cfg Config, providerName string) (Upstream, error) {
	getenv := cfg.Getenv
	if getenv == nil {
		getenv = os.Getenv
	}
	var (
		pc            ProviderConfig
		defBase, defK string
		eps           map[string]endpoint
	)
	switch providerName {
	case Anthropic:
		pc, defBase, defK, eps = cfg.Anthropic, DefaultAnthropicBaseURL, DefaultAnthropicKeyEnv, anthropicEndpoints
	case OpenAI:
		pc, defBase, defK, eps = cfg.OpenAI, DefaultOpenAIBaseURL, DefaultOpenAIKeyEnv, openAIEndpoints
	default:
		return Upstream{}, fmt.Errorf("provider %q is not %s or %s", providerName, Anthropic, OpenAI)
	}
	p, err := newProvider(providerName, pc, defBase, defK, eps, getenv)
	if err != nil {
		return Upstream{}, err
	}
	if !p.keyless && p.key == "" {
		return Upstream{}, fmt.Errorf("%s: no API key: %s is not set", providerName, p.keyEnv)
	}
	return Upstream{Provider: p.name, BaseURL: p.base, KeyEnv: p.keyEnv, key: p.key, keyless: p.keyless}, nil
}

// URL returns the API root with path (relative, no leading slash) appended.
func (u Upstream) URL(path string) string {
	v := *u.BaseURL
	v.Path = u.BaseURL.Path + "/" + path
	v.RawPath = ""
	return v.String()
}

// SetAuth sets the provider's credential (and, for Anthropic, the API
// version) on h.
func (u Upstream) SetAuth(h http.Header) {
	switch u.Provider {
	case Anthropic:
		h.Set("Anthropic-Version", DefaultAnthropicVersion)
		if !u.keyless {
			h.Set("X-Api-Key", u.key)
		}
	case OpenAI:
		if !u.keyless {
			h.Set("Authorization", "Bearer "+u.key)
		}
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

// EstimateCost estimates a model call's price in US dollars from the
// relay's price table (DefaultPrices, then prices). ok is false for a model
// the table does not know.
func EstimateCost(prices map[string]Price, model string, inputTokens, outputTokens int64) (cost float64, ok bool) {
	_, p, ok := newPriceTable(prices).lookup(model)
	if !ok {
		return 0, false
	}
	return p.cost(Usage{Input: inputTokens, Output: outputTokens}), true
}
