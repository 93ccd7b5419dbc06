package gate

import (
	"context"
	"fmt"

	"ironcurtain.dev/gateway/internal/audit"
	"ironcurtain.dev/gateway/internal/servers"
	"ironcurtain.dev/gateway/internal/session"
	"ironcurtain.dev/gateway/policy"
)

// WirePolicy decides a git push received over the wire (the git HTTP door);
// *policy.Engine implements it. The hub's Policy must implement it for
// Call.Push to be allowed.
type WirePolicy interface {
	EvaluateWirePush(ctx context.Context, w policy.WirePush) policy.Evaluation
}

var _ WirePolicy = (*policy.Engine)(nil)

// Call is an action that reaches the gateway through another door than
// /mcp (the git smart HTTP door, the GitHub relay). It goes through the one
// pipeline as a call of Tool: the same policy engine, escalation queue and
// audit sink, one write-ahead decision and one outcome, with Run in place of
// the server.
type Call struct {
	Session session.Session
	// Tool is the exposed tool the action counts as ("git__push",
	// "git__fetch"); it must be exposed by the hub.
	Tool string
	// Args are the tool arguments the action is evaluated with (ignored
	// with Push or Refused).
	Args map[string]any
	// Content is what the action sends beside Args (the GitHub relay: a
	// request body's digest and the secrets found in it), evaluated with
	// them (policy.Request.Door).
	Content policy.DoorContent
	// Push, when set, is a push received over the wire: decided by
	// WirePolicy.EvaluateWirePush.
	Push *policy.WirePush
	// Refused, when set, is a refusal the door made before any policy
	// question (a malformed request, a pack that fails fsck, a limit): it
	// is recorded as the decision (Status must be Deny) and nothing runs.
	// Record holds what the record should say about the request.
	Refused *policy.Decision
	Record  map[string]any
	// Notify is told about an escalation the action waits on.
	Notify Notifier
	// Run performs the action once it is allowed (required unless Refused).
	// Its context ends at the hub's call timeout.
	Run func(ctx context.Context) (servers.Result, error)
}

// Result is what became of a Call.
type Result struct {
	// CallID names the call's audit records.
	CallID string
	// Decision is the policy's (or the door's) decision.
	Decision policy.Decision
	// Ran reports whether Run was started (the action may have happened).
	Ran bool
	// Result is Run's result, or the refusal the client should see
	// (IsError, short and safe).
	Result servers.Result
}

// Do runs one Call through the pipeline: decision (policy, or the
// door's own refusal) → escalation → write-ahead record → Run → outcome.
// Every error path refuses and is recorded.
func (g *Gate) Do(ctx context.Context, d Call) Result {
	defer g.life.enter()()
	ctx, span := g.startCall(ctx, d.Session.ID)
	defer span.End()
	e, ok := g.tools[d.Tool]
	if !ok {
		res := g.RefuseUnknown(ctx, d.Session, d.Tool)
		return Result{Decision: policy.Decision{Status: policy.Deny, Rule: policy.RuleUnknownTool, Reason: "no such tool"}, Result: res}
	}
	pol := g.snapshot()
	c := &call{g: g, e: e, sess: d.Session, id: g.newID(), start: g.now(), run: d.Run, policyVersion: policyVersion(pol)}
	c.traced(ctx)
	if res, stop := c.loopGate(ctx, withRecord(d.Args, d.Record), d.Notify); stop { // loop.go
		return Result{CallID: c.id, Decision: policy.Decision{Status: policy.Deny, Rule: RuleLoopBreaker, Reason: firstText(res, 500)}, Result: res}
	}
	if res, refused := c.chargeBudget(ctx, withRecord(d.Args, d.Record)); refused { // budget.go
		return Result{CallID: c.id, Decision: policy.Decision{Status: policy.Deny, Rule: RuleSessionBudget, Reason: firstText(res, 500)}, Result: res}
	}
	var ev policy.Evaluation
	switch {
	case d.Refused != nil:
		ev.Decision = *d.Refused
		if ev.Decision.Status != policy.Deny {
			ev.Decision = policy.Decision{Status: policy.Deny, Rule: policy.RuleInternalError, Reason: "the door's refusal was not a denial", Detail: d.Refused.Reason}
		}
		ev.Policy = d.Record
	case d.Run == nil:
		ev.Decision = policy.Decision{Status: policy.Deny, Rule: policy.RuleInternalError, Reason: "the door supplied nothing to run"}
		ev.Policy = d.Record
	case d.Push != nil:
		wp, ok := pol.(WirePolicy)
		if !ok {
			ev.Decision = policy.Decision{Status: policy.Deny, Rule: policy.RuleInternalError, Reason: "the policy engine cannot decide pushes received over the wire"}
			break
		}
		ev = wp.EvaluateWirePush(ctx, *d.Push)
	default:
		if _, ok := pol.Annotation(e.server, e.tool); !ok {
			ev.Decision = policy.Decision{Status: policy.Deny, Rule: policy.RuleUnknownTool, Reason: "the tool has no policy annotation"}
			ev.Policy = d.Args
			break
		}
		ev = c.evaluate(ctx, func(ctx context.Context) policy.Evaluation {
			return pol.Evaluate(ctx, policy.Request{Server: e.server, Tool: e.tool, Args: d.Args, Sandbox: d.Session.Workspace, Door: d.Content})
		})
		if ev.Policy == nil {
			ev.Policy = d.Args
		}
	}
	c.args = marshalArgs(withRecord(ev.Policy, d.Record))
	dec := c.decision(ev.Decision, ev.Shadow)
	g.metrics.Decision(e.server, e.tool, ev.Decision.Status.String())

	var res servers.Result
	switch ev.Decision.Status {
	case policy.Allow:
		if err := g.record(ctx, dec); err != nil {
			res = c.auditFailed(ctx, err)
			break
		}
		res = c.forward(ctx, ev, false)
	case policy.Escalate:
		res = c.escalate(ctx, ev, d.Args, dec, d.Notify)
	default:
		c.g.recordAfter(ctx, dec)
		msg := fmt.Sprintf("refused: %s", agentText(dec.Reason, "policy does not allow it"))
		res = c.finish(ctx, audit.OutcomeDenied, servers.ToolError(msg), "", 0, false)
	}
	return Result{CallID: c.id, Decision: ev.Decision, Ran: c.ran, Result: res}
}

// withRecord merges what the door says about the request into the recorded
// arguments (the policy's keys win).
func withRecord(pol, rec map[string]any) map[string]any {
	if len(rec) == 0 {
		return pol
	}
	out := make(map[string]any, len(pol)+len(rec))
	for k, v := range rec {
		out[k] = v
	}
	for k, v := range pol {
		out[k] = v
	}
	return out
}
