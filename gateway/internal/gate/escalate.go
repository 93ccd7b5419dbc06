package gate

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"

	"ironcurtain.dev/gateway/internal/audit"
	"ironcurtain.dev/gateway/internal/escalation"
	"ironcurtain.dev/gateway/internal/servers"
	"ironcurtain.dev/gateway/policy"
)

// escalate records the decision (escalate, with the escalation id) write-
// ahead, then asks a human, and runs the call only if the answer is an
// approval.
//
// The escalation id is a new one, or, when the Escalator is a
// escalation.Reuser and an identical earlier call of the session left an
// escalation behind (its waiter is gone: the gateway restarted while it
// waited), that escalation's: this call then waits on it, or runs once on
// its approval, instead of asking again.
//
// Order: the decision row naming the escalation is durable before the
// Escalator creates the escalation operators see, and before this call can
// run on an existing one. The human's answer is recorded by the Escalator in
// the escalation's own row (the Postgres escalator commits the decision, and
// which call used the approval, before it answers), so it is durable before
// the action runs; the outcome row then records what happened. There is
// exactly one decision and one outcome per call id.
//
// When the hub shuts down the call stops waiting at once: the escalation
// stays pending for the next gateway, and the agent is told to retry.
func (c *call) escalate(ctx context.Context, ev policy.Evaluation, agentArgs map[string]any, dec *audit.ToolCallDecision, n Notifier) servers.Result {
	g := c.g
	req := escalation.Request{
		CallID: c.id, SessionID: c.sess.ID, Kind: escalation.KindToolCall,
		Server: c.e.server, Tool: c.e.tool, Args: audit.Redact(c.args),
		Rule: ev.Decision.Rule, Reason: ev.Decision.OperatorReason(), // masked excerpts of secrets: the operator only
		Exact: exactCall(agentArgs, ev.Policy),
		// Only a compiled rule's escalation may go to the auto-approver.
		RuleEscalation: ev.Decision.Compiled,
		PolicyArgs:     policyArgs(ev.Policy),
	}
	if ann, ok := g.snapshot().Annotation(c.e.server, c.e.tool); ok {
		req.Resource = pathResource(ann, agentArgs, ev.Policy) // resource.go
	}
	req.ID, req.Attach = c.escalationID(ctx, req)
	escID := req.ID
	dec.EscalationID = escID
	if err := g.record(ctx, dec); err != nil {
		return c.auditFailed(ctx, err)
	}
	notice := EscalationNotice{EscalationID: escID, Tool: c.e.key, Status: StatusPending, Reason: agentText(ev.Decision.Reason, "policy asks for a human")}
	notify(ctx, n, notice)

	waitStart := g.now()
	wctx, cancelWait := context.WithCancelCause(ctx)
	unwatch := context.AfterFunc(g.life.stopping, func() { cancelWait(errShuttingDown) })
	stop := progressLoop(wctx, n, notice, g.cfg.ProgressEvery)
	wctx, wspan := g.child(wctx, spanEscalation)
	res, err := g.esc.Escalate(wctx, req)
	c.endWait(wspan, escID, res, err)
	stop()
	unwatch()
	interrupted := err != nil && (errors.Is(context.Cause(wctx), errShuttingDown) || errors.Is(err, escalation.ErrShuttingDown))
	cancelWait(nil)
	c.waited = g.now().Sub(waitStart)
	if res.ID != "" && res.ID != escID {
		g.log.WarnContext(ctx, "escalator used its own escalation id", "call_id", c.id, "want", escID, "got", res.ID)
		escID = res.ID
		notice.EscalationID = escID
	}

	approved := err == nil && res.Approved && (res.Status == "" || res.Status == StatusApproved)
	switch {
	case interrupted:
		notice.Status, notice.Reason = StatusInterrupted, "the gateway is restarting; the escalation stays pending"
		notify(ctx, n, notice)
		msg := fmt.Sprintf("%s did not run: the gateway restarted while this call waited for approval of escalation %s; "+
			"it stays pending — retry the same call after an operator approves it", c.e.key, escID)
		return c.finish(ctx, audit.OutcomeRefused, servers.ToolError(msg), "gateway shutting down; escalation "+escID+" is still pending", 0, false)
	case errors.Is(err, escalation.ErrApprovalUsed), errors.Is(err, escalation.ErrApprovalStale):
		why := "was decided before this call could use it"
		if errors.Is(err, escalation.ErrApprovalUsed) {
			why = "was already used by another identical call (an approval runs one call)"
		}
		notice.Status, notice.Reason = StatusRefused, "the escalation "+why
		notify(ctx, n, notice)
		msg := fmt.Sprintf("refused %s: escalation %s %s; retry the call to ask again", c.e.key, escID, why)
		return c.finish(ctx, audit.OutcomeRefused, servers.ToolError(msg), "escalation "+escID+": "+err.Error(), 0, false)
	case err != nil:
		notice.Status, notice.Reason = StatusDenied, "no human decision could be obtained"
		notify(ctx, n, notice)
		msg := fmt.Sprintf("refused %s: it needs a human's approval and no decision could be obtained (escalation %s)", c.e.key, escID)
		return c.finish(ctx, audit.OutcomeRefused, servers.ToolError(msg), "escalation "+escID+": "+err.Error(), 0, false)
	case !approved:
		status := res.Status
		if status == "" || status == StatusApproved {
			status = StatusDenied // approved=false with an approving status: deny
		}
		notice.Status, notice.Reason = status, agentText(res.Reason, "")
		notify(ctx, n, notice)
		detail := "escalation " + escID + " " + status
		if by := decidedBy(res); by != "" {
			detail += " (" + by + ")"
		}
		return c.finish(ctx, audit.OutcomeDenied, servers.ToolError(humanRefusal(c.e.key, escID, status, res.Reason)), detail, 0, false)
	}
	notice.Status, notice.Reason = StatusApproved, agentText(res.Reason, "approved by a human")
	notify(ctx, n, notice)
	return c.forward(ctx, ev, true)
}

// escalationID is the escalation the call will wait on: an identical earlier
// call's (attach) when the Escalator finds one, else a new id. A failed
// lookup opens a new escalation: the call then asks a human.
func (c *call) escalationID(ctx context.Context, req escalation.Request) (id string, attach bool) {
	if r, ok := c.g.esc.(escalation.Reuser); ok && len(req.Exact) > 0 {
		id, err := r.Reusable(ctx, req)
		switch {
		case err != nil:
			c.g.log.Warn("looking for an identical call's escalation failed; asking again", "call_id", c.id, "tool", c.e.key, "err", err)
		case id != "":
			return id, true
		}
	}
	return c.g.newID(), false
}

// exactCall is the exact call an escalation is for: the agent's arguments and
// the policy's (canonicalised) arguments, as canonical JSON (encoding/json
// sorts map keys). Only an identical retry has equal bytes. nil when they do
// not encode: no retry can use the escalation.
func exactCall(agent, pol map[string]any) []byte {
	b, err := json.Marshal(struct {
		Agent  map[string]any `json:"agent"`
		Policy map[string]any `json:"policy"`
	}{agent, pol})
	if err != nil {
		return nil
	}
	return b
}

// policyArgs is the redacted canonical form of the policy's arguments (nil
// when they do not encode).
func policyArgs(pol map[string]any) json.RawMessage {
	if pol == nil {
		return nil
	}
	b, err := json.Marshal(pol)
	if err != nil {
		return nil
	}
	return audit.Redact(b)
}

func decidedBy(res escalation.Result) string {
	if res.DecidedBy == "" {
		return ""
	}
	return "decided by " + res.DecidedBy
}

func humanRefusal(tool, escID, status, reason string) string {
	var why string
	switch status {
	case StatusExpired:
		why = "no one answered in time"
	case StatusCancelled:
		why = "the request for approval was cancelled"
	default:
		why = "a human denied it"
	}
	if r := agentText(reason, ""); r != "" {
		why += ": " + r
	}
	return fmt.Sprintf("refused %s: it needed a human's approval and %s (escalation %s)", tool, why, escID)
}
