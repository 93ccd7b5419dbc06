package audit

import (
	"bytes"
	"errors"
	"log/slog"
	"strings"
	"sync"
	"testing"
	"time"
)

// fakeClock is a clock tests move by hand.
type fakeClock struct {
	mu sync.Mutex
	t  time.Time
}

func newFakeClock() *fakeClock { return &fakeClock{t: time.Date(2026, 1, 2, 3, 4, 5, 0, time.UTC)} }

func (c *fakeClock) now() time.Time {
	c.mu.Lock()
	defer c.mu.Unlock()
	return c.t
}

func (c *fakeClock) advance(d time.Duration) {
	c.mu.Lock()
	c.t = c.t.Add(d)
	c.mu.Unlock()
}

func TestBackoffGrowsWithJitterAndCaps(t *testing.T) {
	for _, tc := range []struct {
		name     string
		rnd      float64
		attempts int
		want     []time.Duration
	}{
		{name: "low jitter", rnd: 0, attempts: 8, want: []time.Duration{
			50 * time.Millisecond, 100 * time.Millisecond, 200 * time.Millisecond, 400 * time.Millisecond,
			800 * time.Millisecond, 1000 * time.Millisecond, 1000 * time.Millisecond, 1000 * time.Millisecond,
		}},
		{name: "mid jitter", rnd: 0.5, attempts: 8, want: []time.Duration{
			75 * time.Millisecond, 150 * time.Millisecond, 300 * time.Millisecond, 600 * time.Millisecond,
			1200 * time.Millisecond, 1500 * time.Millisecond, 1500 * time.Millisecond, 1500 * time.Millisecond,
		}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			b := backoff{base: BackoffBase, max: BackoffMax, rand: func() float64 { return tc.rnd }}
			for i := range tc.attempts {
				if got := b.next(); got != tc.want[i] {
					t.Errorf("attempt %d: wait %v, want %v", i, got, tc.want[i])
				}
			}
			b.reset()
			if got := b.next(); got != tc.want[0] {
				t.Errorf("after reset: wait %v, want %v", got, tc.want[0])
			}
		})
	}
}

// TestGateOneProbePerBackoff: while the database is down, writes fail
// without trying it, except one probe each time the back-off expires.
func TestGateOneProbePerBackoff(t *testing.T) {
	clk := newFakeClock()
	g := newGate(clk.now, func() float64 { return 0.5 })
	if !g.allow() {
		t.Fatal("a fresh gate refused")
	}
	g.failed() // first failure: next probe after 75 ms (100 ms, jitter 0.5)
	probes := 0
	// 1,000 batches over 10 s of outage.
	for range 1000 {
		if g.allow() {
			probes++
			g.failed()
		}
		clk.advance(10 * time.Millisecond)
	}
	// Waits: 75, 150, 300, 600, 1200, then 1500 ms each → 10 probes in 10 s.
	if probes < 8 || probes > 12 {
		t.Fatalf("%d connection attempts in 10 s of outage, want about 10 (back-off)", probes)
	}
	// While a probe is out, nobody else tries.
	clk.advance(BackoffMax)
	if !g.allow() {
		t.Fatal("no probe after the back-off")
	}
	if g.allow() {
		t.Fatal("a second write was let through while the probe was out")
	}
	if wasDown, d := g.ok(); !wasDown || d < 10*time.Second {
		t.Fatalf("ok() = %v, %v; want true and the outage length", wasDown, d)
	}
	for range 10 {
		if !g.allow() {
			t.Fatal("the gate refused after recovering")
		}
	}
	if down, _ := g.isDown(); down {
		t.Fatal("gate still down")
	}
}

// TestFailureSummaryBoundsLogLines: 4,210 refusals over 12 s give a handful
// of lines, the summary naming the duration and the count.
func TestFailureSummaryBoundsLogLines(t *testing.T) {
	clk := newFakeClock()
	var buf bytes.Buffer
	log := slog.New(slog.NewTextHandler(&buf, nil))
	f := NewFailureSummary(log, "audit writes", "calls refused", 10*time.Second, clk.now)
	cause := errors.New("dial tcp: connection refused")
	for range 4210 {
		f.Fail(1, cause)
		clk.advance(12 * time.Second / 4210)
	}
	f.OK()
	f.OK() // a second OK logs nothing
	lines := strings.Split(strings.TrimSpace(buf.String()), "\n")
	if len(lines) != 3 {
		t.Fatalf("%d log lines, want 3 (first failure, one summary, recovery):\n%s", len(lines), buf.String())
	}
	for i, want := range []string{"audit writes failing", "audit writes failing for 10s, 3,5", "audit writes recovered after 12s; 4,210 calls refused"} {
		if !strings.Contains(lines[i], want) {
			t.Errorf("line %d = %s\nwant it to contain %q", i, lines[i], want)
		}
	}
	if !strings.Contains(lines[0], "connection refused") {
		t.Errorf("first line does not name the cause: %s", lines[0])
	}
}

func TestGroupDigits(t *testing.T) {
	for _, tc := range []struct {
		n    int64
		want string
	}{{0, "0"}, {999, "999"}, {1000, "1,000"}, {4210, "4,210"}, {1234567, "1,234,567"}, {-4210, "-4,210"}} {
		if got := groupDigits(tc.n); got != tc.want {
			t.Errorf("groupDigits(%d) = %q, want %q", tc.n, got, tc.want)
		}
	}
}

func BenchmarkFailureSummaryOK(b *testing.B) {
	f := NewFailureSummary(nil, "audit writes", "records", 0, nil)
	b.RunParallel(func(pb *testing.PB) {
		for pb.Next() {
			f.OK()
		}
	})
}
