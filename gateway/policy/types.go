package policy

import (
	"encoding/json"
	"fmt"
)

// Status is the outcome of evaluating a tool call. The zero value is Deny,
// so a Decision that was never filled in refuses.
type Status uint8

const (
	// Deny refuses the call.
	Deny Status = iota
	// Escalate asks a human before the call may run.
	Escalate
	// Allow lets the call run.
	Allow
)

// String returns the wire name of s: "deny", "escalate" or "allow".
func (s Status) String() string {
	switch s {
	case Allow:
		return "allow"
	case Escalate:
		return "escalate"
	default:
		return "deny"
	}
}

// ParseStatus is the inverse of Status.String.
func ParseStatus(v string) (Status, error) {
	switch v {
	case "allow":
		return Allow, nil
	case "escalate":
		return Escalate, nil
	case "deny":
		return Deny, nil
	}
	return Deny, fmt.Errorf("unknown decision %q (want allow, deny or escalate)", v)
}

// MarshalText implements encoding.TextMarshaler.
func (s Status) MarshalText() ([]byte, error) { return []byte(s.String()), nil }

// UnmarshalText implements encoding.TextUnmarshaler.
func (s *Status) UnmarshalText(b []byte) error {
	v, err := ParseStatus(string(b))
	if err != nil {
		return err
	}
	*s = v
	return nil
}

// Severity orders statuses from least to most restrictive: allow < escalate < deny.
func (s Status) Severity() int {
	switch s {
	case Allow:
		return 0
	case Escalate:
		return 1
	default:
		return 2
	}
}

// Decision is the engine's verdict on one call. It explains itself: Rule names
// the compiled rule or structural check that decided, Reason says why in words
// that are safe to show to the agent.
type Decision struct {
	Status         Status `json:"decision"`
	Rule           string `json:"rule"`
	Reason         string `json:"reason"`
	EscalatedRoles []Role `json:"escalatedRoles,omitempty"`
	// Detail is for the audit record only (it may name host paths or the
	// underlying error); never show it to the agent.
	Detail string `json:"detail,omitempty"`
	// Compiled is true when a compiled rule decided (not a structural
	// check, the default deny or a decision made outside the engine). Only
	// a compiled rule's escalation may be shown to the auto-approver.
	Compiled bool `json:"-"`
	// Secrets are the secrets a RuleSecretEgress decision found (kind and
	// location; the masked excerpt is never marshalled: OperatorReason).
	Secrets []SecretFinding `json:"secrets,omitempty"`
}

// Request is one tool call as the agent made it. Args are the decoded JSON
// arguments (string, float64, bool, nil, []any, map[string]any).
type Request struct {
	Server string
	Tool   string
	Args   map[string]any
	// Sandbox is the caller's own sandbox when it is not the configured one:
	// a minted session's directory, strictly below
	// Settings.SessionSandboxRoot. The call is judged by the engine's view
	// for that sandbox (Engine.ForSandbox): paths the agent names under the
	// configured sandbox mean the same paths under this one, rules are
	// rebased to it, and every other session's directory is protected.
	// "" judges against the configured sandbox (the static agent token).
	Sandbox string
	// Door is what a door sends beside the arguments (the GitHub relay: a
	// request body), scanned and digested by the door; zero for /mcp.
	Door DoorContent

	// wire marks the git push call EvaluateWirePush evaluates: its
	// invariants are already applied and there is no workspace to plan
	// from.
	wire bool
}

// Role is an argument role from the registry (see roles.go), for example
// "read-path" or "git-remote-url". Roles are plain strings in the artifacts.
type Role string

// Category groups roles by the structural check that applies to them.
type Category string

const (
	CategoryPath       Category = "path"
	CategoryURL        Category = "url"
	CategoryIdentifier Category = "identifier"
	CategoryOpaque     Category = "opaque"
)

// ToolAnnotation says which role each argument of a tool carries. Args keep
// their declared order (the original evaluates roles in argument order).
// It marshals to and from the original's tool-annotations.json entry:
// {"toolName","serverName","comment","args":{name: spec},"inputSchema"},
// plus our "pin" (pin.go) for external tools.
type ToolAnnotation struct {
	Tool        string
	Server      string
	Comment     string
	Args        []ArgAnnotation
	InputSchema json.RawMessage
	// Pin is the reviewed definition of an external tool (nil: never
	// pinned; the hub hides such a tool).
	Pin *ToolPin
}

// ArgAnnotation is the role specification of one named argument.
type ArgAnnotation struct {
	Name string
	Spec ArgSpec
}

// ArgSpec is either a static list of roles (When is empty) or a conditional
// block: the first When entry whose condition holds gives the roles, otherwise
// Default applies. In JSON a static spec is an array, a conditional one an
// object {"default": [...], "when": [...]}.
type ArgSpec struct {
	Default []Role
	When    []ConditionalRoles
}

// ConditionalRoles pairs a condition with the roles it selects. The roles are
// a subset of the spec's Default.
type ConditionalRoles struct {
	Condition ArgCondition `json:"condition"`
	Roles     []Role       `json:"roles"`
}

// ArgCondition tests a sibling argument. Exactly one of Equals, In or Is is set.
// Is is one of "present", "absent", "truthy", "falsy".
type ArgCondition struct {
	Arg    string `json:"arg"`
	Equals any    `json:"equals,omitempty"`
	In     []any  `json:"in,omitempty"`
	Is     string `json:"is,omitempty"`
}

// Static returns a non-conditional ArgSpec carrying roles.
func Static(roles ...Role) ArgSpec { return ArgSpec{Default: roles} }
