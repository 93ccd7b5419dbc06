// Package compiler turns an English constitution into the policy artifacts the
// gateway enforces (compiled-policy.json, dynamic-lists.json,
// tool-annotations.json, test-scenarios.json), verifying every rule set with
// the same gateway/policy engine that runs in production.
//
// This root package holds only the contract every model-backed step depends
// on: Model, with its Prompt and Reply. Providers live in package model,
// structured output (schema validation, retries, caching) in package
// structured, the steps in annotate, compile, lists, scenarios and verify, and
// the orchestration of compile-policy in package pipeline. The command is
// cmd/ironcurtain-compile; docs/compiler.md describes it for operators.
package compiler

import "context"

// Model is one chat-completion endpoint. Implementations must be safe for
// concurrent use; the pipeline calls Complete from many goroutines.
type Model interface {
	Complete(ctx context.Context, p Prompt) (Reply, error)
}

// Prompt is one request to a model: a system prompt and a conversation that
// ends with a user message.
type Prompt struct {
	// Step names the pipeline step ("compile/filesystem", "judge/git/1", ...)
	// for the interaction log. It is never sent to the model.
	Step string
	// System is the system prompt.
	System string
	// Messages alternate user and assistant turns, starting and ending with
	// a user turn.
	Messages []Message
	// MaxTokens bounds the reply; zero means the provider default of the
	// model package.
	MaxTokens int
}

// Message is one turn of a conversation.
type Message struct {
	Role    Role   `json:"role"`
	Content string `json:"content"`
}

// Role says who wrote a message.
type Role string

const (
	// User is the pipeline speaking to the model.
	User Role = "user"
	// Assistant is the model's earlier reply.
	Assistant Role = "assistant"
)

// Reply is what the model answered.
type Reply struct {
	Text  string
	Usage Usage
}

// Usage counts tokens as the provider reported them.
type Usage struct {
	InputTokens  int64 `json:"inputTokens"`
	OutputTokens int64 `json:"outputTokens"`
}
