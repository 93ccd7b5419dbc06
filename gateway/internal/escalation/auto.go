package escalation

import (
	"context"
	"fmt"
	"strings"
	"time"
	"unicode/utf8"

	"ironcurtain.dev/gateway/internal/audit"
)

// Reviewer is the auto-approver (package autoapprove): a model that sees a
// new escalation before a human is asked and may approve it or leave it to a
// human — never deny it. The PG escalator consults it only for a call that a
// compiled policy rule escalated (Request.RuleEscalation): never for a
// structural check, a deny, an egress request or any escalation made outside
// the policy engine (Eligible).
//
// Review must not fail: every error, timeout or exhausted budget is a
// Verdict that leaves the call to a human.
type Reviewer interface {
	Review(ctx context.Context, req Request) Verdict
}

// Outcomes of a review (Verdict.Outcome, escalations.auto_outcome).
const (
	OutcomeApproved    = "approved"     // the model approved: the call runs without a human
	OutcomeHuman       = "human"        // the model left it to a human
	OutcomeModelDenied = "model_denied" // the model answered "deny", which it may not: a human decides
	OutcomeMalformed   = "malformed"    // the answer was not the fixed JSON object
	OutcomeError       = "error"        // the model API failed (status, network, decoding)
	OutcomeTimeout     = "timeout"      // the model did not answer in time
	OutcomeBudget      = "budget"       // the daily budget is spent: the model was not asked
	OutcomeRateLimited = "rate_limited" // the rate limit was reached: the model was not asked
	OutcomeTooLarge    = "too_large"    // the call is too large to show whole: the model was not asked
)

// Verdicts stored in escalations.auto_verdict.
const (
	VerdictApprove = "approve"
	VerdictHuman   = "human"
)

// MaxReasoningChars bounds the model's reasoning stored on an escalation.
const MaxReasoningChars = 1000

// Verdict is a Reviewer's answer. Only Approve with Outcome OutcomeApproved
// lets the call run without a human.
type Verdict struct {
	Approve   bool
	Outcome   string // Outcome* constant
	Model     string // the model asked (or that would have been asked)
	Reasoning string // the model's reasoning, or why it was not asked
	Tokens    int64  // tokens the call used (input + output)
	CostUSD   float64
}

// approves reports whether v lets the call run: an approval with the
// approved outcome and a model name (what decided_by names).
func (v Verdict) approves() bool {
	return v.Approve && v.Outcome == OutcomeApproved && v.Model != ""
}

// AutoReview is the auto-approver's verdict as stored on an escalation and
// shown to operators.
type AutoReview struct {
	Verdict   string    `json:"verdict"` // approve | human
	Outcome   string    `json:"outcome"`
	Model     string    `json:"model"`
	Reasoning string    `json:"reasoning,omitempty"`
	At        time.Time `json:"at"`
	Tokens    int64     `json:"tokens,omitempty"`
	CostUSD   float64   `json:"cost_usd,omitempty"`
}

// Eligible reports whether req may be shown to the auto-approver: a tool
// call that a compiled policy rule escalated, opening a new escalation.
func Eligible(req Request) bool {
	return req.Kind == KindToolCall && req.RuleEscalation && !req.Attach
}

type reviewerBox struct{ r Reviewer }

// SetReviewer installs the auto-approver (nil removes it). New eligible
// escalations consult it before a human is asked.
func (p *PG) SetReviewer(r Reviewer) {
	if r == nil {
		p.reviewer.Store(nil)
		return
	}
	p.reviewer.Store(&reviewerBox{r})
}

// reviewFunc returns the review of req to run when its escalation is
// created, or nil when no reviewer is consulted for it.
func (p *PG) reviewFunc(ctx context.Context, req Request) func() Verdict {
	b := p.reviewer.Load()
	if b == nil || !Eligible(req) {
		return nil
	}
	return func() Verdict { return b.r.Review(ctx, req) }
}

// autoColumns are the stored review (appended to escalationColumns).
const autoColumns = `auto_verdict, auto_outcome, auto_model, auto_reasoning, auto_at, auto_tokens, auto_cost_usd`

// autoScan receives the auto columns of a row.
type autoScan struct {
	verdict, outcome, model, reasoning *string
	at                                 *time.Time
	tokens                             *int64
	cost                               *float64
}

func (a *autoScan) dest() []any {
	return []any{&a.verdict, &a.outcome, &a.model, &a.reasoning, &a.at, &a.tokens, &a.cost}
}

func (a *autoScan) review() *AutoReview {
	if a.verdict == nil {
		return nil
	}
	r := &AutoReview{Verdict: *a.verdict}
	if a.outcome != nil {
		r.Outcome = *a.outcome
	}
	if a.model != nil {
		r.Model = *a.model
	}
	if a.reasoning != nil {
		r.Reasoning = *a.reasoning
	}
	if a.at != nil {
		r.At = *a.at
	}
	if a.tokens != nil {
		r.Tokens = *a.tokens
	}
	if a.cost != nil {
		r.CostUSD = *a.cost
	}
	return r
}

// autoParams are the INSERT parameters of a stored review (all NULL
// without one).
func autoParams(v *Verdict) []any {
	if v == nil {
		return []any{nil, nil, nil, nil, nil, nil}
	}
	verdict := VerdictHuman
	if v.approves() {
		verdict = VerdictApprove
	}
	return []any{verdict, v.Outcome, audit.RedactString(boundText(v.Model, 200)),
		audit.RedactString(boundText(v.Reasoning, MaxReasoningChars)), max(v.Tokens, 0), max(v.CostUSD, 0)}
}

// autoDecision is the status, decided_by and decision_reason of a new
// escalation the reviewer approved.
func autoDecision(v Verdict) (status, by, why string) {
	reason := "approved by the auto-approver"
	if r := strings.TrimSpace(boundText(v.Reasoning, MaxReasoningChars)); r != "" {
		reason += ": " + r
	}
	return StatusApproved, "auto:" + boundText(v.Model, 200), reason
}

// boundText cuts s to at most n characters (valid UTF-8 kept valid; invalid
// bytes replaced) and removes NUL, which Postgres text cannot hold.
func boundText(s string, n int) string {
	s = strings.ToValidUTF8(strings.ReplaceAll(s, "\x00", ""), "\uFFFD")
	if utf8.RuneCountInString(s) <= n {
		return s
	}
	i := 0
	for k := range s {
		if i == n {
			return s[:k]
		}
		i++
	}
	return s
}

// AutoSpend is what the auto-approver spent since a time, from the stored
// reviews of every replica.
type AutoSpend struct {
	Calls   int64 // reviews that asked the model
	Tokens  int64
	CostUSD float64
}

// AutoSpentSince sums the reviews stored since t that asked the model (the
// auto-approver seeds its daily budget with it at start).
func (p *PG) AutoSpentSince(ctx context.Context, t time.Time) (AutoSpend, error) {
	var s AutoSpend
	err := p.pool.QueryRow(ctx, `
SELECT count(*), coalesce(sum(auto_tokens), 0)::bigint, coalesce(sum(auto_cost_usd), 0)::float8
FROM escalations
WHERE auto_at >= $1 AND auto_outcome NOT IN ('budget', 'rate_limited', 'too_large')`, t).Scan(&s.Calls, &s.Tokens, &s.CostUSD)
	if err != nil {
		return AutoSpend{}, fmt.Errorf("reading the auto-approver's spend: %w", err)
	}
	return s, nil
}
