// Package mcphub is the gateway's MCP endpoint for the agent: one streamable
// HTTP endpoint (/mcp, mark3labs/mcp-go) authenticated by the session's agent
// token, exposing the tools of every built-in and external server as
// "<server>__<tool>", and the one call pipeline every tool call goes through:
//
//	look up the annotation → policy.Evaluate (transport and policy args)
//	→ write-ahead audit decision (a failure refuses the call)
//	→ escalate: the decision naming the escalation is durable before the
//	  escalation exists; the human's answer is durable in the escalation's
//	  own row (the Escalator's) before anything runs
//	→ forward to the server (per-call timeout, CallInfo in the context)
//	→ size-capped result → audit outcome, metrics.
//
// An identical retry of a call whose wait for a human was cut short (the
// gateway restarted) waits on, or runs once on, that call's escalation
// (escalate.go). Shutdown answers every waiting call at once and gives
// running calls a bounded grace (shutdown.go).
//
// A tool is listed and callable only if its server declares it and the policy
// engine has an annotation for it. What reaches the agent on a refusal is
// short and says what was refused and why; the detail goes to the audit
// record.
package mcphub

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"net/http"
	"sort"
	"strings"
	"time"

	"github.com/google/uuid"
	"github.com/mark3labs/mcp-go/mcp"
	"github.com/mark3labs/mcp-go/server"
	"go.opentelemetry.io/otel/trace"

	"ironcurtain.dev/gateway/internal/audit"
	"ironcurtain.dev/gateway/internal/escalation"
	"ironcurtain.dev/gateway/internal/loopguard"
	"ironcurtain.dev/gateway/internal/metrics"
	"ironcurtain.dev/gateway/internal/servers"
	"ironcurtain.dev/gateway/internal/session"
	"ironcurtain.dev/gateway/internal/tracing"
	"ironcurtain.dev/gateway/policy"
	"ironcurtain.dev/gateway/strictjson"
)

// Defaults applied when the corresponding Config field is zero.
const (
	DefaultMaxResultBytes  = 1 << 20
	DefaultCallTimeout     = 2 * time.Minute
	DefaultMaxRequestBytes = 4 << 20
	// DefaultSessionIdleTTL ends an MCP session with no request for this
	// long (none in flight, no event stream open); a client that comes back
	// later gets 404 and initializes again, as the protocol says.
	DefaultSessionIdleTTL = 10 * time.Minute
	// DefaultMaxSessions and DefaultMaxSessionsPerToken cap the open MCP
	// sessions (about 16 KB each while open).
	DefaultMaxSessions         = 4096
	DefaultMaxSessionsPerToken = 64
	DefaultProgressEvery       = 15 * time.Second
	// Separator joins server and tool names in the names the agent sees.
	Separator = "__"
)

// Policy is what the hub needs of the policy engine; *policy.Engine
// implements it.
type Policy interface {
	Annotation(server, tool string) (policy.ToolAnnotation, bool)
	Evaluate(ctx context.Context, r policy.Request) policy.Evaluation
}

var _ Policy = (*policy.Engine)(nil)

// Config holds the hub's settings.
type Config struct {
	// MaxResultBytes caps the text and data of one tool result; a larger
	// result is cut and the cut is marked.
	MaxResultBytes int
	// CallTimeout bounds the server's work on one call (not the time a
	// human takes to answer an escalation).
	CallTimeout time.Duration
	// MaxRequestBytes caps the body of one request to /mcp.
	MaxRequestBytes int64
	// SessionIdleTTL ends MCP sessions idle this long.
	SessionIdleTTL time.Duration
	// MaxSessions and MaxSessionsPerToken cap the open MCP sessions, in
	// all and per agent token; an initialize past a cap is refused (429).
	MaxSessions         int
	MaxSessionsPerToken int
	// MaxCallsInFlight caps the requests of one agent session in flight;
	// up to MaxQueuedCalls more wait their turn, the rest are refused (429).
	MaxCallsInFlight int
	MaxQueuedCalls   int
	// RefusalDelay is how long a request refused before parsing (bad
	// JSON, a shape past JSONLimits, unknown names) waits for its answer,
	// holding its place among the session's requests in flight.
	RefusalDelay time.Duration
	// JSONLimits bound the shape of one request body (depth, members,
	// elements, string length), checked while it is read; zero fields take
	// DefaultJSON* (MaxBytes and MaxString: MaxRequestBytes).
	JSONLimits strictjson.Limits
	// ProgressEvery is how often a call waiting for a human sends a progress
	// notification (when the request carried a progress token).
	ProgressEvery time.Duration
	// Version is reported to clients in serverInfo.
	Version string
	// ShutdownGrace is how long Shutdown lets calls running on a server
	// finish before it cancels them (calls waiting for a human stop at once).
	ShutdownGrace time.Duration
	// OutcomeWait bounds how long a finished call's answer waits for its
	// outcome record; past it the record goes on in the background
	// (pipeline.go: finish).
	OutcomeWait time.Duration // DecisionWait bounds the write-ahead decision record; past it the
	// call is refused and never runs, even if the record commits later
	// (pipeline.go: record).
	DecisionWait time.Duration
}

// Deps are the hub's collaborators.
type Deps struct {
	// Servers are the tool servers, built-in and external (required).
	Servers []servers.Server
	// Policy decides every call (required).
	Policy Policy
	// Escalator asks a human; nil means escalation.Deny{}.
	Escalator escalation.Escalator
	// Audit records decisions and outcomes (required).
	Audit audit.Sink
	// Auth maps agent tokens to sessions (required).
	Auth session.Authenticator
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

// Hub is the MCP endpoint and the call pipeline.
type Hub struct {
	cfg     Config
	policy  Policy
	esc     escalation.Escalator
	sink    audit.Sink
	auth    session.Authenticator
	metrics *metrics.ToolCalls
	log     *slog.Logger
	now     func() time.Time
	newID   func() string

	tools map[string]*toolEntry
	names []string // sorted keys of tools

	mcp     *server.MCPServer
	http    *server.StreamableHTTPServer
	handler http.Handler
	owners  sessionOwners
	// inflight and fair are the per-session cap and the fair slots
	// (admission.go); jsonLimits bound a request body (rpcgate.go).
	inflight   *inflight
	fair       *fairGate
	jsonLimits strictjson.Limits
	stopSweep  func()
	life       *lifecycle
	alog       auditLog
	pins       pinState         // external tools hidden by their pins (pins.go)
	watched    []servers.Server // servers whose tools are checked against pins
	loop       *loopguard.Guard // nil: no loop breaker (loop.go)
	tracer     trace.Tracer     // trace.go
	// tracingOff: tracer is the no-op tracer; calls start no span.
	tracingOff bool
}

// New builds the hub: it checks every server's tools against the policy's
// annotations (tools without one are not exposed and are logged) and
// registers the rest with the MCP server.
func New(cfg Config, d Deps) (*Hub, error) {
	switch {
	case d.Policy == nil:
		return nil, errors.New("creating MCP hub: a policy engine is required")
	case d.Audit == nil:
		return nil, errors.New("creating MCP hub: an audit sink is required")
	case d.Auth == nil:
		return nil, errors.New("creating MCP hub: an authenticator is required")
	}
	if cfg.MaxResultBytes < 0 || cfg.CallTimeout < 0 || cfg.MaxRequestBytes < 0 || cfg.SessionIdleTTL < 0 || cfg.ProgressEvery < 0 || cfg.ShutdownGrace < 0 ||
		cfg.MaxSessions < 0 || cfg.MaxSessionsPerToken < 0 || cfg.MaxCallsInFlight < 0 || cfg.MaxQueuedCalls < 0 || cfg.RefusalDelay < 0 ||
		cfg.JSONLimits.MaxBytes < 0 || cfg.JSONLimits.MaxDepth < 0 || cfg.JSONLimits.MaxMembers < 0 || cfg.JSONLimits.MaxElements < 0 || cfg.JSONLimits.MaxString < 0 {
		return nil, errors.New("creating MCP hub: limits must not be negative")
	}
	cfg = withAdmissionDefaults(cfg)
	if cfg.MaxResultBytes == 0 {
		cfg.MaxResultBytes = DefaultMaxResultBytes
	}
	if cfg.CallTimeout == 0 {
		cfg.CallTimeout = DefaultCallTimeout
	}
	if cfg.MaxRequestBytes == 0 {
		cfg.MaxRequestBytes = DefaultMaxRequestBytes
	}
	if cfg.SessionIdleTTL == 0 {
		cfg.SessionIdleTTL = DefaultSessionIdleTTL
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
	if cfg.Version == "" {
		cfg.Version = "dev"
	}
	h := &Hub{
		cfg: cfg, policy: d.Policy, esc: d.Escalator, sink: d.Audit, auth: d.Auth,
		metrics: d.Metrics, log: d.Logger, loop: d.LoopGuard, now: d.Now, newID: d.NewID, tracer: d.Tracer,
		tools: map[string]*toolEntry{}, life: newLifecycle(),
	}
	if h.esc == nil {
		h.esc = escalation.Deny{}
	}
	if h.log == nil {
		h.log = slog.New(slog.DiscardHandler)
	}
	if h.now == nil {
		h.now = time.Now
	}
	if h.tracer == nil {
		h.tracer = tracing.Tracer(tracerScope)
	}
	h.tracingOff = tracing.Off(h.tracer)
	if h.newID == nil {
		h.newID = uuid.NewString
	}
	h.alog = newAuditLog(h.log, h.now)
	h.inflight = newInflight(cfg.MaxCallsInFlight, cfg.MaxQueuedCalls)
	h.fair = newFairGate(defaultFairSlots())
	h.jsonLimits = cfg.JSONLimits
	h.owners = sessionOwners{maxAgent: cfg.MaxSessionsPerToken, maxTotal: cfg.MaxSessions, onCount: h.metrics.MCPSessions}
	if err := h.register(d.Servers); err != nil {
		return nil, fmt.Errorf("creating MCP hub: %w", err)
	}
	h.checkPinsAtStart(d.Servers)
	h.buildMCP()
	h.watchPins(d.Servers)
	return h, nil
}

// register indexes the servers' tools that have an annotation.
func (h *Hub) register(list []servers.Server) error {
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
			if _, dup := h.tools[key]; dup {
				return fmt.Errorf("server %q declares tool %q twice", name, t.Name)
			}
			if _, ok := h.policy.Annotation(name, t.Name); !ok {
				h.log.Warn("tool has no policy annotation; it is not exposed", "server", name, "tool", t.Name)
				continue
			}
			h.tools[key] = &toolEntry{key: key, server: name, tool: t.Name, srv: s, def: t}
			h.names = append(h.names, key)
		}
	}
	sort.Strings(h.names)
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
func (h *Hub) Tools() []string {
	out := make([]string, 0, len(h.names))
	for _, k := range h.names {
		if _, hidden := h.pins.changed(k); !hidden {
			out = append(out, k)
		}
	}
	return out
}

// buildMCP creates the mcp-go server with one handler per exposed tool and
// the streamable HTTP transport around it.
func (h *Hub) buildMCP() {
	hooks := &server.Hooks{}
	hooks.AddOnError(h.onMCPError)
	h.mcp = server.NewMCPServer("ironcurtain", h.cfg.Version,
		server.WithToolCapabilities(false),
		server.WithLogging(),
		server.WithHooks(hooks),
		server.WithRecovery(),
		server.WithInstructions("Tools of the IronCurtain gateway. Every call is checked by policy, "+
			"recorded, and may wait for a human's approval."),
	)
	for _, key := range h.names {
		if _, hidden := h.pins.changed(key); hidden {
			continue
		}
		e := h.tools[key]
		tool := mcp.NewToolWithRawSchema(key, e.def.Description, e.def.InputSchema)
		h.mcp.AddTool(tool, h.toolHandler(e))
	}
	h.startSweeper()
	h.http = server.NewStreamableHTTPServer(h.mcp,
		// The hub ends idle sessions (admission.go: startSweeper); mcp-go's
		// own sweeper is a backstop for state the hub does not know of.
		server.WithSessionIdleTTL(max(6*h.cfg.SessionIdleTTL, time.Hour)),
		server.WithStreamableHTTPLogger(h.log),
	)
	h.handler = h.authenticate(h.http)
}

// Handler returns the /mcp handler (authentication included) for the
// agent-facing listener.
func (h *Hub) Handler() http.Handler { return h.handler }

// toolHandler adapts the pipeline to mcp-go.
func (h *Hub) toolHandler(e *toolEntry) server.ToolHandlerFunc {
	return func(ctx context.Context, req mcp.CallToolRequest) (*mcp.CallToolResult, error) {
		sess, ok := session.FromContext(ctx)
		if !ok {
			// The authentication middleware always sets it; refuse if not.
			return mcp.NewToolResultError("refused: the call carries no agent session"), nil
		}
		args, ok := callArgs(req)
		var res servers.Result
		if !ok {
			res = h.refuseBadArgs(ctx, sess, e, req.Params.Arguments)
		} else {
			res = h.Call(ctx, CallRequest{Session: sess, Tool: e.key, Args: args, Notify: h.mcpNotifier(ctx, req)})
		}
		return toMCPResult(res), nil
	}
}

// callArgs returns the call's arguments: absent or null is an empty object,
// anything but an object is refused.
func callArgs(req mcp.CallToolRequest) (map[string]any, bool) {
	switch a := req.Params.Arguments.(type) {
	case nil:
		return map[string]any{}, true
	case map[string]any:
		return a, true
	default:
		return nil, false
	}
}

// onMCPError records calls to tools that do not exist (mcp-go answers them
// with a JSON-RPC error before any handler runs).
func (h *Hub) onMCPError(ctx context.Context, _ any, method mcp.MCPMethod, message any, err error) {
	if method != mcp.MethodToolsCall || !errors.Is(err, server.ErrToolNotFound) {
		return
	}
	req, ok := message.(*mcp.CallToolRequest)
	if !ok {
		return
	}
	sess, _ := session.FromContext(ctx)
	h.recordUnknown(ctx, sess, req.Params.Name)
}
