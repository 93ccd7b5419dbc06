package config

import (
	"strings"
	"time"
)

// Defaults and bounds of the auto-approver (escalation.auto_approver).
const (
	DefaultAutoApproverTimeout         = 20 * time.Second
	DefaultAutoApproverMaxOutputTokens = 400
	DefaultAutoApproverMaxPromptBytes  = 32 << 10
	DefaultAutoApproverRecentDecisions = 10
	DefaultAutoApproverRatePerMinute   = 30
	DefaultAutoApproverMaxConcurrent   = 4
	DefaultAutoApproverCallsPerDay     = 500
	DefaultAutoApproverTokensPerDay    = 2_000_000
	DefaultAutoApproverCostUSDPerDay   = 5.0

	maxAutoApproverTimeout         = 5 * time.Minute
	maxAutoApproverOutputTokens    = 8192
	minAutoApproverOutputTokens    = 16
	minAutoApproverPromptBytes     = 1 << 10
	maxAutoApproverPromptBytes     = 1 << 20
	maxAutoApproverRecentDecisions = 100
	maxAutoApproverPerMinute       = 10_000
	maxAutoApproverConcurrent      = 64
)

// AutoApproverConfig is escalation.auto_approver: a model, reached through
// the relay's own provider settings (relay.<provider>.base_url and
// api_key_env), that sees a new escalation made by a compiled policy rule
// before a human does and may approve it or leave it to a human — never
// deny it. Off by default. See docs/auto-approver.md.
//
//	escalation:
//	  auto_approver:
//	    enabled: true
//	    provider: anthropic        # or openai (any OpenAI-compatible API)
//	    model: claude-haiku-4-5
//	    timeout: 20s               # then: left to a human
//	    max_output_tokens: 400
//	    max_prompt_bytes: 32768    # a larger call is left to a human unseen
//	    recent_decisions: 10       # of the session, shown as context
//	    rate_per_minute: 30        # beyond: left to a human
//	    max_concurrent: 4
//	    budget: {max_calls_per_day: 500, max_tokens_per_day: 2000000, max_cost_usd_per_day: 5}
//
// Zero values take the defaults above.
type AutoApproverConfig struct {
	Enabled         bool               `yaml:"enabled"`
	Provider        string             `yaml:"provider"`
	Model           string             `yaml:"model"`
	Timeout         time.Duration      `yaml:"timeout"`
	MaxOutputTokens int                `yaml:"max_output_tokens"`
	MaxPromptBytes  int                `yaml:"max_prompt_bytes"`
	RecentDecisions int                `yaml:"recent_decisions"`
	RatePerMinute   int                `yaml:"rate_per_minute"`
	MaxConcurrent   int                `yaml:"max_concurrent"`
	Budget          AutoApproverBudget `yaml:"budget"`
}

// AutoApproverBudget is what the auto-approver may spend per UTC day (each
// zero: the default; there is no unlimited setting).
type AutoApproverBudget struct {
	MaxCallsPerDay   int64   `yaml:"max_calls_per_day"`
	MaxTokensPerDay  int64   `yaml:"max_tokens_per_day"`
	MaxCostUSDPerDay float64 `yaml:"max_cost_usd_per_day"`
}

// WithDefaults returns a copy with zero fields set to their defaults.
func (a AutoApproverConfig) WithDefaults() AutoApproverConfig {
	def := func(v *int, d int) {
		if *v == 0 {
			*v = d
		}
	}
	if a.Timeout == 0 {
		a.Timeout = DefaultAutoApproverTimeout
	}
	def(&a.MaxOutputTokens, DefaultAutoApproverMaxOutputTokens)
	def(&a.MaxPromptBytes, DefaultAutoApproverMaxPromptBytes)
	def(&a.RecentDecisions, DefaultAutoApproverRecentDecisions)
	def(&a.RatePerMinute, DefaultAutoApproverRatePerMinute)
	def(&a.MaxConcurrent, DefaultAutoApproverMaxConcurrent)
	if a.Budget.MaxCallsPerDay == 0 {
		a.Budget.MaxCallsPerDay = DefaultAutoApproverCallsPerDay
	}
	if a.Budget.MaxTokensPerDay == 0 {
		a.Budget.MaxTokensPerDay = DefaultAutoApproverTokensPerDay
	}
	if a.Budget.MaxCostUSDPerDay == 0 {
		a.Budget.MaxCostUSDPerDay = DefaultAutoApproverCostUSDPerDay
	}
	return a
}

// validate checks the section; field names are relative to field.
func (a AutoApproverConfig) validate(field string) []error {
	var errs []error
	f := func(name string) string { return field + "." + name }
	switch a.Provider {
	case "anthropic", "openai":
	case "":
		if a.Enabled {
			errs = append(errs, Errorf(f("provider"), "required when enabled: anthropic or openai (the relay's provider settings and key are used)"))
		}
	default:
		errs = append(errs, Errorf(f("provider"), "%q: must be anthropic or openai", a.Provider))
	}
	switch {
	case a.Model == "" && a.Enabled:
		errs = append(errs, Errorf(f("model"), "required when enabled (for example claude-haiku-4-5)"))
	case a.Model != "" && !validAutoModel(a.Model):
		errs = append(errs, Errorf(f("model"), "%q: must be 1-200 letters, digits and . _ : / - (no spaces or control characters)", a.Model))
	}
	if a.Timeout < 0 || a.Timeout > maxAutoApproverTimeout || (a.Timeout > 0 && a.Timeout < time.Second) {
		errs = append(errs, Errorf(f("timeout"), "must be between 1s and %s (0: default %s)", maxAutoApproverTimeout, DefaultAutoApproverTimeout))
	}
	ints := []struct {
		name      string
		v, lo, hi int
	}{
		{"max_output_tokens", a.MaxOutputTokens, minAutoApproverOutputTokens, maxAutoApproverOutputTokens},
		{"max_prompt_bytes", a.MaxPromptBytes, minAutoApproverPromptBytes, maxAutoApproverPromptBytes},
		{"recent_decisions", a.RecentDecisions, 1, maxAutoApproverRecentDecisions},
		{"rate_per_minute", a.RatePerMinute, 1, maxAutoApproverPerMinute},
		{"max_concurrent", a.MaxConcurrent, 1, maxAutoApproverConcurrent},
	}
	for _, x := range ints {
		if x.v != 0 && (x.v < x.lo || x.v > x.hi) {
			errs = append(errs, Errorf(f(x.name), "must be between %d and %d (0: default)", x.lo, x.hi))
		}
	}
	if a.Budget.MaxCallsPerDay < 0 {
		errs = append(errs, Errorf(f("budget.max_calls_per_day"), "must not be negative (0: default %d)", DefaultAutoApproverCallsPerDay))
	}
	if a.Budget.MaxTokensPerDay < 0 {
		errs = append(errs, Errorf(f("budget.max_tokens_per_day"), "must not be negative (0: default %d)", DefaultAutoApproverTokensPerDay))
	}
	if !finiteNonNegative(a.Budget.MaxCostUSDPerDay) {
		errs = append(errs, Errorf(f("budget.max_cost_usd_per_day"), "must be a finite number ≥ 0 (0: default %g)", DefaultAutoApproverCostUSDPerDay))
	}
	return errs
}

func validAutoModel(m string) bool {
	if len(m) > 200 || strings.TrimSpace(m) != m {
		return false
	}
	for _, c := range m {
		switch {
		case c >= 'a' && c <= 'z', c >= 'A' && c <= 'Z', c >= '0' && c <= '9', strings.ContainsRune("._:/-", c):
		default:
			return false
		}
	}
	return m != ""
}
