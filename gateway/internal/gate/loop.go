package gate

import (
	"context"
	"encoding/json"
	"fmt"
	"strconv"
	"time"

	"ironcurtain.dev/gateway/internal/audit"
	"ironcurtain.dev/gateway/internal/escalation"
	"ironcurtain.dev/gateway/internal/loopguard"
	"ironcurtain.dev/gateway/internal/servers"
	"ironcurtain.dev/gateway/policy"
)

// RuleLoopBreaker is the rule of the records the loop breaker writes: the
// call that paused its session (decision escalate, with the pause's
// escalation) and the calls refused while the session is paused or cooling
// down (decision deny).
const RuleLoopBreaker = "loop-breaker"

// loopGate runs the session's loop breaker (Deps.LoopGuard; package
// loopguard) before policy. It returns stop=true with the answer when the
// call must not go on:
//
//   - the call crossed a limit: it pauses the session and asks a human, by
//     one escalation through the ordinary queue, whether the session may go
//     on. It does not run itself, approved or not (an approval lets the
//     session's next calls through policy as usual; running this one would
//     skip its policy decision): the agent is told to retry it;
//   - the session is paused (another call is waiting for that human) or an
//     operator denied the pause (cooldown): refused at once, with a short
//     message and a deny record.
func (c *call) loopGate(ctx context.Context, args map[string]any, n Notifier) (servers.Result, bool) {
	g := c.g.loop
	if g == nil {
		return servers.Result{}, false
	}
	chk := g.Before(c.sess.ID, c.e.key, loopguard.Digest(c.e.key, args), c.g.now())
	switch chk.Verdict {
	case loopguard.Proceed:
		return servers.Result{}, false
	case loopguard.Trip:
		return c.pauseSession(ctx, args, chk, n), true
	case loopguard.Paused:
		why := "until an operator decides whether it may go on"
		if chk.EscalationID != "" {
			why = "until an operator decides escalation " + chk.EscalationID
		}
		return c.loopRefuse(ctx, args, chk, fmt.Sprintf("this session's tool calls are paused %s (%s)", why, chk.Reason)), true
	case loopguard.Unavailable:
		// Deny: without its state the loop breaker cannot tell whether
		// the session is paused. The state lives with the audit log, so
		// the agent hears the same cause as when the decision cannot be
		// recorded.
		return c.loopRefuse(ctx, args, chk, "the gateway could not read this session's loop-breaker state from its audit log database, so the call did not run; retry shortly"), true
	default:
		return c.loopRefuse(ctx, args, chk, fmt.Sprintf("an operator stopped this session's tool calls until %s (%s)", chk.Until.UTC().Format(time.RFC3339), chk.Reason)), true
	}
}

// loopRefuse records and returns a refusal by the loop breaker.
func (c *call) loopRefuse(ctx context.Context, args map[string]any, chk loopguard.Check, reason string) servers.Result {
	c.args = marshalArgs(args)
	c.g.metrics.Decision(c.e.server, c.e.tool, policy.Deny.String())
	d := policy.Decision{Status: policy.Deny, Rule: RuleLoopBreaker, Reason: reason, Detail: "limit " + chk.Limit}
	return c.deny(ctx, c.decision(d, nil))
}

// pauseSession is the call that crossed a limit: write-ahead decision
// (escalate, rule loop-breaker, the escalation id), one escalation, then the
// guard resumes the session (approved) or cools it down (anything else).
// The wait outlives the agent's request (the pause is the session's, not
// this call's) but not the gateway's shutdown.
func (c *call) pauseSession(ctx context.Context, args map[string]any, chk loopguard.Check, n Notifier) servers.Result {
	g := c.g
	c.args = marshalArgs(args)
	g.metrics.Decision(c.e.server, c.e.tool, policy.Escalate.String())
	cooldown := g.loop.Config().Cooldown
	reason := chk.Reason + fmt.Sprintf(" — approve to let the session go on calling tools; deny to stop its calls for %s", cooldown)
	escID := g.newID()
	if err := g.loop.Escalated(c.sess.ID, escID); err != nil {
		// Other replicas see the pause without its escalation and end it
		// after loopguard.PauseRecordGrace; this replica still waits.
		g.log.Warn("loop breaker: storing the pause's escalation", "session", c.sess.ID, "escalation_id", escID, "err", err)
	}
	dec := c.decision(policy.Decision{Status: policy.Escalate, Rule: RuleLoopBreaker, Reason: reason, Detail: "limit " + chk.Limit}, nil)
	dec.EscalationID = escID
	if err := g.record(ctx, dec); err != nil {
		// No human can see a pause whose record is missing: do not stop
		// the session for it (its calls are refused while the audit log is
		// down anyway).
		g.abandonPause(c.sess.ID, escID)
		return c.auditFailed(ctx, err)
	}
	g.log.Warn("session paused by the loop breaker; waiting for an operator", "session", c.sess.ID, "limit", chk.Limit,
		"reason", chk.Reason, "escalation_id", escID, "call_id", c.id)
	notice := EscalationNotice{EscalationID: escID, Tool: c.e.key, Status: StatusPending, Reason: agentText(chk.Reason, "")}
	notify(ctx, n, notice)

	wctx, cancel := context.WithCancel(context.WithoutCancel(ctx))
	defer cancel()
	defer context.AfterFunc(g.life.stopping, cancel)()
	stop := progressLoop(wctx, n, notice, g.cfg.ProgressEvery)
	waitStart := g.now()
	res, err := g.esc.Escalate(wctx, escalation.Request{
		ID: escID, CallID: c.id, SessionID: c.sess.ID, Kind: escalation.KindToolCall,
		Server: c.e.server, Tool: c.e.tool, Args: pauseArgs(escID, chk.Limit, c.args),
		Rule: RuleLoopBreaker, Reason: reason,
	})
	stop()
	c.waited = g.now().Sub(waitStart)
	if err != nil && g.life.stopping.Err() != nil {
		// The gateway is stopping: nobody decided. In memory the pause
		// ends with this gateway (the next one starts with fresh
		// counters); a shared pause stays, and the replica that next sees
		// the session ends it from its escalation's decision.
		if !g.loop.Shared() {
			g.abandonPause(c.sess.ID, escID)
		}
		notice.Status, notice.Reason = StatusInterrupted, "the gateway is restarting"
		notify(ctx, n, notice)
		msg := fmt.Sprintf("%s did not run: this session was paused (%s) and the gateway restarted while an operator was asked (escalation %s)", c.e.key, agentText(chk.Reason, ""), escID)
		return c.finish(ctx, audit.OutcomeRefused, servers.ToolError(msg), "loop breaker: gateway shutting down; escalation "+escID+" is still pending", 0, false)
	}
	approved := err == nil && res.Approved && (res.Status == "" || res.Status == StatusApproved)
	until, rerr := g.loop.ResolvePause(c.sess.ID, escID, approved, g.now())
	if rerr != nil {
		// The escalation holds the decision: a replica that finds the
		// session paused derives the same end from it.
		g.log.Warn("loop breaker: storing the pause's end", "session", c.sess.ID, "escalation_id", escID, "err", rerr)
	}
	if approved {
		g.log.Info("loop breaker: an operator let the session go on", "session", c.sess.ID, "escalation_id", escID, "decided_by", res.DecidedBy)
		notice.Status, notice.Reason = StatusApproved, "the session may go on"
		notify(ctx, n, notice)
		msg := fmt.Sprintf("%s did not run: this session was paused (%s); an operator let it go on (escalation %s): retry the call if it is still needed", c.e.key, agentText(chk.Reason, ""), escID)
		return c.finish(ctx, audit.OutcomeRefused, servers.ToolError(msg), "loop breaker: paused, then resumed by escalation "+escID+"; the call itself did not run", 0, false)
	}
	detail := "loop breaker: escalation " + escID
	switch {
	case err != nil:
		detail += ": no decision: " + err.Error()
	default:
		detail += " " + res.Status
		if by := decidedBy(res); by != "" {
			detail += " (" + by + ")"
		}
	}
	g.log.Warn("loop breaker: the session's calls stay stopped", "session", c.sess.ID, "escalation_id", escID, "until", until, "detail", detail)
	notice.Status, notice.Reason = StatusDenied, "the session's tool calls are stopped for a while"
	notify(ctx, n, notice)
	msg := fmt.Sprintf("refused %s: this session's tool calls were paused (%s) and an operator stopped them until %s (escalation %s)", c.e.key, agentText(chk.Reason, ""), until.UTC().Format(time.RFC3339), escID)
	return c.finish(ctx, audit.OutcomeDenied, servers.ToolError(msg), detail, 0, false)
}

// abandonPause ends the pause of escID without a decision.
func (g *Gate) abandonPause(session, escID string) {
	if err := g.loop.AbandonPause(session, escID); err != nil {
		g.log.Warn("loop breaker: ending an undecided pause", "session", session, "escalation_id", escID, "err", err)
	}
}

// pauseArgs are the arguments the operator sees on a pause's escalation:
// the limit, the pause's own id and the call that crossed the limit (which
// will not run). The id makes them unique, so no "approve similar" entry
// (exact arguments) ever covers a pause: each one is a human's decision.
func pauseArgs(escID, limit string, call json.RawMessage) json.RawMessage {
	b, err := json.Marshal(struct {
		Pause string          `json:"loop_breaker_pause"`
		Limit string          `json:"limit"`
		Call  json.RawMessage `json:"paused_call"`
	}{escID, limit, call})
	if err != nil {
		b = []byte(`{"loop_breaker_pause":` + strconv.Quote(escID) + `}`)
	}
	return audit.Redact(b)
}

// loopAfter tells the loop breaker what became of a call.
func (c *call) loopAfter(status string) {
	if c.g.loop == nil {
		return
	}
	o := loopguard.Other
	switch status {
	case audit.OutcomeOK, audit.OutcomeError:
		if c.ran {
			o = loopguard.Ran
		}
	case audit.OutcomeDenied:
		o = loopguard.Denied
	}
	c.g.loop.After(c.sess.ID, o, c.g.now())
}
