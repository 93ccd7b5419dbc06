package autoapprove

import (
	"context"
	"os"
	"sync"
	"testing"
	"time"

	"ironcurtain.dev/gateway/internal/escalation"
	"ironcurtain.dev/gateway/internal/store"
	"ironcurtain.dev/gateway/internal/store/pgtest"
)

func TestMain(m *testing.M) { os.Exit(pgtest.Main(m)) }

func insertCall(t *testing.T, db *pgtest.DB, session, call string, seq int, tool, decision, rule string) {
	t.Helper()
	_, err := db.Pool.Exec(context.Background(), `
INSERT INTO tool_calls (call_id, session_id, seq, at, server, tool, args, decision, rule, reason, prev_hash, hash)
VALUES ($1, $2, $3::bigint, now() - make_interval(secs => 100 - $3::float8), 'filesystem', $4, '{"path":"/workspace/secret-arg"}', $5, $6, 'agent-visible reason', '\x00'::bytea, '\x00'::bytea)`,
		call, session, seq, tool, decision, rule)
	if err != nil {
		t.Fatal(err)
	}
}

// TestPGHistory: a session's recent decisions, newest first, without the
// call under review, other sessions' calls or any argument.
func TestPGHistory(t *testing.T) {
	db := pgtest.New(t, pgtest.Migrated())
	insertCall(t, db, "s1", "c1", 1, "read_file", "allow", "allow-reads")
	insertCall(t, db, "s1", "c2", 2, "write_file", "deny", "structural-protected-path")
	insertCall(t, db, "s2", "x1", 1, "read_file", "allow", "allow-reads")
	insertCall(t, db, "s1", "c3", 3, "delete_file", "escalate", "escalate-deletes")
	got, err := PGHistory{Pool: db.Pool}.Recent(context.Background(), "s1", "c3", 10)
	if err != nil {
		t.Fatal(err)
	}
	if len(got) != 2 || got[0].Tool != "filesystem__write_file" || got[0].Decision != "deny" || got[0].Rule != "structural-protected-path" ||
		got[1].Tool != "filesystem__read_file" || got[0].At.Before(got[1].At) {
		t.Fatalf("recent = %+v", got)
	}
	if got, err := (PGHistory{Pool: db.Pool}).Recent(context.Background(), "s1", "", 1); err != nil || len(got) != 1 || got[0].Tool != "filesystem__delete_file" {
		t.Fatalf("limit 1: %+v, %v", got, err)
	}
}

// TestApproverWithEscalator: the Approver installed on the Postgres
// escalator approves a compiled rule's escalation (decided_by
// auto:<model>, the call runs once on it), leaves one to a human as a
// pending row with the verdict, and is never asked about a structural one.
func TestApproverWithEscalator(t *testing.T) {
	db := pgtest.New(t, pgtest.Migrated())
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	p, err := escalation.NewPG(db.Pool, escalation.Config{PollInterval: 100 * time.Millisecond}, nil, nil)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = p.Close() })
	f := newFakeModel(t, `{"verdict":"approve","reasoning":"a note in the workspace"}`)
	a, err := New(testConfig(t, f, nil), Deps{History: PGHistory{Pool: db.Pool}})
	if err != nil {
		t.Fatal(err)
	}
	p.SetReviewer(a)

	r := ruleReq()
	res, err := p.Escalate(ctx, r)
	if err != nil || !res.Approved || res.DecidedBy != "auto:claude-haiku-4-5" {
		t.Fatalf("escalate: %+v, %v", res, err)
	}
	e, err := p.Get(ctx, res.ID)
	if err != nil || e.ConsumedByCallID != r.CallID || e.Auto == nil || e.Auto.Verdict != "approve" || e.Auto.Tokens != 940 {
		t.Fatalf("escalation %+v (auto %+v), %v", e, e.Auto, err)
	}

	f.mu.Lock()
	f.answer = `{"verdict":"human","reasoning":"unsure"}`
	f.mu.Unlock()
	r2 := ruleReq()
	r2.CallID = "c2"
	wctx, wcancel := context.WithCancel(ctx)
	go func() { _, _ = p.Escalate(wctx, r2) }()
	var pending []escalation.Escalation
	for range 100 {
		if pending, err = p.List(ctx, escalation.ListFilter{Status: escalation.StatusPending}); err == nil && len(pending) == 1 {
			break
		}
		time.Sleep(50 * time.Millisecond)
	}
	wcancel()
	if len(pending) != 1 || pending[0].Auto == nil || pending[0].Auto.Verdict != "human" || pending[0].Auto.Reasoning != "unsure" {
		t.Fatalf("pending %+v", pending)
	}

	calls := f.calls.Load()
	structural := ruleReq()
	structural.CallID, structural.RuleEscalation, structural.Rule = "c3", false, "structural-domain-escalate"
	sctx, scancel := context.WithTimeout(ctx, 500*time.Millisecond)
	_, _ = p.Escalate(sctx, structural)
	scancel()
	if f.calls.Load() != calls {
		t.Fatal("a structural escalation reached the model")
	}
	spent, err := p.AutoSpentSince(ctx, a.DayStart())
	if err != nil || spent.Calls != 2 || spent.Tokens != 1880 {
		t.Fatalf("spent %+v, %v", spent, err)
	}
}

// TestOneBudgetForTwoReplicas: two approvers (two replicas) on one
// database spend from one daily budget: concurrent reviews on both make
// exactly CallsPerDay model calls; the rest are left to a human (budget).
// A second replica's start-up seed does not count the day again, and an
// unreachable budget never lets the model be asked.
func TestOneBudgetForTwoReplicas(t *testing.T) {
	db := pgtest.New(t, pgtest.Migrated())
	ctx := context.Background()
	f := newFakeModel(t, `{"verdict":"approve","reasoning":"fine"}`)
	const perDay = 5
	replica := func() *Approver {
		a, err := New(testConfig(t, f, func(c *Config) { c.Budget.CallsPerDay = perDay; c.MaxConcurrent = 20 }),
			Deps{History: fakeHistory{}, Budget: store.AutoApproverBudget{Pool: db.Pool}})
		if err != nil {
			t.Fatal(err)
		}
		return a
	}
	a, b := replica(), replica()
	if err := a.Seed(ctx, escalation.AutoSpend{Calls: 1}); err != nil {
		t.Fatal(err)
	}
	if err := b.Seed(ctx, escalation.AutoSpend{Calls: 1}); err != nil { // the day is counted: no-op
		t.Fatal(err)
	}
	var wg sync.WaitGroup
	verdicts := make(chan escalation.Verdict, 20)
	for i := range 20 {
		wg.Add(1)
		go func() {
			defer wg.Done()
			r := []*Approver{a, b}[i%2]
			verdicts <- r.Review(ctx, ruleReq())
		}()
	}
	wg.Wait()
	close(verdicts)
	approved, budget := 0, 0
	for v := range verdicts {
		switch {
		case v.Approve:
			approved++
		case v.Outcome == escalation.OutcomeBudget:
			budget++
		default:
			t.Errorf("verdict %+v", v)
		}
	}
	if approved != perDay-1 || budget != 20-(perDay-1) || f.calls.Load() != perDay-1 {
		t.Fatalf("approved %d, budget %d, model calls %d; want %d, %d, %d (one call seeded)", approved, budget, f.calls.Load(), perDay-1, 20-(perDay-1), perDay-1)
	}
	var calls, tokens int64
	if err := db.Pool.QueryRow(ctx, `SELECT calls, tokens FROM auto_approver_budget`).Scan(&calls, &tokens); err != nil {
		t.Fatal(err)
	}
	if calls != perDay || tokens != int64(perDay-1)*940 {
		t.Fatalf("stored spend: %d calls, %d tokens", calls, tokens)
	}

	// The budget cannot be read: a human decides, the model is not asked.
	if _, err := db.Pool.Exec(ctx, `ALTER TABLE auto_approver_budget RENAME TO auto_approver_budget_gone`); err != nil {
		t.Fatal(err)
	}
	before := f.calls.Load()
	if v := replica().Review(ctx, ruleReq()); v.Approve || v.Outcome != escalation.OutcomeError || f.calls.Load() != before {
		t.Fatalf("with the budget unreachable: %+v (model calls %d → %d)", v, before, f.calls.Load())
	}
}
