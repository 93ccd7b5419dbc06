// Package mcphub is the gateway's MCP door for the agent: one streamable
// HTTP endpoint (/mcp, mark3labs/mcp-go) authenticated by the session's agent
// token, exposing the tools of every built-in and external server as
// "<server>__<tool>". It reads every request strictly (rpcgate.go), admits
// it (admission.go), and hands each tool call to the gate (package gate),
// which decides, escalates, records and runs it; the hub turns the result
// into MCP and sends escalation notices on the MCP session (notify.go).
//
// A tool is listed and callable only if the gate exposes it (its server
// declares it, the policy has an annotation for it, its pin matches).
package mcphub

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"net/http"
	"time"

	"github.com/mark3labs/mcp-go/mcp"
	"github.com/mark3labs/mcp-go/server"
	"go.opentelemetry.io/otel/trace"

	"ironcurtain.dev/gateway/internal/audit"
	"ironcurtain.dev/gateway/internal/escalation"
	"ironcurtain.dev/gateway/internal/gate"
	"ironcurtain.dev/gateway/internal/loopguard"
	"ironcurtain.dev/gateway/internal/metrics"
	"ironcurtain.dev/gateway/internal/servers"
	"ironcurtain.dev/gateway/internal/session"
	"ironcurtain.dev/gateway/strictjson"
)

// Defaults applied when the corresponding Config field is zero (the
// gate's settings take the gate's defaults: gate.Default*).
const (
	DefaultMaxRequestBytes = 4 << 20
	// DefaultSessionIdleTTL ends an MCP session with no request for this
	// long (none in flight, no event stream open); a client that comes back
	// later gets 404 and initializes again, as the protocol says.
	DefaultSessionIdleTTL = 10 * time.Minute
	// DefaultMaxSessions and DefaultMaxSessionsPerToken cap the open MCP
	// sessions (about 16 KB each while open).
	DefaultMaxSessions         = 4096
	DefaultMaxSessionsPerToken = 64
)

// Config holds the hub's settings. MaxResultBytes, CallTimeout,
// ProgressEvery, ShutdownGrace, OutcomeWait and DecisionWait are the gate's
// (gate.Config), set here because the hub builds the gate every door
// shares.
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
	// FairSlots is gate.Config.FairSlots.
	FairSlots int
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
	Policy gate.Policy
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

// Hub is the MCP door.
type Hub struct {
	cfg     Config
	gate    *gate.Gate
	auth    session.Authenticator
	metrics *metrics.ToolCalls
	log     *slog.Logger
	now     func() time.Time

	mcp     *server.MCPServer
	http    *server.StreamableHTTPServer
	handler http.Handler
	owners  sessionOwners
	// inflight and fair are the per-session cap and the fair slots
	// (admission.go); jsonLimits bound a request body (rpcgate.go).
	inflight   *inflight
	fair       fairSlots
	jsonLimits strictjson.Limits
	stopSweep  func()
}

// New builds the gate (package gate: it checks every server's tools against
// the policy's annotations and pins) and the MCP server around it, with one
// handler per exposed tool.
func New(cfg Config, d Deps) (*Hub, error) {
	if d.Auth == nil {
		return nil, errors.New("creating MCP hub: an authenticator is required")
	}
	if cfg.MaxRequestBytes < 0 || cfg.SessionIdleTTL < 0 ||
		cfg.MaxSessions < 0 || cfg.MaxSessionsPerToken < 0 || cfg.MaxCallsInFlight < 0 || cfg.MaxQueuedCalls < 0 || cfg.RefusalDelay < 0 ||
		cfg.JSONLimits.MaxBytes < 0 || cfg.JSONLimits.MaxDepth < 0 || cfg.JSONLimits.MaxMembers < 0 || cfg.JSONLimits.MaxElements < 0 || cfg.JSONLimits.MaxString < 0 {
		return nil, errors.New("creating MCP hub: limits must not be negative")
	}
	charger, _ := d.Auth.(session.ToolCallCharger)
	g, err := gate.New(gate.Config{
		MaxResultBytes: cfg.MaxResultBytes, CallTimeout: cfg.CallTimeout, ProgressEvery: cfg.ProgressEvery,
		ShutdownGrace: cfg.ShutdownGrace, OutcomeWait: cfg.OutcomeWait, DecisionWait: cfg.DecisionWait, FairSlots: cfg.FairSlots,
	}, gate.Deps{
		Servers: d.Servers, Policy: d.Policy, Escalator: d.Escalator, Audit: d.Audit, Charger: charger,
		Metrics: d.Metrics, LoopGuard: d.LoopGuard, Logger: d.Logger, Tracer: d.Tracer, Now: d.Now, NewID: d.NewID,
	})
	if err != nil {
		return nil, fmt.Errorf("creating MCP hub: %w", err)
	}
	cfg = withAdmissionDefaults(cfg)
	if cfg.MaxRequestBytes == 0 {
		cfg.MaxRequestBytes = DefaultMaxRequestBytes
	}
	if cfg.SessionIdleTTL == 0 {
		cfg.SessionIdleTTL = DefaultSessionIdleTTL
	}
	if cfg.Version == "" {
		cfg.Version = "dev"
	}
	h := &Hub{cfg: cfg, gate: g, auth: d.Auth, metrics: d.Metrics, log: d.Logger, now: d.Now}
	if h.log == nil {
		h.log = slog.New(slog.DiscardHandler)
	}
	if h.now == nil {
		h.now = time.Now
	}
	h.inflight = newInflight(cfg.MaxCallsInFlight, cfg.MaxQueuedCalls)
	h.fair = fairSlots{g}
	h.jsonLimits = cfg.JSONLimits
	h.owners = sessionOwners{maxAgent: cfg.MaxSessionsPerToken, maxTotal: cfg.MaxSessions, onCount: h.metrics.MCPSessions}
	h.buildMCP()
	g.WatchPins(h.toolChanged)
	return h, nil
}

// Gate returns the call pipeline the hub hands its calls to; the other
// doors (git smart HTTP, the GitHub relay) share it.
func (h *Hub) Gate() *gate.Gate { return h.gate }

// Tools returns the exposed tool names ("server__tool"), sorted (without
// the tools hidden by their pins).
func (h *Hub) Tools() []string { return h.gate.Tools() }

// CallRequest is one tool call as the agent made it.
type CallRequest = gate.ToolCall

// Call runs one tool call through the gate and returns what the agent sees
// (gate.Gate.CallTool).
func (h *Hub) Call(ctx context.Context, r CallRequest) servers.Result {
	return h.gate.CallTool(ctx, r)
}

// RecheckPins checks the external servers' current listings against the
// pins of the policy now loaded (gate.Gate.RecheckPins).
func (h *Hub) RecheckPins() { h.gate.RecheckPins() }

// toolChanged updates the tool list when the gate hides a tool whose
// definition no longer matches its pin, or shows it again.
func (h *Hub) toolChanged(c gate.ToolChange) {
	if c.Shown {
		h.mcp.AddTool(mcp.NewToolWithRawSchema(c.Key, c.Definition.Description, c.Definition.InputSchema), h.toolHandler(c.Key))
		return
	}
	h.mcp.DeleteTools(c.Key)
}

// fairSlots are the gate's fair slots, which the strict read of a request
// body takes too (auth.go).
type fairSlots struct{ g *gate.Gate }

func (f fairSlots) enter(ctx context.Context, sess string) (func(), error) {
	return f.g.EnterFair(ctx, sess)
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
	for _, key := range h.gate.Tools() {
		def, _ := h.gate.Definition(key)
		tool := mcp.NewToolWithRawSchema(key, def.Description, def.InputSchema)
		h.mcp.AddTool(tool, h.toolHandler(key))
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

// toolHandler adapts the gate to mcp-go.
func (h *Hub) toolHandler(key string) server.ToolHandlerFunc {
	return func(ctx context.Context, req mcp.CallToolRequest) (*mcp.CallToolResult, error) {
		sess, ok := session.FromContext(ctx)
		if !ok {
			// The authentication middleware always sets it; refuse if not.
			return mcp.NewToolResultError("refused: the call carries no agent session"), nil
		}
		args, ok := callArgs(req)
		var res servers.Result
		if !ok {
			res = h.gate.RefuseBadArgs(ctx, sess, key, req.Params.Arguments)
		} else {
			res = h.gate.CallTool(ctx, gate.ToolCall{Session: sess, Tool: key, Args: args, Notify: h.mcpNotifier(ctx, req)})
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
	h.gate.RefuseUnknown(ctx, sess, req.Params.Name)
}
