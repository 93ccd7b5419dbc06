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
//
// The relay is a door that does not hand its calls to the gate's call
// pipeline (gate.Gate.Do): a model call is not a tool call (no policy rule
// set decides it, and it never asks a human: it is allowed within the
// provider's path allowlist, the budget and the secret scan, or refused).
// Its one record per call, written when the call ends, goes through
// gate.Recorder, like the egress proxy's: a failed write refuses new model
// calls until a write succeeds.
package llmrelay
