package escalation

import (
	"context"
	"strings"
	"sync"
	"testing"
	"time"

	"ironcurtain.dev/gateway/internal/store/pgtest"
)

// fakeReviewer answers every review with v and records the requests.
type fakeReviewer struct {
	v    Verdict
	mu   sync.Mutex
	reqs []Request
}

func (f *fakeReviewer) Review(_ context.Context, r Request) Verdict {
	f.mu.Lock()
	defer f.mu.Unlock()
	f.reqs = append(f.reqs, r)
	return f.v
}

func (f *fakeReviewer) count() int {
	f.mu.Lock()
	defer f.mu.Unlock()
	return len(f.reqs)
}

func ruleReq(call string) Request {
	r := req(call)
	r.RuleEscalation = true
	return r
}

func TestAutoApproverApproves(t *testing.T) {
	db := pgtest.New(t, pgtest.Migrated())
	p := newTestPG(t, db, Config{})
	ctx := testCtx(t)
	rv := &fakeReviewer{v: Verdict{Approve: true, Outcome: OutcomeApproved, Model: "claude-haiku-4-5", Reasoning: "a workspace file", Tokens: 900, CostUSD: 0.002}}
	p.SetReviewer(rv)
	res, err := p.Escalate(ctx, ruleReq("call-1"))
	if err != nil || !res.Approved || res.DecidedBy != "auto:claude-haiku-4-5" || !strings.Contains(res.Reason, "a workspace file") {
		t.Fatalf("result %+v, %v", res, err)
	}
	e, err := p.Get(ctx, res.ID)
	if err != nil {
		t.Fatal(err)
	}
	if e.Status != StatusApproved || e.ConsumedByCallID != "call-1" || e.Auto == nil || e.Auto.Verdict != VerdictApprove ||
		e.Auto.Outcome != OutcomeApproved || e.Auto.Model != "claude-haiku-4-5" || e.Auto.Tokens != 900 || e.Auto.At.IsZero() {
		t.Fatalf("escalation %+v auto %+v", e, e.Auto)
	}
	list, err := p.List(ctx, ListFilter{Session: "s1"})
	if err != nil || len(list) != 1 || list[0].Auto == nil || list[0].Auto.Reasoning != "a workspace file" {
		t.Fatalf("listing %+v, %v", list, err)
	}
	spent, err := p.AutoSpentSince(ctx, time.Now().Add(-time.Hour))
	if err != nil || spent.Calls != 1 || spent.Tokens != 900 || spent.CostUSD != 0.002 {
		t.Fatalf("spent %+v, %v", spent, err)
	}
}

// TestAutoApproverLeavesToHuman: every verdict but a proper approval leaves
// the escalation pending for a human (never denied), with the verdict kept.
func TestAutoApproverLeavesToHuman(t *testing.T) {
	db := pgtest.New(t, pgtest.Migrated())
	p := newTestPG(t, db, Config{})
	ctx := testCtx(t)
	verdicts := map[string]Verdict{
		"human":                  {Outcome: OutcomeHuman, Model: "m", Reasoning: "unsure"},
		"model denied":           {Outcome: OutcomeModelDenied, Model: "m", Reasoning: "the model answered deny"},
		"malformed":              {Outcome: OutcomeMalformed, Model: "m"},
		"budget":                 {Outcome: OutcomeBudget, Model: "m", Reasoning: "spent"},
		"approve, no name":       {Approve: true, Outcome: OutcomeApproved},
		"approve, wrong outcome": {Approve: true, Outcome: OutcomeTimeout, Model: "m"},
	}
	for name, v := range verdicts {
		t.Run(name, func(t *testing.T) {
			call := "call-h-" + strings.ReplaceAll(name, " ", "-")
			p.SetReviewer(&fakeReviewer{v: v})
			id, done := escalateAsync(t, p, ctx, ruleReq(call))
			e, err := p.Get(ctx, id)
			if err != nil {
				t.Fatal(err)
			}
			if e.Status != StatusPending || e.Auto == nil || e.Auto.Verdict != VerdictHuman || e.Auto.Outcome != v.Outcome {
				t.Fatalf("escalation %+v auto %+v: want pending with a human verdict", e, e.Auto)
			}
			if _, err := p.Decide(ctx, id, Decision{Approve: true, By: "alice", Reason: "looked"}); err != nil {
				t.Fatal(err)
			}
			o := <-done
			if o.err != nil || !o.res.Approved || o.res.DecidedBy != "alice" {
				t.Fatalf("outcome %+v", o)
			}
		})
	}
}

// TestAutoApproverNotConsulted: escalations the auto-approver may not see
// never reach it: structural ones (RuleEscalation false), egress, and a
// retry that re-attaches by call id.
func TestAutoApproverNotConsulted(t *testing.T) {
	db := pgtest.New(t, pgtest.Migrated())
	p := newTestPG(t, db, Config{})
	ctx := testCtx(t)
	rv := &fakeReviewer{v: Verdict{Approve: true, Outcome: OutcomeApproved, Model: "m"}}
	p.SetReviewer(rv)
	structural := req("call-s") // RuleEscalation false
	structural.Rule = "structural-domain-escalate"
	egress := Request{CallID: "call-e", SessionID: "s1", Kind: KindEgress, Args: []byte(`{"host":"x.example"}`), Rule: "egress-escalate", RuleEscalation: true}
	for _, r := range []Request{structural, egress} {
		id, done := escalateAsync(t, p, ctx, r)
		e, err := p.Get(ctx, id)
		if err != nil {
			t.Fatal(err)
		}
		if e.Status != StatusPending || e.Auto != nil {
			t.Fatalf("%s: escalation %+v auto %+v", r.CallID, e, e.Auto)
		}
		if _, err := p.Decide(ctx, id, Decision{Approve: false, By: "alice"}); err != nil {
			t.Fatal(err)
		}
		<-done
	}
	if n := rv.count(); n != 0 {
		t.Fatalf("the reviewer was consulted %d times", n)
	}
	// A retry with the same call id finds its escalation: no new review.
	p.SetReviewer(&fakeReviewer{v: Verdict{Outcome: OutcomeHuman, Model: "m"}})
	id, done := escalateAsync(t, p, ctx, ruleReq("call-r"))
	p.SetReviewer(rv)
	cctx, cancel := context.WithCancel(ctx)
	retry := make(chan outcome, 1)
	go func() { res, err := p.Escalate(cctx, ruleReq("call-r")); retry <- outcome{res: res, err: err} }()
	time.Sleep(200 * time.Millisecond)
	cancel()
	<-retry
	if n := rv.count(); n != 0 {
		t.Fatalf("a re-attaching retry was reviewed %d times", n)
	}
	if _, err := p.Decide(ctx, id, Decision{Approve: false, By: "alice"}); err != nil {
		t.Fatal(err)
	}
	<-done
}

// TestAutoDeciderNeedsApprovingVerdict: Postgres refuses a decision that
// names the auto-approver (decided_by auto:...) on an escalation it did not
// approve — an operator named "auto:x" cannot pass for it either.
func TestAutoDeciderNeedsApprovingVerdict(t *testing.T) {
	db := pgtest.New(t, pgtest.Migrated())
	p := newTestPG(t, db, Config{})
	ctx := testCtx(t)
	p.SetReviewer(&fakeReviewer{v: Verdict{Outcome: OutcomeHuman, Model: "m", Reasoning: "unsure"}})
	id, done := escalateAsync(t, p, ctx, ruleReq("call-c"))
	if _, err := p.Decide(ctx, id, Decision{Approve: true, By: "auto:m"}); err == nil {
		t.Fatal("a decision by auto:m was stored on an escalation the model left to a human")
	}
	if e, err := p.Get(ctx, id); err != nil || e.Status != StatusPending {
		t.Fatalf("escalation %+v, %v: want still pending", e, err)
	}
	if _, err := p.Decide(ctx, id, Decision{Approve: false, By: "alice"}); err != nil {
		t.Fatal(err)
	}
	<-done
}
