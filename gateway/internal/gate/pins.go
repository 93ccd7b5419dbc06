package gate

import (
	"context"
	"sort"
	"sync"

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
	// onChange is told of tools hidden or shown once the door lists them
	// (WatchPins).
	onChange func(ToolChange)
}

// changed reports whether key is hidden, and why.
func (p *pinState) changed(key string) (string, bool) {
	p.mu.Lock()
	defer p.mu.Unlock()
	why, ok := p.hidden[key]
	return why, ok
}

// ToolChange is a tool shown again or hidden by a pin check (WatchPins).
type ToolChange struct {
	// Key is the exposed name, "server__tool".
	Key string
	// Shown: the tool matches its pin again; else it is hidden.
	Shown bool
	// Definition is the tool as its server lists it now.
	Definition servers.Tool
}

// checkPinsAtStart hides the watched servers' tools that do not match their
// pins before any door lists them (Tools leaves hidden tools out).
func (g *Gate) checkPinsAtStart(list []servers.Server) {
	for _, s := range list {
		if _, ok := s.(ToolWatcher); ok {
			g.recheckPins(s, false)
		}
	}
}

// WatchPins subscribes to the watched servers' new listings, then checks
// once more (a listing that came between the start check and the
// subscription is not missed). changed is told of every tool hidden or
// shown again from then on (the MCP door updates its tool list); it is
// called with the pin lock held and must not call back into the gate's
// pin checks. Call it once, after the door's listing exists.
func (g *Gate) WatchPins(changed func(ToolChange)) {
	g.pins.onChange = changed
	for _, s := range g.srvs {
		w, ok := s.(ToolWatcher)
		if !ok {
			continue
		}
		g.watched = append(g.watched, s)
		w.OnToolsChanged(func([]servers.Tool) { g.recheckPins(s, true) })
		g.recheckPins(s, true)
	}
	g.pins.version = policyVersion(g.snapshot())
}

// recheckOnReload checks the pins again when the policy in force (v, the
// call's snapshot) is not the one they were checked against: a reload that
// carries new pins (`ironcurtain tools pin`) shows the tools that match them
// from the next call on, and one that drops a pin hides its tool.
func (g *Gate) recheckOnReload(v string) {
	if len(g.watched) == 0 {
		return
	}
	g.pins.mu.Lock()
	same := g.pins.version == v
	g.pins.version = v
	g.pins.mu.Unlock()
	if !same {
		g.RecheckPins()
	}
}

// RecheckPins checks the external servers' current listings against the
// pins of the policy now loaded: after a reload that carries new pins
// (`ironcurtain tools pin`), tools that match them are shown again.
func (g *Gate) RecheckPins() {
	for _, s := range g.watched {
		g.recheckPins(s, true)
	}
}

// recheckPins compares the exposed tools of s with its current listing
// (read under the check lock: a check that started on an older listing can
// never be applied after a newer one). live is false before a door lists
// the tools (WatchPins).
func (g *Gate) recheckPins(s servers.Server, live bool) {
	g.pins.check.Lock()
	defer g.pins.check.Unlock()
	server, tools := s.Name(), s.Tools()
	listed := make(map[string]servers.Tool, len(tools))
	for _, t := range tools {
		listed[t.Name] = t
	}
	for _, key := range g.names {
		e := g.tools[key]
		if e.server != server {
			continue
		}
		t, present := listed[e.tool]
		ann, annotated := g.snapshot().Annotation(e.server, e.tool)
		var chk policy.PinCheck
		switch {
		case !annotated:
			chk = policy.PinCheck{Changed: []string{"unannotated"}}
		case !present:
			chk = policy.PinCheck{Changed: []string{"removed"}}
		default:
			chk = policy.CheckPin(ann, policy.ToolDefinition{Name: t.Name, Description: t.Description, InputSchema: t.InputSchema})
		}
		g.setPinned(e, t, chk, live)
	}
	var added []string
	for name := range listed {
		if _, ok := g.tools[server+Separator+name]; !ok {
			added = append(added, name)
		}
	}
	if len(added) > 0 && live {
		sort.Strings(added)
		g.log.Warn("external server lists tools that were not there at start; they are not exposed", "server", server, "tools", added)
	}
}

// setPinned applies one check: hide a tool that no longer matches (log,
// metric), show again one that matches again.
func (g *Gate) setPinned(e *toolEntry, t servers.Tool, chk policy.PinCheck, live bool) {
	g.pins.mu.Lock()
	defer g.pins.mu.Unlock()
	was, hidden := g.pins.hidden[e.key]
	switch {
	case chk.OK && hidden:
		delete(g.pins.hidden, e.key)
		if live && g.pins.onChange != nil {
			g.pins.onChange(ToolChange{Key: e.key, Shown: true, Definition: t})
		}
		g.log.Info("tool matches its pin again; it is exposed", "server", e.server, "tool", e.tool)
	case !chk.OK && was != chk.String():
		if g.pins.hidden == nil {
			g.pins.hidden = map[string]string{}
		}
		g.pins.hidden[e.key] = chk.String()
		if live && !hidden && g.pins.onChange != nil {
			g.pins.onChange(ToolChange{Key: e.key, Definition: t})
		}
		g.log.Warn("tool definition differs from its pin; it is hidden and its calls are denied until `ironcurtain tools pin` accepts it",
			"server", e.server, "tool", e.tool, "changed", chk.String(), "rule", policy.RuleToolChanged)
		for _, c := range chk.Changed {
			g.metrics.PinMismatch(e.server, e.tool, c)
		}
	}
}

// refuseChanged denies a call to a hidden tool.
func (c *call) refuseChanged(ctx context.Context, args map[string]any, why string) servers.Result {
	c.args = marshalArgs(args)
	c.g.metrics.Decision(c.e.server, c.e.tool, policy.Deny.String())
	d := policy.Decision{Status: policy.Deny, Rule: policy.RuleToolChanged,
		Reason: "the tool's definition changed since an operator reviewed it; it is disabled until it is pinned again",
		Detail: "changed: " + why}
	return c.deny(ctx, c.decision(d, nil))
}
