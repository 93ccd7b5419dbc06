// Package audit defines the records the gateway keeps of everything the agent
// does (tool-call decisions and outcomes, egress connections, model calls) and
// the Sink they are written to. Sinks: a JSON-lines file (jsonl.go) and
// Postgres (pgsink.go, with write-ahead, group commit and a hash chain).
package audit

import (
	"context"
	"encoding/json"
	"time"
)

// Sink stores audit events. Record returns only once the event is durable
// (for a ToolCallDecision: before the action runs). A non-nil error means the
// event was not stored; for a decision the caller must then refuse the action.
type Sink interface {
	Record(ctx context.Context, e Event) error
}

// Event is one of *ToolCallDecision, *ToolCallOutcome, *EgressEvent, *LLMCall.
type Event interface{ auditEvent() }

// ToolCallDecision is written before a tool call runs (write-ahead).
type ToolCallDecision struct {
	CallID    string          `json:"call_id"` // UUID, chosen by the hub
	SessionID string          `json:"session_id"`
	Time      time.Time       `json:"time"`
	Server    string          `json:"server"`
	Tool      string          `json:"tool"`
	Args      json.RawMessage `json:"args"`     // the agent's arguments, redacted before storage
	Decision  string          `json:"decision"` // allow | deny | escalate
	Rule      string          `json:"rule"`
	Reason    string          `json:"reason"`
	// ShadowDecision and ShadowRule record what a report-only shadow policy
	// would have decided; empty when no shadow policy is loaded.
	ShadowDecision string `json:"shadow_decision,omitempty"`
	ShadowRule     string `json:"shadow_rule,omitempty"`
	// EscalationID links to the escalation row when Decision is escalate.
	EscalationID string `json:"escalation_id,omitempty"`
	// Detail is for operators only (never shown to the agent).
	Detail string `json:"detail,omitempty"`
	// PolicyVersion is policy.Engine.Version of the policy that decided
	// (empty when no policy took part). In the hash chain when not empty.
	PolicyVersion string `json:"policy_version,omitempty"`
	// TraceID is the OpenTelemetry trace of the call when it was traced
	// (32 hex digits; empty when tracing is off or the trace not sampled).
	// Outside the hash chain: it links to telemetry, it is not evidence.
	TraceID string `json:"trace_id,omitempty"`
}

// Outcome statuses of a tool call.
const (
	OutcomeOK       = "ok"      // the tool ran and returned a result
	OutcomeError    = "error"   // the tool ran and failed
	OutcomeDenied   = "denied"  // policy or a human refused; the tool did not run
	OutcomeRefused  = "refused" // the gateway refused for another reason (audit down, bad args)
	OutcomeTimedOut = "timed_out"
)

// ToolCallOutcome is written after the call finished (or was refused).
type ToolCallOutcome struct {
	CallID      string        `json:"call_id"`
	SessionID   string        `json:"session_id"`
	Time        time.Time     `json:"time"`
	Status      string        `json:"status"` // one of the Outcome constants
	Duration    time.Duration `json:"duration_ns"`
	ResultBytes int           `json:"result_bytes"`
	Truncated   bool          `json:"truncated,omitempty"`
	Error       string        `json:"error,omitempty"`
}

// EgressEvent is one proxied request or CONNECT tunnel, written on close.
type EgressEvent struct {
	ID         string        `json:"id"`
	SessionID  string        `json:"session_id"`             // empty when the client did not authenticate
	ToolCallID string        `json:"tool_call_id,omitempty"` // set when a gateway tool (fetch) made it
	Time       time.Time     `json:"time"`                   // when the request arrived
	Kind       string        `json:"kind"`                   // connect | http | fetch
	Method     string        `json:"method,omitempty"`
	Host       string        `json:"host"` // canonical host name or IP literal
	Port       int           `json:"port"`
	ResolvedIP string        `json:"resolved_ip,omitempty"`
	Decision   string        `json:"decision"` // allow | deny | escalate
	Reason     string        `json:"reason"`
	Rule       string        `json:"rule,omitempty"`
	BytesUp    int64         `json:"bytes_up"`
	BytesDown  int64         `json:"bytes_down"`
	Duration   time.Duration `json:"duration_ns"`
	Error      string        `json:"error,omitempty"`
	TraceID    string        `json:"trace_id,omitempty"` // as ToolCallDecision.TraceID
}

// LLMCall is one relayed model call.
type LLMCall struct {
	ID           string        `json:"id"`
	SessionID    string        `json:"session_id"`
	Time         time.Time     `json:"time"`
	Provider     string        `json:"provider"` // anthropic | openai
	Model        string        `json:"model"`
	Path         string        `json:"path"`
	Stream       bool          `json:"stream"`
	StatusCode   int           `json:"status_code"`
	InputTokens  int64         `json:"input_tokens"`
	OutputTokens int64         `json:"output_tokens"`
	CostUSD      float64       `json:"cost_usd"`
	Duration     time.Duration `json:"duration_ns"`
	Error        string        `json:"error,omitempty"`
	TraceID      string        `json:"trace_id,omitempty"` // as ToolCallDecision.TraceID
}

func (*ToolCallDecision) auditEvent() {}
func (*ToolCallOutcome) auditEvent()  {}
func (*EgressEvent) auditEvent()      {}
func (*LLMCall) auditEvent()          {}
