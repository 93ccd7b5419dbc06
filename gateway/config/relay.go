package config

import (
	"errors"
	"fmt"
	"math"
	"net/url"
	"strings"
	"time"
)

// Limits on relay settings that would be mistakes rather than choices.
const (
	maxRelayBodyBytes = 1 << 30 // 1 GiB
)

// RelayConfig is the relay section of gateway.yaml: the credential-injecting
// model relay on the agent port (/llm/anthropic, /llm/openai). Zero values
// mean the llmrelay package's defaults (see docs/relay.md). API keys are
// never written here: api_key_env names the gateway environment variable
// that holds the key.
//
//	relay:
//	  anthropic:
//	    base_url: https://api.anthropic.com
//	    api_key_env: ANTHROPIC_API_KEY
//	  openai:
//	    base_url: http://ollama:11434/v1
//	    api_key_env: ""                 # explicit: a keyless local endpoint
//	  max_body_bytes: 33554432
//	  timeout: 10m
//	  stream_idle_timeout: 2m
//	  max_concurrent_per_session: 8
//	  budget: {max_tokens: 5000000, max_cost_usd: 20}
//	  session_budgets:
//	    nightly: {max_cost_usd: 50}
//	  prices:
//	    "llama3.1": {input_per_mtok: 0, output_per_mtok: 0}
//	  unsafe_allow_server_tools: false  # provider-side web/MCP tools
type RelayConfig struct {
	// Anthropic is the upstream of /llm/anthropic.
	Anthropic RelayProvider `yaml:"anthropic"`
	// OpenAI is the upstream of /llm/openai: any OpenAI-compatible API.
	OpenAI RelayProvider `yaml:"openai"`
	// MaxBodyBytes caps a request body.
	MaxBodyBytes int64 `yaml:"max_body_bytes"`
	// Timeout bounds a whole model call, stream included.
	Timeout time.Duration `yaml:"timeout"`
	// StreamIdleTimeout aborts a call whose upstream sends nothing for this long.
	StreamIdleTimeout time.Duration `yaml:"stream_idle_timeout"`
	// MaxConcurrentPerSession caps a session's model calls in flight.
	MaxConcurrentPerSession int `yaml:"max_concurrent_per_session"`
	// Budget applies to every session without an entry in SessionBudgets.
	Budget RelayBudget `yaml:"budget"`
	// SessionBudgets replace Budget for the named sessions.
	SessionBudgets map[string]RelayBudget `yaml:"session_budgets"`
	// Prices add to or override the built-in price table, keyed by model
	// name prefix.
	Prices map[string]RelayPrice `yaml:"prices"`
	// UnsafeAllowServerTools lets model calls use provider-side tools that
	// reach the network (web search/fetch, remote MCP servers): they
	// bypass the egress proxy's allowlist.
	UnsafeAllowServerTools bool `yaml:"unsafe_allow_server_tools"`
}

// RelayProvider is one upstream model API.
type RelayProvider struct {
	// BaseURL is the API root the relayed path is appended to.
	BaseURL string `yaml:"base_url"`
	// APIKeyEnv names the environment variable holding the API key. Absent:
	// the provider's usual variable. Present and empty: the endpoint takes
	// no key (Ollama, a local vLLM).
	APIKeyEnv *string `yaml:"api_key_env"`
	// UnsafeAllowHTTPWithKey lets the key travel over plain http.
	UnsafeAllowHTTPWithKey bool `yaml:"unsafe_allow_http_with_key"`
}

// RelayBudget limits what one session may spend; zero means no limit.
type RelayBudget struct {
	MaxTokens  int64   `yaml:"max_tokens"`
	MaxCostUSD float64 `yaml:"max_cost_usd"`
}

// RelayPrice is a model's price in US dollars per million tokens. The cache
// prices (Anthropic prompt caching) default to 1.25× and 0.1× the input price.
type RelayPrice struct {
	InputPerMTok      float64  `yaml:"input_per_mtok"`
	OutputPerMTok     float64  `yaml:"output_per_mtok"`
	CacheWritePerMTok *float64 `yaml:"cache_write_per_mtok"`
	CacheReadPerMTok  *float64 `yaml:"cache_read_per_mtok"`
}

// Validate implements Validator; field names are relative to "relay".
func (r *RelayConfig) Validate() error {
	var errs []error
	errs = append(errs, r.Anthropic.validate("anthropic")...)
	errs = append(errs, r.OpenAI.validate("openai")...)
	if r.MaxBodyBytes < 0 || r.MaxBodyBytes > maxRelayBodyBytes {
		errs = append(errs, Errorf("max_body_bytes", "must be between 0 (default) and %d", maxRelayBodyBytes))
	}
	for _, f := range []struct {
		name string
		v    time.Duration
	}{{"timeout", r.Timeout}, {"stream_idle_timeout", r.StreamIdleTimeout}} {
		if f.v < 0 {
			errs = append(errs, Errorf(f.name, "must not be negative"))
		}
	}
	if r.MaxConcurrentPerSession < 0 {
		errs = append(errs, Errorf("max_concurrent_per_session", "must not be negative"))
	}
	errs = append(errs, r.Budget.validate("budget")...)
	for _, name := range sortedKeys(r.SessionBudgets) {
		field := "session_budgets." + name
		if strings.TrimSpace(name) == "" {
			errs = append(errs, Errorf(field, "empty session name"))
		}
		b := r.SessionBudgets[name]
		errs = append(errs, b.validate(field)...)
	}
	for _, model := range sortedKeys(r.Prices) {
		field := "prices." + model
		if strings.TrimSpace(model) == "" || strings.TrimSpace(model) != model {
			errs = append(errs, Errorf(field, "model names must be non-empty and have no surrounding spaces"))
		}
		p := r.Prices[model]
		for _, v := range []struct {
			name string
			v    *float64
		}{{"input_per_mtok", &p.InputPerMTok}, {"output_per_mtok", &p.OutputPerMTok}, {"cache_write_per_mtok", p.CacheWritePerMTok}, {"cache_read_per_mtok", p.CacheReadPerMTok}} {
			if v.v != nil && !finiteNonNegative(*v.v) {
				errs = append(errs, Errorf(field+"."+v.name, "must be a finite number ≥ 0"))
			}
		}
	}
	return errors.Join(errs...)
}

func (b RelayBudget) validate(field string) []error {
	var errs []error
	if b.MaxTokens < 0 {
		errs = append(errs, Errorf(field+".max_tokens", "must not be negative (0: no limit)"))
	}
	if !finiteNonNegative(b.MaxCostUSD) {
		errs = append(errs, Errorf(field+".max_cost_usd", "must be a finite number ≥ 0 (0: no limit)"))
	}
	return errs
}

func (p RelayProvider) validate(field string) []error {
	var errs []error
	keyless := p.APIKeyEnv != nil && *p.APIKeyEnv == ""
	if p.APIKeyEnv != nil && *p.APIKeyEnv != "" && !validEnvName(*p.APIKeyEnv) {
		errs = append(errs, Errorf(field+".api_key_env", "%q: must be an environment variable name (letters, digits, _; not starting with a digit)", *p.APIKeyEnv))
	}
	if p.BaseURL == "" {
		return errs
	}
	u, err := ParseRelayBaseURL(p.BaseURL)
	if err != nil {
		return append(errs, Errorf(field+".base_url", "%q: %w", p.BaseURL, err))
	}
	if u.Scheme == "http" && !keyless && !p.UnsafeAllowHTTPWithKey {
		errs = append(errs, Errorf(field+".base_url", "%q: plain http would send the API key in clear text; use https, set api_key_env: \"\" for a keyless endpoint, or set unsafe_allow_http_with_key", p.BaseURL))
	}
	return errs
}

// ParseRelayBaseURL parses a relay upstream base URL strictly: http or
// https, a host, no user info, query or fragment, no backslashes, control
// characters or dot segments. A trailing slash is removed.
func ParseRelayBaseURL(s string) (*url.URL, error) {
	if strings.ContainsAny(s, "\\ ") || strings.IndexFunc(s, func(r rune) bool { return r < 0x20 || r == 0x7f }) >= 0 {
		return nil, errors.New("contains a space, backslash or control character")
	}
	u, err := url.Parse(s)
	if err != nil {
		return nil, errors.New("not a URL")
	}
	switch {
	case u.Scheme != "http" && u.Scheme != "https":
		return nil, errors.New("scheme must be http or https")
	case u.Host == "" || u.Hostname() == "":
		return nil, errors.New("no host")
	case u.User != nil:
		return nil, errors.New("user info is not allowed (keys come from api_key_env)")
	case u.RawQuery != "" || u.ForceQuery || u.Fragment != "" || strings.Contains(s, "#"):
		return nil, errors.New("query and fragment are not allowed")
	case u.Opaque != "":
		return nil, errors.New("not a hierarchical URL")
	}
	if p := u.Port(); p != "" {
		var n int
		if _, err := fmt.Sscanf(p, "%d", &n); err != nil || n < 1 || n > 65535 || fmt.Sprint(n) != p {
			return nil, errors.New("port must be 1-65535")
		}
	}
	for _, seg := range strings.Split(u.Path, "/") {
		if seg == "." || seg == ".." {
			return nil, errors.New("dot segments are not allowed in the path")
		}
	}
	if u.RawPath != "" || strings.Contains(u.Path, "%") {
		return nil, errors.New("percent-escapes are not allowed in the path")
	}
	u.Path = strings.TrimRight(u.Path, "/")
	return u, nil
}

func finiteNonNegative(f float64) bool {
	return !math.IsNaN(f) && !math.IsInf(f, 0) && f >= 0
}

func validEnvName(s string) bool {
	for i, r := range s {
		switch {
		case r == '_', r >= 'A' && r <= 'Z', r >= 'a' && r <= 'z':
		case r >= '0' && r <= '9' && i > 0:
		default:
			return false
		}
	}
	return s != ""
}
