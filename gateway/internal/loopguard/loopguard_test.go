package loopguard

import (
	"fmt"
	"strings"
	"sync"
	"testing"
	"time"
)

var t0 = time.Date(2026, 11, 26, 10, 0, 0, 0, time.UTC)

type countMetrics struct {
	mu                     sync.Mutex
	trips, refused, solved map[string]int
}

func newCountMetrics() *countMetrics {
	return &countMetrics{trips: map[string]int{}, refused: map[string]int{}, solved: map[string]int{}}
}
func (m *countMetrics) Trip(l string)     { m.mu.Lock(); m.trips[l]++; m.mu.Unlock() }
func (m *countMetrics) Refused(s string)  { m.mu.Lock(); m.refused[s]++; m.mu.Unlock() }
func (m *countMetrics) Resolved(r string) { m.mu.Lock(); m.solved[r]++; m.mu.Unlock() }

func mustNew(t testing.TB, cfg Config, m Metrics) *Guard {
	t.Helper()
	g, err := New(cfg, m)
	if err != nil {
		t.Fatal(err)
	}
	return g
}

// step is one call of a scripted session: its tool and argument, the time
// since the start, and what became of it if it proceeded.
type step struct {
	tool, arg string
	at        time.Duration
	outcome   Outcome
}

// run plays steps and returns the index of the call that tripped (-1: none)
// and its check.
func run(g *Guard, session string, steps []step) (int, Check) {
	for i, s := range steps {
		chk := g.Before(session, s.tool, Digest(s.tool, map[string]any{"a": s.arg}), t0.Add(s.at))
		if chk.Verdict != Proceed {
			return i, chk
		}
		g.After(session, s.outcome, t0.Add(s.at))
	}
	return -1, Check{}
}

func repeat(n int, f func(i int) step) []step {
	out := make([]step, n)
	for i := range out {
		out[i] = f(i)
	}
	return out
}

func TestGuardLimits(t *testing.T) {
	cfg := Config{CallsPerMinute: 100, IdenticalCalls: 5, IdenticalWindow: time.Minute, ConsecutiveDenials: 10, Cooldown: time.Minute}
	tests := []struct {
		name      string
		steps     []step
		wantTrip  int // index of the tripping call, -1 none
		wantLimit string
		wantText  string
	}{
		{name: "a normal session: varied calls, some denials", wantTrip: -1,
			steps: repeat(300, func(i int) step {
				o := Ran
				if i%7 == 0 {
					o = Denied
				}
				return step{tool: "fs__read_file", arg: fmt.Sprint(i), at: time.Duration(i) * time.Second, outcome: o}
			})},
		{name: "identical calls within the window", wantTrip: 5, wantLimit: LimitIdentical, wantText: "6 identical calls to fs__read_file in 5s",
			steps: repeat(10, func(i int) step { return step{tool: "fs__read_file", arg: "x", at: time.Duration(i) * time.Second} })},
		{name: "identical calls spread beyond the window", wantTrip: -1,
			steps: repeat(20, func(i int) step {
				return step{tool: "fs__read_file", arg: "x", at: time.Duration(i) * 20 * time.Second}
			})},
		{name: "same arguments, another tool, is not identical", wantTrip: -1,
			steps: repeat(10, func(i int) step {
				return step{tool: fmt.Sprintf("fs__t%d", i%2), arg: "x", at: time.Duration(i) * time.Second}
			})},
		{name: "consecutive denials", wantTrip: 10, wantLimit: LimitDenials, wantText: "the agent seems stuck: 10 denied calls in a row in 9s",
			steps: repeat(20, func(i int) step {
				return step{tool: "fs__write_file", arg: fmt.Sprint(i), at: time.Duration(i) * time.Second, outcome: Denied}
			})},
		{name: "a call that runs resets the denials", wantTrip: -1,
			steps: repeat(40, func(i int) step {
				o := Denied
				if i%9 == 8 {
					o = Ran
				}
				return step{tool: "fs__write_file", arg: fmt.Sprint(i), at: time.Duration(i) * time.Second, outcome: o}
			})},
		{name: "refusals for other reasons neither count nor reset", wantTrip: 19, wantLimit: LimitDenials, wantText: "10 denied calls in a row in 18s",
			steps: repeat(30, func(i int) step {
				o := Denied
				if i%2 == 1 {
					o = Other
				}
				return step{tool: "fs__write_file", arg: fmt.Sprint(i), at: time.Duration(i) * time.Second, outcome: o}
			})},
		{name: "calls per minute", wantTrip: 100, wantLimit: LimitRate, wantText: "calling tools too fast",
			steps: repeat(200, func(i int) step {
				return step{tool: "fs__read_file", arg: fmt.Sprint(i), at: time.Duration(i) * 100 * time.Millisecond}
			})},
		{name: "a steady rate under the limit", wantTrip: -1,
			steps: repeat(1000, func(i int) step {
				return step{tool: "fs__read_file", arg: fmt.Sprint(i), at: time.Duration(i) * 650 * time.Millisecond}
			})},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			g := mustNew(t, cfg, nil)
			i, chk := run(g, "s1", tt.steps)
			if i != tt.wantTrip {
				t.Fatalf("tripped at %d (%+v), want %d", i, chk, tt.wantTrip)
			}
			if i < 0 {
				return
			}
			if chk.Verdict != Trip || chk.Limit != tt.wantLimit || !strings.Contains(chk.Reason, tt.wantText) {
				t.Fatalf("check = %+v, want limit %s and %q", chk, tt.wantLimit, tt.wantText)
			}
		})
	}
}

func TestGuardPauseApproveAndCooldown(t *testing.T) {
	m := newCountMetrics()
	g := mustNew(t, Config{IdenticalCalls: 2, Cooldown: 5 * time.Minute}, m)
	d := Digest("t", map[string]any{"x": 1.0})
	call := func(session string, at time.Duration) Check { return g.Before(session, "t", d, t0.Add(at)) }
	for i := 0; i < 2; i++ {
		if c := call("s1", 0); c.Verdict != Proceed {
			t.Fatalf("call %d = %+v", i, c)
		}
	}
	if c := call("s1", time.Second); c.Verdict != Trip {
		t.Fatalf("third identical call = %+v", c)
	}
	g.Escalated("s1", "esc-1")
	if c := call("s1", 2*time.Second); c.Verdict != Paused || c.EscalationID != "esc-1" {
		t.Fatalf("call while paused = %+v", c)
	}
	// Another session is not affected.
	if c := call("s2", 2*time.Second); c.Verdict != Proceed {
		t.Fatalf("other session = %+v", c)
	}
	// Approval: fresh counters.
	g.Resolve("s1", true, t0.Add(3*time.Second))
	for i := 0; i < 2; i++ {
		if c := call("s1", 4*time.Second); c.Verdict != Proceed {
			t.Fatalf("after approval call %d = %+v", i, c)
		}
	}
	if c := call("s1", 5*time.Second); c.Verdict != Trip {
		t.Fatalf("looping again = %+v", c)
	}
	// Denial: cooldown, then fresh counters.
	until := g.Resolve("s1", false, t0.Add(6*time.Second))
	if want := t0.Add(6*time.Second + 5*time.Minute); !until.Equal(want) {
		t.Fatalf("until = %v, want %v", until, want)
	}
	if c := call("s1", 4*time.Minute); c.Verdict != Cooling || !c.Until.Equal(until) {
		t.Fatalf("call in cooldown = %+v", c)
	}
	g.After("s1", Denied, t0.Add(4*time.Minute)) // refusals during cooldown do not count
	if c := call("s1", 6*time.Minute); c.Verdict != Proceed {
		t.Fatalf("call after cooldown = %+v", c)
	}
	if m.trips[LimitIdentical] != 2 || m.refused["paused"] != 1 || m.refused["cooldown"] != 1 || m.solved["approved"] != 1 || m.solved["denied"] != 1 {
		t.Fatalf("metrics = %+v %+v %+v", m.trips, m.refused, m.solved)
	}
}

func TestGuardBoundedMemory(t *testing.T) {
	g := mustNew(t, Config{MaxSessions: 100, IdenticalCalls: 2}, nil)
	// A paused session is never forgotten.
	d := Digest("t", nil)
	for i := 0; i < 3; i++ {
		g.Before("stuck", "t", d, t0)
	}
	for i := 0; i < 1000; i++ {
		g.Before(fmt.Sprintf("s%d", i), "t", d, t0.Add(time.Duration(i)*time.Millisecond))
	}
	if n := g.Sessions(); n > 100 {
		t.Fatalf("%d sessions tracked, want at most 100", n)
	}
	if c := g.Before("stuck", "t", d, t0.Add(time.Second)); c.Verdict != Paused {
		t.Fatalf("the paused session was forgotten: %+v", c)
	}
	// Distinct calls do not grow the digest map beyond MaxDigests.
	for i := 0; i < 5*MaxDigests; i++ {
		g.Before("many", "t", Digest("t", map[string]any{"i": float64(i)}), t0.Add(time.Duration(i)*time.Millisecond))
	}
	ms := g.store.(*memStore)
	ms.mu.Lock()
	n := len(ms.sessions["many"].digests)
	ms.mu.Unlock()
	if n > MaxDigests {
		t.Fatalf("%d digests kept, want at most %d", n, MaxDigests)
	}
}

func TestConfigDefaultsAndErrors(t *testing.T) {
	c, err := Config{}.WithDefaults()
	if err != nil || c.CallsPerMinute != DefaultCallsPerMinute || c.IdenticalCalls != DefaultIdenticalCalls ||
		c.ConsecutiveDenials != DefaultConsecutiveDenials || c.Cooldown != DefaultCooldown || c.MaxSessions != DefaultMaxSessions {
		t.Fatalf("defaults = %+v, %v", c, err)
	}
	if _, err := New(Config{CallsPerMinute: -1, Cooldown: -1}, nil); err == nil || !strings.Contains(err.Error(), "calls_per_minute") || !strings.Contains(err.Error(), "cooldown") {
		t.Fatalf("err = %v", err)
	}
}

func TestDigestCanonical(t *testing.T) {
	a := Digest("t", map[string]any{"a": 1.0, "b": "x"})
	b := Digest("t", map[string]any{"b": "x", "a": 1.0})
	if a != b {
		t.Fatal("key order changes the digest")
	}
	if a == Digest("u", map[string]any{"a": 1.0, "b": "x"}) || a == Digest("t", map[string]any{"a": 2.0, "b": "x"}) {
		t.Fatal("different calls share a digest")
	}
}

func TestGuardConcurrent(t *testing.T) {
	g := mustNew(t, Config{IdenticalCalls: 50}, nil)
	var wg sync.WaitGroup
	var mu sync.Mutex
	trips := 0
	for w := 0; w < 8; w++ {
		wg.Go(func() {
			for i := 0; i < 200; i++ {
				c := g.Before("s", "t", Digest("t", nil), t0)
				if c.Verdict == Trip {
					mu.Lock()
					trips++
					mu.Unlock()
				}
				g.After("s", Ran, t0)
			}
		})
	}
	wg.Wait()
	if trips != 1 {
		t.Fatalf("%d trips for one pause, want exactly 1", trips)
	}
}

// BenchmarkBefore is the loop breaker's cost on every call (digest and
// check), with 1,000 sessions tracked.
func BenchmarkBefore(b *testing.B) {
	g := mustNew(b, Config{CallsPerMinute: 1 << 30, IdenticalCalls: 1 << 30}, nil)
	args := map[string]any{"path": "/workspace/src/main.go", "head": 40.0}
	for i := 0; i < 1000; i++ {
		g.Before(fmt.Sprintf("s%d", i), "filesystem__read_text_file", Digest("filesystem__read_text_file", args), t0)
	}
	b.ReportAllocs()
	b.ResetTimer()
	for i := 0; i < b.N; i++ {
		g.Before("s1", "filesystem__read_text_file", Digest("filesystem__read_text_file", args), t0.Add(time.Duration(i)))
	}
}

func TestGuardAbandon(t *testing.T) {
	g := mustNew(t, Config{IdenticalCalls: 2}, nil)
	d := Digest("t", nil)
	for i := 0; i < 3; i++ {
		g.Before("s", "t", d, t0)
	}
	if c := g.Before("s", "t", d, t0); c.Verdict != Paused {
		t.Fatalf("not paused: %+v", c)
	}
	g.Abandon("s")
	if c := g.Before("s", "t", d, t0); c.Verdict != Proceed {
		t.Fatalf("after Abandon: %+v", c)
	}
}
