// Package gate is the one call pipeline of the gateway. Every door (MCP,
// git smart HTTP, the GitHub relay) turns its request into a call of an
// exposed tool and hands it to the gate:
//
//	look up the tool (its server, its annotation: what the call counts as)
//	→ loop breaker and the session's budget
//	→ policy.Evaluate on one policy snapshot (transport and policy args)
//	→ write-ahead audit decision (a failure refuses the call)
//	→ escalate: the decision naming the escalation is durable before the
//	  escalation exists; the human's answer is durable in the escalation's
//	  own row (the Escalator's) before anything runs
//	→ run (the tool's server, or the door's Run; per-call timeout, CallInfo
//	  in the context)
//	→ size-capped result → audit outcome, metrics, trace.
//
// An identical retry of a call whose wait for a human was cut short (the
// gateway restarted) waits on, or runs once on, that call's escalation
// (escalate.go). Shutdown answers every waiting call at once and gives
// running calls a bounded grace (lifecycle.go).
//
// A tool is callable only if its server declares it and the policy engine
// has an annotation for it. What reaches the agent on a refusal is short and
// says what was refused and why; the detail goes to the audit record. The
// gate imports no door: doors import it.
package gate

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"sort"
	"strings"
	"time"

	"github.com/google/uuid"
	"go.opentelemetry.io/otel/trace"

	"ironcurtain.dev/gateway/internal/audit"
	"ironcurtain.dev/gateway/internal/escalation"
	"ironcurtain.dev/gateway/internal/loopguard"
	"ironcurtain.dev/gateway/internal/metrics"
	"ironcurtain.dev/gateway/internal/servers"
	"ironcurtain.dev/gateway/internal/session"
	"ironcurtain.dev/gateway/internal/tracing"
	"ironcurtain.dev/gateway/policy"
)

// Defaults applied when the corresponding Config field is zero.
const (
	DefaultMaxResultBytes = 1 << 20
	DefaultCallTimeout    = 2 * time.Minute
	DefaultProgressEvery  = 15 * time.Second
	// Separator joins server and tool names in the names the agent sees.
	Separator = "__"
)

// Policy is what the gate needs of the policy engine; *policy.Engine
// implements it.
type Policy interface {
	Annotation(server, tool string) (policy.ToolAnnotation, bool)
	Evaluate(ctx context.Context, r policy.Request) policy.Evaluation
}

var _ Policy = (*policy.Engine)(nil)

// Config holds the gate's settings.
type Config struct {
	// MaxResultBytes caps the text and data of one tool result; a larger
	// result is cut and the cut is marked.
	MaxResultBytes int
	// CallTimeout bounds the server's work on one call (not the time a
	// human takes to answer an escalation).
	CallTimeout time.Duration
	// ProgressEvery is how often a call waiting for a human tells its
	// Notifier it still waits.
	ProgressEvery time.Duration
	// ShutdownGrace is how long Shutdown lets calls running on a server
	// finish before it cancels them (calls waiting for a human stop at once).
	ShutdownGrace time.Duration
	// OutcomeWait bounds how long a finished call's answer waits for its
	// outcome record; past it the record goes on in the background
	// (pipeline.go: finish).
	OutcomeWait time.Duration
	// DecisionWait bounds the write-ahead decision record; past it the
	// call is refused and never runs, even if the record commits later
	// (pipeline.go: record).
	DecisionWait time.Duration
	// FairSlots is the number of CPU-heavy stretches (a strict read of a
	// request, a policy decision) that run at once (fair.go); zero: twice
	// the cores, at least 4.
	FairSlots int
}

// Deps are the gate's collaborators.
type Deps struct {
	// Servers are the tool servers, built-in and external (required).
	Servers []servers.Server
	// Policy decides every call (required).
	Policy Policy
	// Escalator asks a human; nil means escalation.Deny{}.
	Escalator escalation.Escalator
	// Audit records decisions and outcomes (required).
	Audit audit.Sink
	// Charger counts a session's calls against its tool-call budget
	// (budget.go); nil: a session with a budget is refused.
	Charger session.ToolCallCharger
	// Metrics records calls (optional).
	Metrics *metrics.ToolCalls
	// LoopGuard is the per-session loop breaker and rate limit (loop.go);
	// nil: none.
	LoopGuard *loopguard.Guard
	// Logger (optional; nil discards).
	Logger *slog.Logger
	// Tracer starts the span of every call (optional; nil: package
	// tracing's, a no-op unless OTEL_* variables turned traces on).
	Tracer trace.Tracer
	// Now and NewID are for tests (defaults time.Now and UUIDv4).
	Now   func() time.Time
	NewID func() string
}

// toolEntry is one exposed tool.
type toolEntry struct {
	key    string // "server__tool"
	server string
	tool   string
	srv    servers.Server
	def    servers.Tool
}

// Gate is the call pipeline every door hands its calls to.
type Gate struct {
	cfg     Config
	policy  Policy
	esc     escalation.Escalator
	sink    audit.Sink
	charger session.ToolCallCharger
	metrics *metrics.ToolCalls
	log     *slog.Logger
	now     func() time.Time
	newID   func() string

	srvs  []servers.Server
	tools map[string]*toolEntry
	names []string // sorted keys of tools

	fair    *fairGate // fair.go
	life    *lifecycle
	alog    auditLog
	pins    pinState         // external tools hidden by their pins (pins.go)
	watched []servers.Server // servers whose tools are checked against pins
	loop    *loopguard.Guard // nil: no loop breaker (loop.go)
	tracer  trace.Tracer     // trace.go
	// tracingOff: tracer is the no-op tracer; calls start no span.
	tracingOff bool
}

// New builds the gate: it checks every server's tools against the policy's
// annotations (tools without one are not exposed and are logged) and the
// watched servers' tools against their pins.
func New(cfg Config, d Deps) (*Gate, error) {
	switch {
	case d.Policy == nil:
		return nil, errors.New("creating the gate: a policy engine is required")
	case d.Audit == nil:
		return nil, errors.New("creating the gate: an audit sink is required")
	}
	if cfg.MaxResultBytes < 0 || cfg.CallTimeout < 0 || cfg.ProgressEvery < 0 || cfg.ShutdownGrace < 0 || cfg.FairSlots < 0 {
		return nil, errors.New("creating the gate: limits must not be negative")
	}
	cfg = withDefaults(cfg)
	g := &Gate{
		cfg: cfg, policy: d.Policy, esc: d.Escalator, sink: d.Audit, charger: d.Charger,
		metrics: d.Metrics, log: d.Logger, loop: d.LoopGuard, now: d.Now, newID: d.NewID, tracer: d.Tracer,
		srvs: d.Servers, tools: map[string]*toolEntry{}, life: newLifecycle(), fair: newFairGate(cfg.FairSlots),
	}
	if g.esc == nil {
		g.esc = escalation.Deny{}
	}
	if g.log == nil {
		g.log = slog.New(slog.DiscardHandler)
	}
	if g.now == nil {
		g.now = time.Now
	}
	if g.tracer == nil {
		g.tracer = tracing.Tracer(tracerScope)
	}
	g.tracingOff = tracing.Off(g.tracer)
	if g.newID == nil {
		g.newID = uuid.NewString
	}
	g.alog = newAuditLog(g.log, g.now)
	if err := g.register(d.Servers); err != nil {
		return nil, fmt.Errorf("creating the gate: %w", err)
	}
	g.checkPinsAtStart(d.Servers)
	return g, nil
}

// withDefaults fills the zero settings with their defaults.
func withDefaults(cfg Config) Config {
	if cfg.MaxResultBytes == 0 {
		cfg.MaxResultBytes = DefaultMaxResultBytes
	}
	if cfg.CallTimeout == 0 {
		cfg.CallTimeout = DefaultCallTimeout
	}
	if cfg.ProgressEvery == 0 {
		cfg.ProgressEvery = DefaultProgressEvery
	}
	if cfg.ShutdownGrace == 0 {
		cfg.ShutdownGrace = DefaultShutdownGrace
	}
	if cfg.OutcomeWait <= 0 {
		cfg.OutcomeWait = DefaultOutcomeWait
	}
	if cfg.DecisionWait <= 0 {
		cfg.DecisionWait = DefaultDecisionWait
	}
	if cfg.FairSlots == 0 {
		cfg.FairSlots = defaultFairSlots()
	}
	return cfg
}

// register indexes the servers' tools that have an annotation.
func (g *Gate) register(list []servers.Server) error {
	seen := map[string]bool{}
	for _, s := range list {
		name := s.Name()
		if err := checkServerName(name); err != nil {
			return err
		}
		if seen[name] {
			return fmt.Errorf("server %q is configured twice", name)
		}
		seen[name] = true
		for _, t := range s.Tools() {
			if t.Name == "" || strings.ContainsAny(t.Name, " \t\r\n/") {
				return fmt.Errorf("server %q declares a tool with an invalid name %q", name, t.Name)
			}
			key := name + Separator + t.Name
			if _, dup := g.tools[key]; dup {
				return fmt.Errorf("server %q declares tool %q twice", name, t.Name)
			}
			if _, ok := g.policy.Annotation(name, t.Name); !ok {
				g.log.Warn("tool has no policy annotation; it is not exposed", "server", name, "tool", t.Name)
				continue
			}
			g.tools[key] = &toolEntry{key: key, server: name, tool: t.Name, srv: s, def: t}
			g.names = append(g.names, key)
		}
	}
	sort.Strings(g.names)
	return nil
}

// checkServerName refuses names that would make "server__tool" ambiguous.
func checkServerName(name string) error {
	if name == "" || strings.Contains(name, Separator) || strings.HasPrefix(name, "_") || strings.HasSuffix(name, "_") {
		return fmt.Errorf("server name %q is invalid (empty, or contains %q, or starts or ends with '_')", name, Separator)
	}
	for _, r := range name {
		if !(r >= 'a' && r <= 'z' || r >= '0' && r <= '9' || r == '-' || r == '_') {
			return fmt.Errorf("server name %q is invalid: use lower-case letters, digits, '-' and '_'", name)
		}
	}
	return nil
}

// Tools returns the exposed tool names ("server__tool"), sorted (without
// the tools hidden by their pins).
func (g *Gate) Tools() []string {
	out := make([]string, 0, len(g.names))
	for _, k := range g.names {
		if _, hidden := g.pins.changed(k); !hidden {
			out = append(out, k)
		}
	}
	return out
}

// Definition returns the definition the server declared for an exposed
// tool at start.
func (g *Gate) Definition(key string) (servers.Tool, bool) {
	e, ok := g.tools[key]
	if !ok {
		return servers.Tool{}, false
	}
	return e.def, true
}

// EnterFair waits for one of the fair slots of the CPU-heavy stretches of
// a request (fair.go); the returned function gives it back (and may be
// called more than once). It returns ctx's error when ctx ends first.
func (g *Gate) EnterFair(ctx context.Context, sessionID string) (func(), error) {
	return g.fair.enter(ctx, sessionID)
}
