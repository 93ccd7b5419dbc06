// Package servers defines what a tool server hosted by the gateway looks like
// to the MCP hub. Built-in servers (filesystem, git, github, fetch) implement
// Server in-process and declare the policy annotation of every tool in code;
// external stdio MCP servers are adapted to the same interface by the hub.
package servers

import (
	"context"
	"encoding/json"

	"ironcurtain.dev/gateway/policy"
)

// Tool describes one tool of a server. Name is the bare tool name (the hub
// exposes it to the agent as "<server>__<name>").
type Tool struct {
	Name        string
	Description string
	// InputSchema is the JSON Schema of the arguments (an object schema).
	InputSchema json.RawMessage
	// Annotation gives the role of every argument. Built-in servers fill it
	// in; the hub refuses tools whose annotation is missing.
	Annotation policy.ToolAnnotation
}

// Content is one item of a tool result (MCP text or image content).
type Content struct {
	Type     string `json:"type"`               // "text", "image" or "audio"
	Text     string `json:"text,omitempty"`     // for text
	Data     string `json:"data,omitempty"`     // base64, for image and audio
	MIMEType string `json:"mimeType,omitempty"` // for image and audio
}

// Result is what a tool returns. IsError marks a tool-level failure that the
// agent should see (as MCP isError results); Go errors returned by Call are
// gateway failures whose detail goes to audit only.
type Result struct {
	Content []Content
	IsError bool
}

// Text returns a Result holding one text item.
func Text(s string) Result { return Result{Content: []Content{{Type: "text", Text: s}}} }

// Errorf-style helper: ToolError returns an IsError Result with a short,
// agent-safe message.
func ToolError(msg string) Result {
	return Result{Content: []Content{{Type: "text", Text: msg}}, IsError: true}
}

// Server is a tool server the hub can call.
type Server interface {
	// Name is the server name ("filesystem", "git", ...), the prefix of its tools.
	Name() string
	// Tools lists the tools; the list does not change while the server runs.
	Tools() []Tool
	// Call runs a tool. args are the transport arguments prepared by the
	// policy engine (path arguments already canonical); the call has already
	// been allowed (or approved) and recorded.
	Call(ctx context.Context, tool string, args map[string]any) (Result, error)
}

// CallInfo identifies the call being served; the hub puts it in the context
// given to Server.Call (a fetch made by a tool links its egress record to it).
type CallInfo struct {
	CallID    string
	SessionID string
	// Approved is set when policy escalated the call and a human approved it
	// (the fetch server then also lets the approved URL's own host through
	// its allowlist; the address rules still apply).
	Approved bool
	// PolicyArgs are the arguments the policy judged (policy.Evaluation's
	// Policy map: named git remotes replaced by the URLs they resolved to).
	// The git server runs network operations only against these URLs, so a
	// remote re-pointed between the decision (or a human approval) and the
	// call is refused rather than contacted.
	PolicyArgs map[string]any
	// Push is the push plan the policy checked (policy.Evaluation.Push); the
	// git server recomputes the plan at call time and refuses to push when
	// it differs.
	Push *policy.PushPlan
}

type callInfoKey struct{}

// WithCallInfo returns a context carrying ci.
func WithCallInfo(ctx context.Context, ci CallInfo) context.Context {
	return context.WithValue(ctx, callInfoKey{}, ci)
}

// CallInfoFrom returns the CallInfo stored by WithCallInfo.
func CallInfoFrom(ctx context.Context) (CallInfo, bool) {
	ci, ok := ctx.Value(callInfoKey{}).(CallInfo)
	return ci, ok
}
