// Package llmrelay is the gateway's credential-injecting model relay: the
// agent's model base URL points at it (/llm/anthropic, /llm/openai) and it
// forwards allowlisted model API calls to the configured upstream with the
// gateway's API key.
//
// Per request the relay authenticates the agent token the SDK sends as its
// API key (x-api-key or Authorization: Bearer), refuses any path outside the
// provider's model API allowlist, checks the session's budget and concurrency
// cap, rebuilds the request with an allowlist of headers and the real key
// (every inbound credential is dropped), sends it directly to the configured
// host, and streams the response back unchanged while reading usage from the
// JSON body or the SSE events. Each call becomes one audit.LLMCall with
// model, tokens and estimated cost; spend is kept per session (seeded from a
// Spend store when one is given) and a spent budget refuses further calls in
// the provider's own error shape. See docs/relay.md.
package llmrelay
