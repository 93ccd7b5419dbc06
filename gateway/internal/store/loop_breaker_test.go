package store_test

import (
	"context"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"ironcurtain.dev/gateway/internal/loopguard"
	"ironcurtain.dev/gateway/internal/store"
	"ironcurtain.dev/gateway/internal/store/pgtest"
)

// twoReplicas returns two guards sharing db's loop-breaker state.
func twoReplicas(t testing.TB, db *pgtest.DB, cfg loopguard.Config) (a, b *loopguard.Guard) {
	t.Helper()
	mk := func() *loopguard.Guard {
		g, err := loopguard.NewShared(cfg, nil, store.LoopBreaker{Pool: db.Pool})
		if err != nil {
			t.Fatal(err)
		}
		return g
	}
	return mk(), mk()
}

func pauseEscalation(t *testing.T, db *pgtest.DB, id, session, status string, decided time.Time) {
	t.Helper()
	var dec any
	if status != "pending" {
		dec = decided
	}
	_, err := db.Pool.Exec(context.Background(), `
INSERT INTO escalations (id, call_id, session_id, kind, server, tool, rule, status, expires_at, decided_at, decided_by)
VALUES ($1, 'call-'||$1, $2, 'tool_call', 'files', 'read', 'loop-breaker', $3, now() + interval '1 hour', $4, CASE WHEN $3 = 'pending' THEN '' ELSE 'alice' END)`,
		id, session, status, dec)
	if err != nil {
		t.Fatal(err)
	}
}

// TestLoopBreakerTwoReplicasAsOne: two guards on one database behave as
// one loop breaker: identical calls spread over both count together; a
// session paused on one is paused on the other (with its escalation);
// the pause ends from its escalation's decision on the replica that sees
// the session next (approved: go on; denied: cooldown from the decision);
// a pause whose escalation was never written ends after the grace.
func TestLoopBreakerTwoReplicasAsOne(t *testing.T) {
	db := pgtest.New(t, pgtest.Migrated())
	cfg := loopguard.Config{IdenticalCalls: 3, Cooldown: 10 * time.Minute}
	a, b := twoReplicas(t, db, cfg)
	now := time.Now().UTC().Truncate(time.Microsecond)
	d := loopguard.Digest("files__read", map[string]any{"path": "/w/x"})
	guards := []*loopguard.Guard{a, b}

	for i := range 3 {
		if c := guards[i%2].Before("s1", "files__read", d, now.Add(time.Duration(i)*time.Second)); c.Verdict != loopguard.Proceed {
			t.Fatalf("call %d: %+v", i+1, c)
		}
		guards[i%2].After("s1", loopguard.Ran, now)
	}
	c := b.Before("s1", "files__read", d, now.Add(3*time.Second))
	if c.Verdict != loopguard.Trip || c.Limit != loopguard.LimitIdentical {
		t.Fatalf("the 4th identical call (two on each replica) did not trip: %+v", c)
	}
	if err := b.Escalated("s1", "esc-p1"); err != nil {
		t.Fatal(err)
	}
	other := loopguard.Digest("files__read", map[string]any{"path": "/w/other"})
	if c := a.Before("s1", "files__read", other, now.Add(4*time.Second)); c.Verdict != loopguard.Paused || c.EscalationID != "esc-p1" {
		t.Fatalf("replica a while b's pause waits (no escalation row yet): %+v", c)
	}
	pauseEscalation(t, db, "esc-p1", "s1", "pending", time.Time{})
	if c := a.Before("s1", "files__read", other, now.Add(10*time.Minute)); c.Verdict != loopguard.Paused {
		t.Fatalf("replica a with the pause's escalation pending: %+v", c)
	}
	if _, err := db.Pool.Exec(context.Background(), `UPDATE escalations SET status = 'approved', decided_at = now(), decided_by = 'alice' WHERE id = 'esc-p1'`); err != nil {
		t.Fatal(err)
	}
	// Approved on the ops API while replica b's waiter is gone: a goes on,
	// with fresh counters (the identical counter starts over).
	for i := range 3 {
		if c := a.Before("s1", "files__read", d, now.Add(11*time.Minute+time.Duration(i)*time.Second)); c.Verdict != loopguard.Proceed {
			t.Fatalf("after the approval, call %d: %+v", i+1, c)
		}
	}
	// b's waiter resolving the old pause late changes nothing.
	if _, err := b.ResolvePause("s1", "esc-p1", false, now.Add(11*time.Minute+3*time.Second)); err != nil {
		t.Fatal(err)
	}
	if c := b.Before("s1", "files__read", other, now.Add(11*time.Minute+3*time.Second)); c.Verdict != loopguard.Proceed {
		t.Fatalf("a late resolution of an ended pause stopped the session: %+v", c)
	}

	// Denied: both replicas cool the session down from the decision.
	if c := a.Before("s1", "files__read", d, now.Add(11*time.Minute+4*time.Second)); c.Verdict != loopguard.Trip {
		t.Fatalf("4th identical call after the approval: %+v", c)
	}
	if err := a.Escalated("s1", "esc-p2"); err != nil {
		t.Fatal(err)
	}
	decided := now.Add(12 * time.Minute)
	pauseEscalation(t, db, "esc-p2", "s1", "denied", decided)
	for _, g := range guards {
		c := g.Before("s1", "files__read", other, now.Add(13*time.Minute))
		if c.Verdict != loopguard.Cooling || !c.Until.Equal(decided.Add(cfg.Cooldown)) {
			t.Fatalf("after the denial: %+v, want cooling until %v", c, decided.Add(cfg.Cooldown))
		}
	}
	if c := b.Before("s1", "files__read", other, decided.Add(cfg.Cooldown+time.Second)); c.Verdict != loopguard.Proceed {
		t.Fatalf("after the cooldown: %+v", c)
	}

	// Abandoned: a pause whose escalation was never written.
	for i := range 4 {
		b.Before("s2", "files__read", d, now.Add(time.Duration(i)*time.Second))
	}
	if c := a.Before("s2", "files__read", other, now.Add(time.Minute)); c.Verdict != loopguard.Paused {
		t.Fatalf("s2 within the grace: %+v", c)
	}
	if c := a.Before("s2", "files__read", other, now.Add(loopguard.PauseRecordGrace+time.Minute)); c.Verdict != loopguard.Proceed {
		t.Fatalf("s2 after the grace without an escalation: %+v", c)
	}
}

// TestLoopBreakerConcurrentReplicas: identical calls racing on two
// replicas trip exactly once, at the limit; denials on both count in a
// row; the rate counts the calls of both.
func TestLoopBreakerConcurrentReplicas(t *testing.T) {
	db := pgtest.New(t, pgtest.Migrated())
	const limit = 10
	a, b := twoReplicas(t, db, loopguard.Config{IdenticalCalls: limit, ConsecutiveDenials: 4, CallsPerMinute: 30})
	now := time.Now().UTC().Truncate(time.Minute).Add(time.Second)
	d := loopguard.Digest("t", nil)
	var proceed, trips atomic.Int32
	var wg sync.WaitGroup
	for i := range 2 * limit {
		wg.Add(1)
		go func() {
			defer wg.Done()
			switch []*loopguard.Guard{a, b}[i%2].Before("race", "t", d, now).Verdict {
			case loopguard.Proceed:
				proceed.Add(1)
			case loopguard.Trip:
				trips.Add(1)
			}
		}()
	}
	wg.Wait()
	if proceed.Load() != limit || trips.Load() != 1 {
		t.Fatalf("proceeded %d, tripped %d; want %d and 1", proceed.Load(), trips.Load(), limit)
	}

	for i := range 4 {
		g := []*loopguard.Guard{a, b}[i%2]
		if c := g.Before("den", "t", loopguard.Digest("t", map[string]any{"i": float64(i)}), now); c.Verdict != loopguard.Proceed {
			t.Fatalf("denial %d: %+v", i, c)
		}
		g.After("den", loopguard.Denied, now)
	}
	if c := a.Before("den", "t", loopguard.Digest("t", map[string]any{"i": 99.0}), now); c.Verdict != loopguard.Trip || c.Limit != loopguard.LimitDenials {
		t.Fatalf("after 4 denials over both replicas: %+v", c)
	}

	var tripped *loopguard.Check
	for i := range 40 {
		c := []*loopguard.Guard{a, b}[i%2].Before("fast", "t", loopguard.Digest("t", map[string]any{"i": float64(i)}), now)
		if c.Verdict == loopguard.Trip {
			tripped = &c
			if i != 30 {
				t.Fatalf("the rate tripped at call %d, want 31 (30 a minute over both replicas)", i+1)
			}
			break
		}
	}
	if tripped == nil || tripped.Limit != loopguard.LimitRate {
		t.Fatalf("the rate over both replicas never tripped: %+v", tripped)
	}
}

// TestLoopBreakerStoreDown: without its state the guard refuses.
func TestLoopBreakerStoreDown(t *testing.T) {
	db := pgtest.New(t, pgtest.Migrated())
	a, _ := twoReplicas(t, db, loopguard.Config{})
	if _, err := db.Pool.Exec(context.Background(), `ALTER TABLE loop_breaker_sessions RENAME TO gone`); err != nil {
		t.Fatal(err)
	}
	if c := a.Before("s", "t", loopguard.Digest("t", nil), time.Now()); c.Verdict != loopguard.Unavailable {
		t.Fatalf("with the store down: %+v, want Unavailable", c)
	}
}

// BenchmarkLoopBreakerBefore: one shared Before + After (the hot path of
// every tool call), distinct calls of one session.
func BenchmarkLoopBreakerBefore(b *testing.B) {
	db := pgtest.New(b, pgtest.Migrated())
	g, err := loopguard.NewShared(loopguard.Config{CallsPerMinute: 1 << 30}, nil, store.LoopBreaker{Pool: db.Pool})
	if err != nil {
		b.Fatal(err)
	}
	now := time.Now()
	i := 0
	for b.Loop() {
		i++
		if c := g.Before("bench", "t", loopguard.Digest("t", map[string]any{"i": float64(i)}), now); c.Verdict != loopguard.Proceed {
			b.Fatalf("%+v", c)
		}
		g.After("bench", loopguard.Ran, now)
	}
}

// TestLoopBreakerSweep: stale state is forgotten; a paused session whose
// escalation is pending, a cooling session and fresh counters stay.
func TestLoopBreakerSweep(t *testing.T) {
	db := pgtest.New(t, pgtest.Migrated())
	ctx := context.Background()
	lb := store.LoopBreaker{Pool: db.Pool}
	g, err := loopguard.NewShared(loopguard.Config{IdenticalCalls: 1}, nil, lb)
	if err != nil {
		t.Fatal(err)
	}
	now := time.Now().UTC()
	old := now.Add(-25 * time.Hour)
	d := loopguard.Digest("t", nil)
	g.Before("idle", "t", d, old)                            // running, unseen for a day
	g.Before("paused-pending", "t", d, old)                  // paused behind a pending escalation
	g.Before("paused-pending", "t", d, old.Add(time.Second)) // trips
	g.Before("paused-decided", "t", d, old)                  // paused, its escalation decided
	g.Before("paused-decided", "t", d, old.Add(time.Second)) // trips
	for s, st := range map[string]string{"paused-pending": "pending", "paused-decided": "denied"} {
		if err := g.Escalated(s, "esc-"+s); err != nil {
			t.Fatal(err)
		}
		pauseEscalation(t, db, "esc-"+s, s, st, now)
	}
	// Seen now, and only now that the escalations exist: a Before at a
	// time SweepEvery past the guard's last sweep starts one in the
	// background, which must not find a pause whose row is not written yet.
	g.Before("fresh", "t", d, now) // running, seen now
	// Escalated touched last_seen: age the rows again.
	if _, err := db.Pool.Exec(ctx, `UPDATE loop_breaker_sessions SET last_seen = $1 WHERE session_id <> 'fresh'`, old); err != nil {
		t.Fatal(err)
	}
	if err := lb.Sweep(ctx, now, time.Minute); err != nil {
		t.Fatal(err)
	}
	var left []string
	rows, err := db.Pool.Query(ctx, `SELECT session_id FROM loop_breaker_sessions ORDER BY 1`)
	if err != nil {
		t.Fatal(err)
	}
	for rows.Next() {
		var s string
		if err := rows.Scan(&s); err != nil {
			t.Fatal(err)
		}
		left = append(left, s)
	}
	if len(left) != 2 || left[0] != "fresh" || left[1] != "paused-pending" {
		t.Fatalf("after the sweep: %v, want [fresh paused-pending]", left)
	}
	var digests int
	if err := db.Pool.QueryRow(ctx, `SELECT count(*) FROM loop_breaker_digests`).Scan(&digests); err != nil || digests != 1 {
		t.Fatalf("digests after the sweep: %d %v, want fresh's only", digests, err)
	}
}
