package autoapprove

import (
	"context"
	"sync"
	"time"

	"ironcurtain.dev/gateway/internal/store"
)

// BudgetStore keeps the daily budget where every replica spends from it
// (store.AutoApproverBudget, in Postgres). Without one (Deps.Budget nil)
// the budget is this process's alone.
type BudgetStore interface {
	// Seed sets the day's spend unless the day is already counted.
	Seed(ctx context.Context, day time.Time, s store.DaySpend) error
	// Reserve takes one call when calls, tokens and cost are all below
	// their limits (ok false: spent).
	Reserve(ctx context.Context, day time.Time, maxCalls, maxTokens int64, maxCost float64) (store.DaySpend, bool, error)
	// Charge adds a finished call's usage.
	Charge(ctx context.Context, day time.Time, tokens int64, cost float64) (store.DaySpend, error)
}

var _ BudgetStore = store.AutoApproverBudget{}

// budgetTimeout bounds one budget read or write in the shared store.
const budgetTimeout = 3 * time.Second

// Budget is what the auto-approver may spend per UTC day; every limit is
// required (> 0).
type Budget struct {
	CallsPerDay   int64
	TokensPerDay  int64
	CostUSDPerDay float64
}

// ledger counts one UTC day's spend and the rate window. A call reserves
// before it asks the model (so concurrent calls cannot overshoot the call
// limit) and charges its usage after.
type ledger struct {
	mu      sync.Mutex
	b       Budget
	day     time.Time // UTC midnight of the day counted
	calls   int64
	tokens  int64
	cost    float64
	perMin  int
	window  []time.Time // start times of calls in the last minute (ring)
	next    int
	filled  int
	maxConc int
	running int
}

func newLedger(b Budget, perMinute, maxConcurrent int) *ledger {
	return &ledger{b: b, perMin: perMinute, window: make([]time.Time, perMinute), maxConc: maxConcurrent}
}

func utcDay(t time.Time) time.Time {
	t = t.UTC()
	return time.Date(t.Year(), t.Month(), t.Day(), 0, 0, 0, 0, time.UTC)
}

// seed adds spend already recorded today (by this and other replicas,
// before a restart).
func (l *ledger) seed(now time.Time, calls, tokens int64, cost float64) {
	l.mu.Lock()
	defer l.mu.Unlock()
	l.roll(now)
	l.calls += calls
	l.tokens += tokens
	l.cost += cost
}

func (l *ledger) roll(now time.Time) {
	if d := utcDay(now); !d.Equal(l.day) {
		l.day, l.calls, l.tokens, l.cost = d, 0, 0, 0
	}
}

// reserve takes one call of today's budget (unless shared: then the
// BudgetStore keeps it), one slot of the rate window and one concurrency
// slot. outcome is "" on success, else why not; charge must be called
// after a successful reserve.
func (l *ledger) reserve(now time.Time, shared bool) (outcome string) {
	l.mu.Lock()
	defer l.mu.Unlock()
	l.roll(now)
	if !shared && (l.calls >= l.b.CallsPerDay || l.tokens >= l.b.TokensPerDay || l.cost >= l.b.CostUSDPerDay) {
		return "budget"
	}
	if l.running >= l.maxConc {
		return "rate_limited"
	}
	if l.filled == l.perMin && now.Sub(l.window[l.next]) < time.Minute {
		return "rate_limited"
	}
	l.window[l.next] = now
	l.next = (l.next + 1) % l.perMin
	l.filled = min(l.filled+1, l.perMin)
	l.calls++
	l.running++
	return ""
}

// charge adds a finished call's usage and frees its concurrency slot.
func (l *ledger) charge(now time.Time, tokens int64, cost float64) {
	l.mu.Lock()
	defer l.mu.Unlock()
	l.running--
	if utcDay(now).Equal(l.day) {
		l.tokens += max(tokens, 0)
		l.cost += max(cost, 0)
	}
}

// set replaces today's counts with the shared store's (for the gauges).
func (l *ledger) set(now time.Time, s store.DaySpend) {
	l.mu.Lock()
	defer l.mu.Unlock()
	l.roll(now)
	l.calls, l.tokens, l.cost = s.Calls, s.Tokens, s.CostUSD
}

// spent returns today's counts.
func (l *ledger) spent(now time.Time) (calls, tokens int64, cost float64) {
	l.mu.Lock()
	defer l.mu.Unlock()
	l.roll(now)
	return l.calls, l.tokens, l.cost
}
