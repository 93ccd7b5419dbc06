package llmrelay

import (
	"fmt"
	"os"

	"ironcurtain.dev/gateway/internal/llmprovider"
)

// ResolveUpstream returns the upstream of provider (Anthropic or OpenAI)
// under the relay's settings cfg, for the gateway's own model calls (the
// auto-approver): the same base URL, key variable and plain-http rule as
// the relayed calls. The key is read with cfg.Getenv (os.Getenv when nil);
// a provider that needs a key whose variable is unset is an error naming
// the variable.
func ResolveUpstream(cfg Config, provider string) (llmprovider.Upstream, error) {
	getenv := cfg.Getenv
	if getenv == nil {
		getenv = os.Getenv
	}
	var pc llmprovider.ProviderConfig
	switch provider {
	case llmprovider.Anthropic:
		pc = cfg.Anthropic
	case llmprovider.OpenAI:
		pc = cfg.OpenAI
	default:
		return llmprovider.Upstream{}, fmt.Errorf("provider %q is not %s or %s", provider, llmprovider.Anthropic, llmprovider.OpenAI)
	}
	return llmprovider.Resolve(provider, pc, getenv)
}
