// Package budget tracks a session's resource budgets — model steps,
// wall-clock time and tokens (as the model provider reports them through
// the relay) — and says which one ended the run and why.
package budget

import (
	"fmt"
	"sync"
	"time"
)

// Defaults, as in the original IronCurtain.
const (
	DefaultMaxSteps  = 200
	DefaultMaxWall   = 30 * time.Minute
	DefaultMaxTokens = 1_000_000
)

// Limits of one session. A zero field takes its default; a negative one
// disables that budget.
type Limits struct {
	MaxSteps  int
	MaxWall   time.Duration
	MaxTokens int64
}

// WithDefaults fills zero fields with the defaults.
func (l Limits) WithDefaults() Limits {
	if l.MaxSteps == 0 {
		l.MaxSteps = DefaultMaxSteps
	}
	if l.MaxWall == 0 {
		l.MaxWall = DefaultMaxWall
	}
	if l.MaxTokens == 0 {
		l.MaxTokens = DefaultMaxTokens
	}
	return l
}

// Budget names.
const (
	Steps     = "steps"
	WallClock = "wall-clock"
	Tokens    = "tokens"
)

// Exhausted is the error returned when a budget ends the run.
type Exhausted struct {
	Budget string // Steps, WallClock or Tokens
	Used   string
	Limit  string
}

func (e *Exhausted) Error() string {
	return fmt.Sprintf("%s budget exhausted: used %s of %s", e.Budget, e.Used, e.Limit)
}

// Usage is a snapshot of what a session used.
type Usage struct {
	Steps        int
	InputTokens  int64
	OutputTokens int64
	Elapsed      time.Duration
}

// Tokens returns input plus output tokens.
func (u Usage) Tokens() int64 { return u.InputTokens + u.OutputTokens }

// Tracker counts usage against Limits. It is safe for concurrent use.
type Tracker struct {
	limits Limits
	now    func() time.Time
	start  time.Time

	mu    sync.Mutex
	steps int
	in    int64
	out   int64
}

// NewTracker starts the wall clock now.
func NewTracker(l Limits) *Tracker { return newTracker(l, time.Now) }

func newTracker(l Limits, now func() time.Time) *Tracker {
	return &Tracker{limits: l.WithDefaults(), now: now, start: now()}
}

// Limits returns the limits in force.
func (t *Tracker) Limits() Limits { return t.limits }

// Deadline is when the wall-clock budget ends (ok false if disabled).
func (t *Tracker) Deadline() (time.Time, bool) {
	if t.limits.MaxWall < 0 {
		return time.Time{}, false
	}
	return t.start.Add(t.limits.MaxWall), true
}

// BeginStep accounts one more model step, or returns *Exhausted when the
// step or wall-clock budget does not allow it.
func (t *Tracker) BeginStep() error {
	t.mu.Lock()
	defer t.mu.Unlock()
	if err := t.wallLocked(); err != nil {
		return err
	}
	if t.limits.MaxSteps > 0 && t.steps >= t.limits.MaxSteps {
		return &Exhausted{Budget: Steps, Used: fmt.Sprintf("%d steps", t.steps), Limit: fmt.Sprintf("%d", t.limits.MaxSteps)}
	}
	t.steps++
	return nil
}

// AddUsage accounts tokens reported for one reply, and returns *Exhausted
// when the total went over the token budget.
func (t *Tracker) AddUsage(input, output int64) error {
	t.mu.Lock()
	defer t.mu.Unlock()
	t.in += max(input, 0)
	t.out += max(output, 0)
	if t.limits.MaxTokens > 0 && t.in+t.out > t.limits.MaxTokens {
		return &Exhausted{Budget: Tokens, Used: fmt.Sprintf("%d tokens", t.in+t.out), Limit: fmt.Sprintf("%d", t.limits.MaxTokens)}
	}
	return nil
}

// Check returns *Exhausted when the wall-clock or token budget is spent.
func (t *Tracker) Check() error {
	t.mu.Lock()
	defer t.mu.Unlock()
	if err := t.wallLocked(); err != nil {
		return err
	}
	if t.limits.MaxTokens > 0 && t.in+t.out > t.limits.MaxTokens {
		return &Exhausted{Budget: Tokens, Used: fmt.Sprintf("%d tokens", t.in+t.out), Limit: fmt.Sprintf("%d", t.limits.MaxTokens)}
	}
	return nil
}

// WallExhausted returns the wall-clock *Exhausted error (used when the
// session's deadline cut a model or tool call short).
func (t *Tracker) WallExhausted() error {
	return &Exhausted{Budget: WallClock, Used: t.now().Sub(t.start).Round(time.Second).String(), Limit: t.limits.MaxWall.String()}
}

func (t *Tracker) wallLocked() error {
	if t.limits.MaxWall > 0 && t.now().Sub(t.start) >= t.limits.MaxWall {
		return t.WallExhausted()
	}
	return nil
}

// Usage returns a snapshot.
func (t *Tracker) Usage() Usage {
	t.mu.Lock()
	defer t.mu.Unlock()
	return Usage{Steps: t.steps, InputTokens: t.in, OutputTokens: t.out, Elapsed: t.now().Sub(t.start)}
}

// String renders usage against limits, e.g. for /budget.
func (t *Tracker) String() string {
	u := t.Usage()
	return fmt.Sprintf("steps %d/%s, tokens %d/%s (in %d, out %d), wall-clock %s/%s",
		u.Steps, limitString(int64(t.limits.MaxSteps)), u.Tokens(), limitString(t.limits.MaxTokens),
		u.InputTokens, u.OutputTokens, u.Elapsed.Round(time.Second), wallString(t.limits.MaxWall))
}

func limitString(n int64) string {
	if n < 0 {
		return "unlimited"
	}
	return fmt.Sprint(n)
}

func wallString(d time.Duration) string {
	if d < 0 {
		return "unlimited"
	}
	return d.String()
}
