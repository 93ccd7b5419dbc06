package gate

import (
	"context"
	"errors"
	"fmt"

	"ironcurtain.dev/gateway/internal/servers"
	"ironcurtain.dev/gateway/internal/session"
	"ironcurtain.dev/gateway/policy"
)

// RuleSessionBudget is the rule of a call refused by the session's own
// tool-call budget (a minted session's, `ironcurtain sessions create
// --max-tool-calls`).
const RuleSessionBudget = "session.budget"

// chargeBudget counts the call against the session's tool-call budget, on
// every door, before the policy decides. A spent budget, or one that cannot
// be checked (the store failed, nothing counts the session's calls), refuses
// the call with a recorded deny.
func (c *call) chargeBudget(ctx context.Context, args map[string]any) (servers.Result, bool) {
	b := c.sess.Budget
	if b == nil || b.MaxToolCalls <= 0 {
		return servers.Result{}, false
	}
	var err error
	var used, limit int64
	if c.g.charger != nil {
		used, limit, err = c.g.charger.ChargeToolCall(ctx, c.sess.ID)
	} else {
		err = session.ErrNoCharger
	}
	if err == nil {
		return servers.Result{}, false
	}
	c.args = marshalArgs(args)
	d := policy.Decision{Status: policy.Deny, Rule: RuleSessionBudget}
	if errors.Is(err, session.ErrBudgetSpent) {
		d.Reason = fmt.Sprintf("the session's tool-call budget is spent (%d of %d calls); an operator can mint a new session", used, limit)
	} else {
		d.Reason = "the gateway could not check the session's tool-call budget"
		d.Detail = err.Error()
		c.g.log.Warn("tool-call budget not checked; call refused", "session", c.sess.ID, "call_id", c.id, "err", err)
	}
	return c.deny(ctx, c.decision(d, nil)), true
}
