package escalation

import (
	"context"
	"errors"
	"testing"
	"time"

	"ironcurtain.dev/gateway/internal/store"
	"ironcurtain.dev/gateway/internal/store/pgtest"
)

// exactReq is req(call) with the exact call the hub would pass: the secret
// is in it (redaction hides it from args, not from the exact call).
func exactReq(call, secret string) Request {
	r := req(call)
	r.Args = []byte(`{"path":"/w/src/a.txt","token":"` + secret + `"}`)
	r.Exact = []byte(`{"agent":{"path":"a.txt","token":"` + secret + `"},"policy":{"path":"/w/src/a.txt","token":"` + secret + `"}}`)
	return r
}

func attachTo(r Request, id string) Request { r.ID, r.Attach = id, true; return r }

// orphan opens an escalation for r on a gateway that then stops: the call
// gets ErrShuttingDown and the row stays pending with nobody waiting.
func orphan(t *testing.T, db *pgtest.DB, ctx context.Context, r Request) string {
	t.Helper()
	a, err := NewPG(db.Pool, Config{}, nil, nil)
	if err != nil {
		t.Fatal(err)
	}
	waitListening(t, a)
	id, done := escalateAsync(t, a, ctx, r)
	_ = a.Close()
	if o := <-done; !errors.Is(o.err, ErrShuttingDown) {
		t.Fatalf("waiting call on a stopped gateway = %+v, want ErrShuttingDown", o)
	}
	return id
}

// TestRetryRunsOnceOnOrphanedApproval: the gateway stops while c1 waits;
// the operator approves plainly afterwards; the identical retry c2 finds
// the escalation, runs on it, and the row records c2 as the call that used
// it. The approval is single use: the interrupted call itself (same call
// id) and a third identical call do not run on it.
func TestRetryRunsOnceOnOrphanedApproval(t *testing.T) {
	db := pgtest.New(t, pgtest.Migrated())
	ctx := testCtx(t)
	id := orphan(t, db, ctx, exactReq("c1", "s3cret"))
	b := newTestPG(t, db, Config{Timeout: time.Second, ReuseWindow: time.Minute})
	if _, err := b.Decide(ctx, id, Decision{Approve: true, By: "alice", Reason: "after the restart"}); err != nil {
		t.Fatal(err)
	}

	got, err := b.Reusable(ctx, exactReq("c2", "s3cret"))
	if err != nil || got != id {
		t.Fatalf("Reusable(identical retry) = %q, %v; want %s", got, err, id)
	}
	res, err := b.Escalate(ctx, attachTo(exactReq("c2", "s3cret"), id))
	if err != nil || !res.Approved || res.ID != id || res.DecidedBy != "alice" {
		t.Fatalf("retry = %+v, %v; want the operator's approval of %s", res, err, id)
	}
	e, err := b.Get(ctx, id)
	if err != nil || e.ConsumedByCallID != "c2" || e.ConsumedAt == nil || e.CallID != "c1" {
		t.Fatalf("escalation after the retry = %+v, %v; want consumed by c2", e, err)
	}

	t.Run("the interrupted call does not run on it too", func(t *testing.T) {
		if _, err := b.Escalate(ctx, exactReq("c1", "s3cret")); !errors.Is(err, ErrApprovalUsed) {
			t.Fatalf("re-attach of c1 = %v, want ErrApprovalUsed", err)
		}
	})
	t.Run("a second identical retry asks again", func(t *testing.T) {
		if got, err := b.Reusable(ctx, exactReq("c3", "s3cret")); err != nil || got != "" {
			t.Fatalf("Reusable after use = %q, %v; want none", got, err)
		}
		res, err := b.Escalate(ctx, exactReq("c3", "s3cret"))
		if err != nil || res.Approved || res.ID == id || res.Status != StatusExpired {
			t.Fatalf("second retry = %+v, %v; want a new escalation that waits (and expires)", res, err)
		}
	})
	t.Run("a stale attach is refused", func(t *testing.T) {
		if _, err := b.Escalate(ctx, attachTo(exactReq("c4", "s3cret"), id)); !errors.Is(err, ErrApprovalUsed) {
			t.Fatalf("attach to a used approval = %v, want ErrApprovalUsed", err)
		}
	})
}

// TestRetryAttachesToPending: the retry arrives while the orphaned
// escalation is still pending: it waits on that same escalation (no
// duplicate for the operator) and runs on its approval.
func TestRetryAttachesToPending(t *testing.T) {
	db := pgtest.New(t, pgtest.Migrated())
	ctx := testCtx(t)
	id := orphan(t, db, ctx, exactReq("c1", "s3cret"))
	b := newTestPG(t, db, Config{})
	got, err := b.Reusable(ctx, exactReq("c2", "s3cret"))
	if err != nil || got != id {
		t.Fatalf("Reusable = %q, %v; want the pending %s", got, err, id)
	}
	done := make(chan outcome, 1)
	go func() {
		res, err := b.Escalate(ctx, attachTo(exactReq("c2", "s3cret"), id))
		done <- outcome{res: res, err: err}
	}()
	time.Sleep(100 * time.Millisecond)
	pending, err := b.List(ctx, ListFilter{Status: StatusPending})
	if err != nil || len(pending) != 1 || pending[0].ID != id {
		t.Fatalf("pending while the retry waits = %+v, %v; want only %s", pending, err, id)
	}
	if _, err := b.Decide(ctx, id, Decision{Approve: true, By: "alice"}); err != nil {
		t.Fatal(err)
	}
	select {
	case o := <-done:
		if o.err != nil || !o.res.Approved || o.res.ID != id {
			t.Fatalf("attached retry = %+v", o)
		}
	case <-time.After(20 * time.Second):
		t.Fatal("the attached retry was not woken by the approval")
	}
	if e, _ := b.Get(ctx, id); e.ConsumedByCallID != "c2" {
		t.Fatalf("consumed by %q, want c2", e.ConsumedByCallID)
	}
}

// TestDeniedOrphanAsksAgain: a denial of the orphaned escalation does not
// deny the retry: it opens a new escalation that a human decides.
func TestDeniedOrphanAsksAgain(t *testing.T) {
	db := pgtest.New(t, pgtest.Migrated())
	ctx := testCtx(t)
	id := orphan(t, db, ctx, exactReq("c1", "s3cret"))
	b := newTestPG(t, db, Config{})
	if _, err := b.Decide(ctx, id, Decision{By: "alice", Reason: "not now"}); err != nil {
		t.Fatal(err)
	}
	if got, err := b.Reusable(ctx, exactReq("c2", "s3cret")); err != nil || got != "" {
		t.Fatalf("Reusable of a denied orphan = %q, %v; want none", got, err)
	}
	second, done := escalateAsync(t, b, ctx, exactReq("c2", "s3cret"))
	if second == id {
		t.Fatal("the retry reused the denied escalation")
	}
	if _, err := b.Decide(ctx, second, Decision{Approve: true, By: "bob"}); err != nil {
		t.Fatal(err)
	}
	if o := <-done; o.err != nil || !o.res.Approved || o.res.ID != second {
		t.Fatalf("retry = %+v, want approved on its own escalation %s", o, second)
	}
	if t.Failed() {
		return
	}
	t.Run("an attach to the denied escalation is refused", func(t *testing.T) {
		if _, err := b.Escalate(ctx, attachTo(exactReq("c3", "s3cret"), id)); !errors.Is(err, ErrApprovalStale) {
			t.Fatalf("attach to a denied escalation = %v, want ErrApprovalStale", err)
		}
	})
}

// TestOneApprovalOneCall: the original call still waits (its gateway is
// alive) and an identical call attaches to the same escalation; one
// approval runs exactly one of them, the other is refused.
func TestOneApprovalOneCall(t *testing.T) {
	db := pgtest.New(t, pgtest.Migrated())
	ctx := testCtx(t)
	p := newTestPG(t, db, Config{})
	id, first := escalateAsync(t, p, ctx, exactReq("c1", "s3cret"))
	got, err := p.Reusable(ctx, exactReq("c2", "s3cret"))
	if err != nil || got != id {
		t.Fatalf("Reusable = %q, %v; want %s", got, err, id)
	}
	second := make(chan outcome, 1)
	go func() {
		res, err := p.Escalate(ctx, attachTo(exactReq("c2", "s3cret"), id))
		second <- outcome{res: res, err: err}
	}()
	time.Sleep(100 * time.Millisecond)
	if _, err := p.Decide(ctx, id, Decision{Approve: true, By: "alice"}); err != nil {
		t.Fatal(err)
	}
	outs := []outcome{<-first, <-second}
	var ran, used int
	for _, o := range outs {
		switch {
		case o.err == nil && o.res.Approved:
			ran++
		case errors.Is(o.err, ErrApprovalUsed):
			used++
		default:
			t.Errorf("unexpected outcome %+v", o)
		}
	}
	if ran != 1 || used != 1 {
		t.Fatalf("ran %d, refused as used %d; want 1 and 1", ran, used)
	}
	if e, _ := p.Get(ctx, id); e.ConsumedByCallID != "c1" && e.ConsumedByCallID != "c2" {
		t.Fatalf("consumed by %q", e.ConsumedByCallID)
	}
}

// TestOwnCallUsesItsApproval: the ordinary flow records the call that ran.
func TestOwnCallUsesItsApproval(t *testing.T) {
	db := pgtest.New(t, pgtest.Migrated())
	ctx := testCtx(t)
	p := newTestPG(t, db, Config{})
	id, done := escalateAsync(t, p, ctx, exactReq("c1", "s3cret"))
	if _, err := p.Decide(ctx, id, Decision{Approve: true, By: "alice"}); err != nil {
		t.Fatal(err)
	}
	if o := <-done; o.err != nil || !o.res.Approved {
		t.Fatalf("outcome = %+v", o)
	}
	if e, _ := p.Get(ctx, id); e.ConsumedByCallID != "c1" {
		t.Fatalf("consumed by %q, want c1", e.ConsumedByCallID)
	}
	if got, _ := p.Reusable(ctx, exactReq("c2", "s3cret")); got != "" {
		t.Fatalf("Reusable after the own call ran = %q, want none", got)
	}
}

// TestReusableOnlyForTheIdenticalCall: a hijacked agent (or another
// session) must not ride on an approval by changing what it asks for.
func TestReusableOnlyForTheIdenticalCall(t *testing.T) {
	tests := []struct {
		name  string
		retry Request
		cfg   Config
		setup func(t *testing.T, p *PG, ctx context.Context, id string)
		// wantAttach is the error of an attach forced past Reusable (nil:
		// no error, and the call is not approved either).
		wantAttach error
	}{
		{name: "other secret, equal redacted args", retry: exactReq("c2", "other-secret"), wantAttach: ErrInvalidRequest},
		{name: "other session", retry: withSession(exactReq("c2", "s3cret"), "s2"), wantAttach: ErrInvalidRequest},
		{name: "other tool", retry: withTool(exactReq("c2", "s3cret"), "write_file"), wantAttach: ErrInvalidRequest},
		{name: "other redacted args", retry: withArgs(exactReq("c2", "s3cret"), `{"path":"/w/src/b.txt"}`), wantAttach: ErrInvalidRequest},
		{name: "no exact call", retry: func() Request { r := exactReq("c2", "s3cret"); r.Exact = nil; return r }(), wantAttach: ErrInvalidRequest},
		{name: "egress kind", retry: func() Request { r := exactReq("c2", "s3cret"); r.Kind = KindEgress; return r }(), wantAttach: ErrInvalidRequest},
		{name: "approval older than the reuse window", retry: exactReq("c2", "s3cret"), cfg: Config{ReuseWindow: 200 * time.Millisecond}, wantAttach: ErrApprovalStale,
			setup: func(t *testing.T, p *PG, ctx context.Context, id string) {
				if _, err := p.Decide(ctx, id, Decision{Approve: true, By: "alice"}); err != nil {
					t.Fatal(err)
				}
				time.Sleep(400 * time.Millisecond)
			}},
		{name: "pending past its deadline", retry: exactReq("c2", "s3cret"),
			setup: func(t *testing.T, p *PG, ctx context.Context, id string) {
				if _, err := p.pool.Exec(ctx, `UPDATE escalations SET expires_at = now() - interval '1 second' WHERE id = $1`, id); err != nil {
					t.Fatal(err)
				}
			}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			db := pgtest.New(t, pgtest.Migrated())
			ctx := testCtx(t)
			id := orphan(t, db, ctx, exactReq("c1", "s3cret"))
			p := newTestPG(t, db, tt.cfg)
			if tt.setup != nil {
				tt.setup(t, p, ctx, id)
			}
			if got, err := p.Reusable(ctx, tt.retry); err != nil || got != "" {
				t.Fatalf("Reusable = %q, %v; want none", got, err)
			}
			// Forcing the attach gets no approval either.
			res, err := p.Escalate(ctx, attachTo(tt.retry, id))
			if res.Approved || !errors.Is(err, tt.wantAttach) {
				t.Fatalf("forced attach = %+v, %v; want not approved, error %v", res, err, tt.wantAttach)
			}
			if e, _ := p.Get(ctx, id); e.ConsumedByCallID != "" {
				t.Fatalf("the forced attach used the approval (consumed by %s)", e.ConsumedByCallID)
			}
		})
	}
}

// TestMigrationMarksOldApprovalsUsed: approvals given before migration 0004
// were handed to their calls; no retry may use them afterwards.
func TestMigrationMarksOldApprovalsUsed(t *testing.T) {
	db := pgtest.New(t, pgtest.MigratedTo(3))
	ctx := testCtx(t)
	if _, err := db.Pool.Exec(ctx, `INSERT INTO escalations (id, call_id, session_id, kind, status, expires_at, decided_at, decided_by)
VALUES ('old-ok', 'c-old', 's1', 'tool_call', 'approved', now() + interval '1 hour', now(), 'alice'),
       ('old-pending', 'c-pending', 's1', 'tool_call', 'pending', now() + interval '1 hour', NULL, '')`); err != nil {
		t.Fatal(err)
	}
	if _, err := store.MigrateUp(ctx, db.Pool, 0); err != nil {
		t.Fatal(err)
	}
	p := newTestPG(t, db, Config{})
	tests := []struct {
		id, wantConsumedBy string
	}{
		{id: "old-ok", wantConsumedBy: "c-old"},
		{id: "old-pending", wantConsumedBy: ""},
	}
	for _, tt := range tests {
		t.Run(tt.id, func(t *testing.T) {
			e, err := p.Get(ctx, tt.id)
			if err != nil || e.ConsumedByCallID != tt.wantConsumedBy {
				t.Fatalf("%s consumed by %q (%v), want %q", tt.id, e.ConsumedByCallID, err, tt.wantConsumedBy)
			}
		})
	}
}
