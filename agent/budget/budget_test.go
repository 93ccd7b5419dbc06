package budget

import (
	"errors"
	"strings"
	"testing"
	"time"
)

type fakeClock struct{ t time.Time }

func (c *fakeClock) now() time.Time { return c.t }

func TestTracker(t *testing.T) {
	tests := []struct {
		name       string
		limits     Limits
		steps      int
		tokens     [][2]int64
		advance    time.Duration
		wantBudget string // "" = not exhausted
		wantMsg    string
	}{
		{name: "within limits", limits: Limits{MaxSteps: 3, MaxTokens: 100, MaxWall: time.Minute}, steps: 3, tokens: [][2]int64{{40, 10}}},
		{name: "step budget", limits: Limits{MaxSteps: 2}, steps: 3, wantBudget: Steps, wantMsg: "steps budget exhausted: used 2 steps of 2"},
		{name: "token budget", limits: Limits{MaxTokens: 100}, steps: 1, tokens: [][2]int64{{60, 10}, {30, 1}}, wantBudget: Tokens, wantMsg: "tokens budget exhausted: used 101 tokens of 100"},
		{name: "wall-clock budget", limits: Limits{MaxWall: time.Minute}, steps: 1, advance: 2 * time.Minute, wantBudget: WallClock, wantMsg: "wall-clock budget exhausted: used 2m0s of 1m0s"},
		{name: "disabled budgets", limits: Limits{MaxSteps: -1, MaxTokens: -1, MaxWall: -1}, steps: 500, tokens: [][2]int64{{1 << 40, 1}}, advance: 100 * time.Hour},
		{name: "negative usage ignored", limits: Limits{MaxTokens: 10}, steps: 1, tokens: [][2]int64{{-100, -5}, {5, 5}}},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			clk := &fakeClock{t: time.Unix(1000, 0)}
			tr := newTracker(tc.limits, clk.now)
			var err error
			for i := 0; i < tc.steps && err == nil; i++ {
				err = tr.BeginStep()
			}
			for _, tok := range tc.tokens {
				if err == nil {
					err = tr.AddUsage(tok[0], tok[1])
				}
			}
			clk.t = clk.t.Add(tc.advance)
			if err == nil {
				err = tr.Check()
			}
			if tc.wantBudget == "" {
				if err != nil {
					t.Fatalf("unexpected %v", err)
				}
				return
			}
			var ex *Exhausted
			if !errors.As(err, &ex) || ex.Budget != tc.wantBudget {
				t.Fatalf("err = %v, want %s exhausted", err, tc.wantBudget)
			}
			if err.Error() != tc.wantMsg {
				t.Errorf("message = %q, want %q", err.Error(), tc.wantMsg)
			}
		})
	}
}

func TestDefaultsAndString(t *testing.T) {
	tr := NewTracker(Limits{})
	l := tr.Limits()
	if l.MaxSteps != DefaultMaxSteps || l.MaxTokens != DefaultMaxTokens || l.MaxWall != DefaultMaxWall {
		t.Errorf("defaults = %+v", l)
	}
	_ = tr.BeginStep()
	_ = tr.AddUsage(7, 3)
	s := tr.String()
	for _, want := range []string{"steps 1/200", "tokens 10/1000000 (in 7, out 3)", "/30m0s"} {
		if !strings.Contains(s, want) {
			t.Errorf("%q lacks %q", s, want)
		}
	}
	if d, ok := tr.Deadline(); !ok || d.IsZero() {
		t.Errorf("deadline = %v %v", d, ok)
	}
	if _, ok := NewTracker(Limits{MaxWall: -1}).Deadline(); ok {
		t.Error("disabled wall clock has a deadline")
	}
}
