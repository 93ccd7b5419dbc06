package gate

import (
	"context"
	"encoding/json"
	"fmt"
	"log/slog"
	"strings"
	"time"
	"unicode/utf8"

	"go.opentelemetry.io/otel/trace"

	"ironcurtain.dev/gateway/internal/audit"
	"ironcurtain.dev/gateway/internal/loopguard"
	"ironcurtain.dev/gateway/internal/metrics"
	"ironcurtain.dev/gateway/internal/servers"
	"ironcurtain.dev/gateway/internal/session"
	"ironcurtain.dev/gateway/internal/tracing"
	"ironcurtain.dev/gateway/policy"
)

// ToolCall is one tool call as the agent made it.
type ToolCall struct {
	Session session.Session
	// Tool is the exposed name, "server__tool".
	Tool string
	// Args are the decoded JSON arguments (read-only).
	Args map[string]any
	// Notify, when set, is told about an escalation the call waits on.
	Notify Notifier
}

// call is the state of one call going through the pipeline.
type call struct {
	g      *Gate
	e      *toolEntry
	sess   session.Session
	id     string
	start  time.Time
	waited time.Duration // time spent waiting for a human
	args   json.RawMessage
	// run, when set, executes the call instead of the server (a call that
	// came through another door: door.go); ran records that it started.
	run func(ctx context.Context) (servers.Result, error)
	ran bool
	// policyVersion names the policy snapshot that decided (policyversion.go).
	policyVersion string
	// span is the call's span, exec its tool's while it runs, traceID the
	// call's trace when sampled (trace.go).
	span, exec trace.Span
	traceID    string
}

// CallTool runs one tool call through the pipeline and returns what the agent
// sees. It never returns a Go error: every failure becomes a short IsError
// result, and every path that does not run the tool refuses.
func (g *Gate) CallTool(ctx context.Context, r ToolCall) servers.Result {
	defer g.life.enter()()
	start := g.now()
	ctx, span := g.startCall(ctx, r.Session.ID)
	defer span.End()
	e, ok := g.tools[r.Tool]
	if !ok {
		return g.RefuseUnknown(ctx, r.Session, r.Tool)
	}
	pol := g.snapshot()
	c := &call{g: g, e: e, sess: r.Session, id: g.newID(), start: start, policyVersion: policyVersion(pol)}
	c.traced(ctx)
	g.recheckOnReload(c.policyVersion)
	if why, hidden := g.pins.changed(e.key); hidden {
		return c.refuseChanged(ctx, r.Args, why) // pins.go
	}
	if ac, ok := pol.(argumentChecker); ok {
		if name, bad := ac.UnknownArgument(e.server, e.tool, r.Args); bad {
			return c.refuseUnknownArgument(ctx, r.Args, name, ac) // argcheck.go
		}
	}
	if res, stop := c.loopGate(ctx, r.Args, r.Notify); stop {
		return res // loop.go
	}

	if _, ok := pol.Annotation(e.server, e.tool); !ok {
		c.args = marshalArgs(r.Args)
		d := policy.Decision{Status: policy.Deny, Rule: policy.RuleUnknownTool, Reason: "the tool has no policy annotation"}
		return c.deny(ctx, c.decision(d, nil))
	}
	if res, refused := c.chargeBudget(ctx, r.Args); refused {
		return res // budget.go
	}
	ev := c.decide(ctx, pol, r)
	dec := c.decision(ev.Decision, ev.Shadow)
	g.metrics.Decision(e.server, e.tool, ev.Decision.Status.String())

	switch ev.Decision.Status {
	case policy.Allow:
		if err := g.record(ctx, dec); err != nil {
			return c.auditFailed(ctx, err)
		}
		return c.forward(ctx, ev, false)
	case policy.Escalate:
		return c.escalate(ctx, ev, r.Args, dec, r.Notify)
	default:
		return c.deny(ctx, dec)
	}
}

// decide evaluates the call and sets its audit form (c.args). This is the
// CPU-heavy stretch of a call: it runs in a fair slot (admission.go). A
// push is decided outside one: its check reads the repository and may
// wait on git.
func (c *call) decide(ctx context.Context, pol Policy, r ToolCall) policy.Evaluation {
	e := c.e
	if !policy.IsPushTool(e.server, e.tool) {
		leave, err := c.g.fair.enter(ctx, r.Session.ID)
		if err != nil {
			c.args = marshalArgs(r.Args)
			return policy.Evaluation{Decision: policy.Decision{Status: policy.Deny, Rule: policy.RuleInternalError, Reason: "the call was cancelled before policy decided"}}
		}
		defer leave()
	}
	ev := c.evaluate(ctx, func(ctx context.Context) policy.Evaluation {
		return pol.Evaluate(ctx, policy.Request{Server: e.server, Tool: e.tool, Args: r.Args, Sandbox: r.Session.Workspace})
	})
	if ev.Policy != nil {
		c.args = marshalArgs(ev.Policy)
	} else {
		c.args = marshalArgs(r.Args)
	}
	return ev
}

// decision builds the write-ahead record of d.
func (c *call) decision(d policy.Decision, shadow *policy.Decision) *audit.ToolCallDecision {
	dec := &audit.ToolCallDecision{
		CallID: c.id, SessionID: c.sess.ID, Time: c.g.now(),
		Server: c.e.server, Tool: c.e.tool, Args: c.args,
		Decision: d.Status.String(), Rule: d.Rule, Reason: d.Reason, Detail: d.Detail,
		PolicyVersion: c.policyVersion, TraceID: c.traceID,
	}
	if c.span != nil && c.span.IsRecording() {
		c.span.SetAttributes(decisionAttrs(d)...)
	}
	if shadow != nil {
		dec.ShadowDecision, dec.ShadowRule = shadow.Status.String(), shadow.Rule
	}
	return dec
}

// deny records a refusal by policy; nothing runs, so a failure to record is
// logged, not shown.
func (c *call) deny(ctx context.Context, dec *audit.ToolCallDecision) servers.Result {
	c.g.recordAfter(ctx, dec)
	msg := fmt.Sprintf("refused %s: %s", c.e.key, agentText(dec.Reason, "policy does not allow it"))
	return c.finish(ctx, audit.OutcomeDenied, servers.ToolError(msg), "", 0, false)
}

// auditFailed refuses a call whose decision could not be recorded. While
// the database is down every call comes here: the log gets a summary
// (auditLog), not a line per call.
func (c *call) auditFailed(ctx context.Context, err error) servers.Result {
	c.g.alog.refused.Fail(1, err)
	c.g.log.DebugContext(ctx, "audit decision not recorded; call refused", "call_id", c.id, "tool", c.e.key, "err", err)
	msg := fmt.Sprintf("refused %s: the gateway could not record the call in its audit log, so it did not run; tell the operator (call %s)", c.e.key, c.id)
	return c.finish(ctx, audit.OutcomeRefused, servers.ToolError(msg), "audit: "+err.Error(), 0, false)
}

// served is what the server goroutine hands back.
type served struct {
	res servers.Result
	err error
}

// forward runs the call on its server with the transport arguments, the
// call's identity and what the policy judged (the policy arguments and a
// push plan, which the git server binds its network operations to) in the
// context, under a timeout; it caps the result and records the outcome.
//
// Once the hub shuts down, no allowed call starts (an approved one still
// does: its approval is used), and calls still running when the shutdown
// grace ends are cancelled.
func (c *call) forward(ctx context.Context, ev policy.Evaluation, approved bool) servers.Result {
	g := c.g
	if g.life.aborting.Err() != nil || (!approved && g.life.stopping.Err() != nil) {
		msg := fmt.Sprintf("%s did not run: the gateway is restarting; retry the call in a moment (call %s)", c.e.key, c.id)
		return c.finish(ctx, audit.OutcomeRefused, servers.ToolError(msg), "gateway shutting down; the call did not start", 0, false)
	}
	args := ev.Transport
	if args == nil {
		args = map[string]any{}
	}
	cctx := servers.WithCallInfo(ctx, servers.CallInfo{
		CallID: c.id, SessionID: c.sess.ID, Approved: approved,
		PolicyArgs: ev.Policy, Push: ev.Push,
	})
	cctx, cancel := context.WithTimeout(cctx, g.cfg.CallTimeout)
	defer cancel()
	defer context.AfterFunc(g.life.aborting, cancel)()
	cctx, c.exec = g.child(cctx, spanExecute)
	done := make(chan served, 1)
	c.ran = true
	go func() {
		defer func() {
			if p := recover(); p != nil {
				done <- served{err: fmt.Errorf("server %s panicked: %v", c.e.server, p)}
			}
		}()
		var res servers.Result
		var err error
		if c.run != nil {
			res, err = c.run(cctx)
		} else {
			res, err = c.e.srv.Call(cctx, c.e.tool, args)
		}
		done <- served{res: res, err: err}
	}()
	var out served
	select {
	case out = <-done:
	case <-cctx.Done():
		if g.life.aborting.Err() != nil && ctx.Err() == nil {
			msg := fmt.Sprintf("%s was interrupted because the gateway is restarting (call %s); it may have partly taken effect: check before retrying", c.e.key, c.id)
			return c.finish(ctx, audit.OutcomeError, servers.ToolError(msg), "gateway shutting down: cancelled after the shutdown grace", 0, false)
		}
		if ctx.Err() != nil {
			msg := fmt.Sprintf("%s was cancelled (call %s)", c.e.key, c.id)
			return c.finish(ctx, audit.OutcomeError, servers.ToolError(msg), "cancelled by the client", 0, false)
		}
		msg := fmt.Sprintf("%s did not finish within %s and was abandoned (call %s)", c.e.key, g.cfg.CallTimeout, c.id)
		return c.finish(ctx, audit.OutcomeTimedOut, servers.ToolError(msg), "timed out", 0, false)
	}
	if out.err != nil {
		g.log.WarnContext(ctx, "tool failed in the gateway", "call_id", c.id, "tool", c.e.key, "err", out.err)
		msg := fmt.Sprintf("%s failed inside the gateway (call %s); the operator can find the detail in the audit log", c.e.key, c.id)
		return c.finish(ctx, audit.OutcomeError, servers.ToolError(msg), out.err.Error(), 0, false)
	}
	res, size, cut := capResult(out.res, g.cfg.MaxResultBytes)
	status := audit.OutcomeOK
	detail := ""
	if res.IsError {
		status = audit.OutcomeError
		detail = firstText(out.res, 1000)
	}
	return c.finish(ctx, status, res, detail, size, cut)
}

// finish records the outcome and the metrics and returns res.
func (c *call) finish(ctx context.Context, status string, res servers.Result, errText string, size int, cut bool) servers.Result {
	g := c.g
	c.finishSpans(status, size)
	elapsed := g.now().Sub(c.start) - c.waited
	g.recordOutcome(ctx, &audit.ToolCallOutcome{
		CallID: c.id, SessionID: c.sess.ID, Time: g.now(), Status: status,
		Duration: elapsed, ResultBytes: size, Truncated: cut, Error: errText,
	})
	g.metrics.Outcome(c.e.server, c.e.tool, status, elapsed)
	c.loopAfter(status)
	return res
}

// DefaultOutcomeWait is Config.OutcomeWait when zero.
const DefaultOutcomeWait = 2 * time.Second

// recordOutcome writes an outcome record in the background and waits for
// it at most Config.OutcomeWait. Once a tool has run, its result must reach
// the agent: a database that is paused or slow must not turn a finished
// call into a transport error the agent would retry (repeating the side
// effect). The audit sink keeps an outcome it cannot write in time (the
// Postgres sink spools it); the hub's shutdown waits for the writes still
// going on (they count as calls in the pipeline).
func (g *Gate) recordOutcome(ctx context.Context, o *audit.ToolCallOutcome) {
	leave := g.life.enter()
	done := make(chan struct{})
	go func() {
		defer leave()
		defer close(done)
		g.recordAfter(ctx, o)
	}()
	t := time.NewTimer(g.cfg.OutcomeWait)
	defer t.Stop()
	select {
	case <-done:
	case <-t.C:
		g.alog.late.Fail(1, fmt.Errorf("outcome of call %s not recorded within %s", o.CallID, g.cfg.OutcomeWait))
	}
}

// DefaultDecisionWait is Config.DecisionWait when zero.
const DefaultDecisionWait = 5 * time.Second

// record writes a record the action depends on (a write-ahead decision):
// its error refuses the action. The wait is bounded by Config.DecisionWait:
// with the database paused, a call must be refused while its agent still
// waits for the answer, not run after the agent gave up (and retried). A
// record that commits after the wait ended leaves a decision whose call
// did not run; the sink records that outcome (audit.UnconfirmedDecision).
func (g *Gate) record(ctx context.Context, e audit.Event) error {
	ctx, span := g.auditSpan(ctx, e)
	ctx, cancel := context.WithTimeout(ctx, g.cfg.DecisionWait)
	defer cancel()
	if err := g.sink.Record(ctx, e); err != nil {
		endSpan(span, err)
		return fmt.Errorf("gate: %w", err)
	}
	span.End()
	g.alog.refused.OK()
	return nil
}

// recordAfter writes a record nothing waits on (a refusal, an outcome),
// even when the client has gone; a failure is logged (summarised).
func (g *Gate) recordAfter(ctx context.Context, e audit.Event) {
	ctx, span := g.auditSpan(ctx, e)
	err := g.sink.Record(context.WithoutCancel(ctx), e)
	endSpan(span, err)
	if err != nil {
		g.alog.lost.Fail(1, err)
		g.log.Debug("audit record failed", "event", fmt.Sprintf("%T", e), "err", err)
		return
	}
	g.alog.lost.OK()
	if _, ok := e.(*audit.ToolCallOutcome); ok {
		g.alog.late.OK()
	}
}

// auditLog summarises audit failures in the log: while the database is
// down, thousands of calls a second may fail alike, and one line per call
// (three, before) drowned the log (issue 11: 236 MB in 65 s).
type auditLog struct {
	refused *audit.FailureSummary // calls refused: their decision was not recorded
	lost    *audit.FailureSummary // records after the decision that were not written
	late    *audit.FailureSummary // answers sent before their outcome was recorded
}

func newAuditLog(log *slog.Logger, now func() time.Time) auditLog {
	return auditLog{
		refused: audit.NewFailureSummary(log, "audit writes", "calls refused", audit.DefaultSummaryEvery, now),
		lost:    audit.NewFailureSummary(log, "audit records after the decision", "records not written", audit.DefaultSummaryEvery, now),
		late:    audit.NewFailureSummary(log, "timely outcome records", "answers sent before their outcome was recorded", audit.DefaultSummaryEvery, now),
	}
}

// RefuseUnknown refuses and records a call to a tool that is not exposed.
func (g *Gate) RefuseUnknown(ctx context.Context, sess session.Session, name string) servers.Result {
	defer g.life.enter()()
	start := g.now()
	name = SafeName(name)
	srv, tool, _ := strings.Cut(name, Separator)
	id := g.newID()
	if span := trace.SpanFromContext(ctx); span.IsRecording() {
		span.SetAttributes(tracing.CallID.String(id), tracing.Tool.String(tracing.Text(name)), tracing.Decision.String(policy.Deny.String()),
			tracing.Rule.String(policy.RuleUnknownTool), tracing.Outcome.String(audit.OutcomeDenied))
	}
	g.metrics.Decision(metrics.UnknownServer, metrics.UnknownTool, policy.Deny.String())
	g.recordAfter(ctx, &audit.ToolCallDecision{
		CallID: id, SessionID: sess.ID, Time: start, Server: srv, Tool: tool, Args: json.RawMessage("{}"),
		Decision: policy.Deny.String(), Rule: policy.RuleUnknownTool, Reason: "no such tool",
		PolicyVersion: policyVersion(g.snapshot()), TraceID: tracing.TraceID(ctx),
	})
	g.recordAfter(ctx, &audit.ToolCallOutcome{CallID: id, SessionID: sess.ID, Time: g.now(), Status: audit.OutcomeDenied, Duration: g.now().Sub(start)})
	g.metrics.Outcome(metrics.UnknownServer, metrics.UnknownTool, audit.OutcomeDenied, g.now().Sub(start))
	if g.loop != nil { // a denial in a row for the loop breaker (loop.go)
		g.loop.After(sess.ID, loopguard.Denied, g.now())
	}
	return servers.ToolError(fmt.Sprintf("refused %s: there is no such tool", name))
}

// RefuseBadArgs refuses a call of an exposed tool (key) whose arguments
// are not a JSON object; sent is what the agent sent, recorded as it was.
func (g *Gate) RefuseBadArgs(ctx context.Context, sess session.Session, key string, sent any) servers.Result {
	e, ok := g.tools[key]
	if !ok {
		return g.RefuseUnknown(ctx, sess, key)
	}
	defer g.life.enter()()
	ctx, span := g.startCall(ctx, sess.ID)
	defer span.End()
	// Record what was sent (an array, a string, a number), not null.
	recorded, err := json.Marshal(sent)
	if err != nil {
		recorded, _ = json.Marshal(map[string]string{"_unencodable": err.Error()})
	}
	c := &call{g: g, e: e, sess: sess, id: g.newID(), start: g.now(), args: recorded, policyVersion: policyVersion(g.snapshot())}
	c.traced(ctx)
	g.metrics.Decision(e.server, e.tool, policy.Deny.String())
	d := policy.Decision{Status: policy.Deny, Rule: policy.RuleInvalidArgument, Reason: "the arguments must be a JSON object"}
	return c.deny(ctx, c.decision(d, nil))
}

// marshalArgs encodes arguments for the audit record. Arguments decoded
// from JSON always encode; anything else is recorded as an error marker.
func marshalArgs(args map[string]any) json.RawMessage {
	if args == nil {
		return json.RawMessage("{}")
	}
	b, err := json.Marshal(args)
	if err != nil {
		b, _ = json.Marshal(map[string]string{"_unencodable": err.Error()})
	}
	return b
}

// agentText returns s cut to a length fit for the agent, or def when empty.
func agentText(s, def string) string {
	s = strings.TrimSpace(s)
	if s == "" {
		return def
	}
	return CutText(s, 500)
}

// SafeName is an agent-chosen name fit for a message and a record: valid
// UTF-8, no control characters, at most 128 bytes.
func SafeName(s string) string {
	s = strings.ToValidUTF8(s, "?")
	s = strings.Map(func(r rune) rune {
		if r < 0x20 || r == 0x7f {
			return '?'
		}
		return r
	}, s)
	return CutText(s, 128)
}

// CutText cuts s to at most n bytes on a character boundary, marking the cut.
func CutText(s string, n int) string {
	if len(s) <= n {
		return s
	}
	for n > 0 && !utf8.RuneStart(s[n]) {
		n--
	}
	return s[:n] + "…"
}

func firstText(r servers.Result, n int) string {
	for _, c := range r.Content {
		if c.Type == "text" {
			return CutText(c.Text, n)
		}
	}
	return ""
}
