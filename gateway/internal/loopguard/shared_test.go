package loopguard

import (
	"context"
	"errors"
	"sync"
	"testing"
	"time"
)

// fakeShared is a shared store without Postgres: states in memory, plus
// the escalations' decisions a real store reads with a paused state.
type fakeShared struct {
	mem  *memStore
	mu   sync.Mutex
	escs map[string]PauseRecord
	fail bool
}

func (f *fakeShared) Update(ctx context.Context, session string, now time.Time, digest *[32]byte, fn func(*State, *Counter)) error {
	f.mu.Lock()
	fail := f.fail
	f.mu.Unlock()
	if fail {
		return errors.New("database unreachable")
	}
	return f.mem.Update(ctx, session, now, digest, func(s *State, c *Counter) {
		f.mu.Lock()
		p := f.escs[s.EscalationID]
		f.mu.Unlock()
		p.Known = true
		s.Pause = p
		fn(s, c)
	})
}

func (f *fakeShared) decide(id, status string, at time.Time) {
	f.mu.Lock()
	defer f.mu.Unlock()
	f.escs[id] = PauseRecord{Found: true, Status: status, DecidedAt: at}
}

// TestSharedPauseDerivedFromEscalation: with a shared store a pause ends
// from its escalation's decision, whoever asked; a late resolution of an
// ended pause changes nothing; a pause never written ends after the grace;
// an unreadable state refuses.
func TestSharedPauseDerivedFromEscalation(t *testing.T) {
	cfg := Config{IdenticalCalls: 2, Cooldown: 10 * time.Minute}
	f := &fakeShared{mem: newMemStore(100, time.Minute), escs: map[string]PauseRecord{}}
	m := newCountMetrics()
	g, err := NewShared(cfg, m, f)
	if err != nil {
		t.Fatal(err)
	}
	if !g.Shared() {
		t.Fatal("a guard on a shared store says it is not shared")
	}
	d := Digest("t", nil)
	trip := func(session string, at time.Time) {
		t.Helper()
		for i := range 3 {
			c := g.Before(session, "t", d, at.Add(time.Duration(i)*time.Millisecond))
			if want := map[bool]Verdict{true: Trip, false: Proceed}[i == 2]; c.Verdict != want {
				t.Fatalf("call %d: %+v", i+1, c)
			}
		}
	}
	other := Digest("t", map[string]any{"x": 1.0})

	tests := []struct {
		name    string
		decide  func(id string, at time.Time)
		wait    time.Duration
		want    Verdict
		wantEnd time.Duration // cooldown end after the decision
	}{
		{name: "pending: paused", decide: func(id string, at time.Time) { f.decide(id, "pending", time.Time{}) }, want: Paused},
		{name: "approved: goes on", decide: func(id string, at time.Time) { f.decide(id, "approved", at) }, want: Proceed},
		{name: "denied: cooldown from the decision", decide: func(id string, at time.Time) { f.decide(id, "denied", at) }, want: Cooling, wantEnd: cfg.Cooldown},
		{name: "expired: cooldown from the decision", decide: func(id string, at time.Time) { f.decide(id, "expired", at) }, want: Cooling, wantEnd: cfg.Cooldown},
		{name: "never written, within the grace: paused", wait: time.Minute, want: Paused},
		{name: "never written, after the grace: goes on", wait: PauseRecordGrace + time.Second, want: Proceed},
	}
	for i, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			session := "s" + string(rune('a'+i))
			at := t0.Add(time.Duration(i) * time.Hour)
			trip(session, at)
			id := "esc-" + session
			if err := g.Escalated(session, id); err != nil {
				t.Fatal(err)
			}
			decided := at.Add(time.Second)
			if tc.decide != nil {
				tc.decide(id, decided)
			}
			c := g.Before(session, "t", other, at.Add(2*time.Second+tc.wait))
			if c.Verdict != tc.want {
				t.Fatalf("after the decision: %+v, want verdict %d", c, tc.want)
			}
			if tc.wantEnd != 0 && !c.Until.Equal(decided.Add(tc.wantEnd)) {
				t.Fatalf("cooldown until %v, want %v", c.Until, decided.Add(tc.wantEnd))
			}
			if tc.want == Proceed {
				// The waiter's late answer to the ended pause changes nothing.
				if until, err := g.ResolvePause(session, id, false, at.Add(3*time.Second)); err != nil || !until.IsZero() {
					t.Fatalf("late resolution: %v %v", until, err)
				}
				if c := g.Before(session, "t", other, at.Add(4*time.Second+tc.wait)); c.Verdict != Proceed {
					t.Fatalf("after a late resolution: %+v", c)
				}
			}
		})
	}

	f.mu.Lock()
	f.fail = true
	f.mu.Unlock()
	if c := g.Before("down", "t", d, t0); c.Verdict != Unavailable {
		t.Fatalf("state unreadable: %+v", c)
	}
	if m.refused["unavailable"] != 1 {
		t.Fatalf("refused metrics %v", m.refused)
	}
}
