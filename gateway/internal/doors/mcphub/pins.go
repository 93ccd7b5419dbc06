package mcphub

import (
	"context"
	"sort"
	"sync"

	"github.com/mark3labs/mcp-go/mcp"

	"ironcurtain.dev/gateway/internal/servers"
	"ironcurtain.dev/gateway/policy"
)

// Tool pinning (rug-pull defence). An external server's tools come from
// outside the binary and may change between restarts or while it runs; the
// annotation of each carries the pin of the definition an operator reviewed
// (policy.ToolPin: the hash of name, description and input schema). At start
// and whenever the server lists its tools again (ToolWatcher: after
// notifications/tools/list_changed or a restart), a tool whose listed
// definition does not match its pin, or has none, is hidden from tools/list
// and its calls are denied (policy.RuleToolChanged) until it matches again
// (the server reverts, or the operator pins it with `ironcurtain tools pin`
// and the gateway loads the new annotations). Built-in servers are pinned by
// the binary: their definitions are compiled in (builtin's pin test).

// ToolWatcher is implemented by servers whose tool definitions come from
// outside the binary (external.Server): the hub checks their tools against
// their pins, at start and on every new listing.
type ToolWatcher interface {
	OnToolsChanged(func(tools []servers.Tool))
}

// pinState holds the tools hidden because their definition is not the
// pinned one: "server__tool" → what changed ("description,schema", …).
type pinState struct {
	// check serialises whole checks, so that the latest listing is always
	// the one applied last (each check reads the server's current tools).
	check  sync.Mutex
	mu     sync.Mutex
	hidden map[string]string
	// version is the policy version the pins were last checked against.
	version string
}

// changed reports whether key is hidden, and why.
func (p *pinState) changed(key string) (string, bool) {
	p.mu.Lock()
	defer p.mu.Unlock()
	why, ok := p.hidden[key]
	return why, ok
}

// checkPinsAtStart hides the watched servers' tools that do not match their
// pins before the MCP server is built (buildMCP skips hidden tools).
func (h *Hub) checkPinsAtStart(list []servers.Server) {
	for _, s := range list {
		if _, ok := s.(ToolWatcher); ok {
			h.recheckPins(s, false)
		}
	}
}

// watchPins subscribes to the watched servers' new listings, then checks
// once more (a listing that came between the start check and the
// subscription is not missed).
func (h *Hub) watchPins(list []servers.Server) {
	for _, s := range list {
		w, ok := s.(ToolWatcher)
		if !ok {
			continue
		}
		h.watched = append(h.watched, s)
		w.OnToolsChanged(func([]servers.Tool) { h.recheckPins(s, true) })
		h.recheckPins(s, true)
	}
	h.pins.version = policyVersion(h.snapshot())
}

// recheckOnReload checks the pins again when the policy in force (v, the
// call's snapshot) is not the one they were checked against: a reload that
// carries new pins (`ironcurtain tools pin`) shows the tools that match them
// from the next call on, and one that drops a pin hides its tool.
func (h *Hub) recheckOnReload(v string) {
	if len(h.watched) == 0 {
		return
	}
	h.pins.mu.Lock()
	same := h.pins.version == v
	h.pins.version = v
	h.pins.mu.Unlock()
	if !same {
		h.RecheckPins()
	}
}

// RecheckPins checks the external servers' current listings against the
// pins of the policy now loaded: after a reload that carries new pins
// (`ironcurtain tools pin`), tools that match them are shown again.
func (h *Hub) RecheckPins() {
	for _, s := range h.watched {
		h.recheckPins(s, true)
	}
}

// recheckPins compares the exposed tools of s with its current listing
// (read under the check lock: a check that started on an older listing can
// never be applied after a newer one). live is false before the MCP server
// exists.
func (h *Hub) recheckPins(s servers.Server, live bool) {
	h.pins.check.Lock()
	defer h.pins.check.Unlock()
	server, tools := s.Name(), s.Tools()
	listed := make(map[string]servers.Tool, len(tools))
	for _, t := range tools {
		listed[t.Name] = t
	}
	for _, key := range h.names {
		e := h.tools[key]
		if e.server != server {
			continue
		}
		t, present := listed[e.tool]
		ann, annotated := h.snapshot().Annotation(e.server, e.tool)
		var chk policy.PinCheck
		switch {
		case !annotated:
			chk = policy.PinCheck{Changed: []string{"unannotated"}}
		case !present:
			chk = policy.PinCheck{Changed: []string{"removed"}}
		default:
			chk = policy.CheckPin(ann, policy.ToolDefinition{Name: t.Name, Description: t.Description, InputSchema: t.InputSchema})
		}
		h.setPinned(e, t, chk, live)
	}
	var added []string
	for name := range listed {
		if _, ok := h.tools[server+Separator+name]; !ok {
			added = append(added, name)
		}
	}
	if len(added) > 0 && live {
		sort.Strings(added)
		h.log.Warn("external server lists tools that were not there at start; they are not exposed", "server", server, "tools", added)
	}
}

// setPinned applies one check: hide a tool that no longer matches (log,
// metric), show again one that matches again.
func (h *Hub) setPinned(e *toolEntry, t servers.Tool, chk policy.PinCheck, live bool) {
	h.pins.mu.Lock()
	defer h.pins.mu.Unlock()
	was, hidden := h.pins.hidden[e.key]
	switch {
	case chk.OK && hidden:
		delete(h.pins.hidden, e.key)
		if live {
			h.mcp.AddTool(mcp.NewToolWithRawSchema(e.key, t.Description, t.InputSchema), h.toolHandler(e))
		}
		h.log.Info("tool matches its pin again; it is exposed", "server", e.server, "tool", e.tool)
	case !chk.OK && was != chk.String():
		if h.pins.hidden == nil {
			h.pins.hidden = map[string]string{}
		}
		h.pins.hidden[e.key] = chk.String()
		if live && !hidden {
			h.mcp.DeleteTools(e.key)
		}
		h.log.Warn("tool definition differs from its pin; it is hidden and its calls are denied until `ironcurtain tools pin` accepts it",
			"server", e.server, "tool", e.tool, "changed", chk.String(), "rule", policy.RuleToolChanged)
		for _, c := range chk.Changed {
			h.metrics.PinMismatch(e.server, e.tool, c)
		}
	}
}

// refuseChanged denies a call to a hidden tool.
func (c *call) refuseChanged(ctx context.Context, args map[string]any, why string) servers.Result {
	c.args = marshalArgs(args)
	c.h.metrics.Decision(c.e.server, c.e.tool, policy.Deny.String())
	d := policy.Decision{Status: policy.Deny, Rule: policy.RuleToolChanged,
		Reason: "the tool's definition changed since an operator reviewed it; it is disabled until it is pinned again",
		Detail: "changed: " + why}
	return c.deny(ctx, c.decision(d, nil))
}
