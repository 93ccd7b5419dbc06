package llmrelay

import (
	"context"
	"fmt"
	"net/http"
	"sync"

	"ironcurtain.dev/gateway/internal/session"
)

// Budget limits what one session may spend on model calls; a zero field
// means no limit on that measure. Tokens are input (cached or not) plus
// output tokens; cost is the relay's estimate in US dollars.
type Budget struct {
	MaxTokens  int64
	MaxCostUSD float64
}

func (b Budget) limited() bool { return b.MaxTokens > 0 || b.MaxCostUSD > 0 }

// Spend reports what a session spent before this process started, so
// budgets survive restarts. The Postgres store implements it as a sum over
// llm_calls; without one, spend starts at zero.
type Spend interface {
	Load(ctx context.Context, sessionID string) (tokens int64, costUSD float64, err error)
}

// ledger keeps each session's spend and calls in flight. Budgets are
// checked before a call and charged after it, so concurrent calls of one
// session can overshoot a budget by at most what the calls in flight
// (bounded by maxInflight) spend.
type ledger struct {
	def         Budget
	per         map[string]Budget
	spend       Spend
	maxInflight int

	mu       sync.Mutex
	accounts map[string]*account
}

type account struct {
	loadMu sync.Mutex // held while loading the stored spend
	loaded bool       // guarded by loadMu

	// guarded by ledger.mu
	tokens   int64
	cost     float64
	inflight int
}

func newLedger(def Budget, per map[string]Budget, spend Spend, maxInflight int) *ledger {
	return &ledger{def: def, per: per, spend: spend, maxInflight: maxInflight, accounts: map[string]*account{}}
}

func (l *ledger) budget(sessionID string) (Budget, bool) {
	if b, ok := l.per[sessionID]; ok {
		return b, true
	}
	return l.def, false
}

// acquire admits one call of the session: it holds a slot of the
// concurrency cap until release is called, and for a metered call refuses
// when the session's budget is spent. An error (the spend store failed)
// means the call must be refused too.
func (l *ledger) acquire(ctx context.Context, sessionID string, metered bool) (release func(), rf *refusal, err error) {
	return l.acquireSession(ctx, session.Session{ID: sessionID}, metered)
}

// acquireSession is acquire for an authenticated session: a minted
// session's own budget (session.Budget) replaces the configured one on each
// measure it sets.
func (l *ledger) acquireSession(ctx context.Context, sess session.Session, metered bool) (release func(), rf *refusal, err error) {
	sessionID := sess.ID
	l.mu.Lock()
	acc := l.accounts[sessionID]
	if acc == nil {
		acc = &account{}
		l.accounts[sessionID] = acc
	}
	if l.maxInflight > 0 && acc.inflight >= l.maxInflight {
		l.mu.Unlock()
		return nil, &refusal{status: http.StatusTooManyRequests, kind: kindRateLimit, reason: "concurrency",
			msg: fmt.Sprintf("too many model calls in flight for this session (limit %d); retry when one finishes", l.maxInflight)}, nil
	}
	acc.inflight++
	l.mu.Unlock()
	release = func() {
		l.mu.Lock()
		acc.inflight--
		l.mu.Unlock()
	}
	b, own := l.budget(sessionID)
	minted := false
	if sb := sess.Budget; sb != nil && (sb.MaxTokens > 0 || sb.MaxCostUSD > 0) {
		minted = true
		if sb.MaxTokens > 0 {
			b.MaxTokens = sb.MaxTokens
		}
		if sb.MaxCostUSD > 0 {
			b.MaxCostUSD = sb.MaxCostUSD
		}
	}
	if !metered || !b.limited() {
		return release, nil, nil
	}
	if err := l.load(ctx, sessionID, acc); err != nil {
		release()
		return nil, nil, err
	}
	l.mu.Lock()
	tokens, cost := acc.tokens, acc.cost
	l.mu.Unlock()
	if rf := budgetRefusal(sessionID, b, own, tokens, cost); rf != nil {
		if minted {
			rf.msg = mintedBudgetRefusal(sessionID, b, tokens, cost)
		}
		release()
		return nil, rf, nil
	}
	return release, nil, nil
}

func (l *ledger) load(ctx context.Context, sessionID string, acc *account) error {
	acc.loadMu.Lock()
	defer acc.loadMu.Unlock()
	if acc.loaded {
		return nil
	}
	if l.spend != nil {
		t, c, err := l.spend.Load(ctx, sessionID)
		if err != nil {
			return fmt.Errorf("loading the spend of session %q: %w", sessionID, err)
		}
		l.mu.Lock()
		acc.tokens += max(t, 0)
		acc.cost += max(c, 0)
		l.mu.Unlock()
	}
	acc.loaded = true
	return nil
}

// charge adds a finished call's tokens and cost to the session.
func (l *ledger) charge(sessionID string, tokens int64, cost float64) {
	if tokens <= 0 && cost <= 0 {
		return
	}
	l.mu.Lock()
	acc := l.accounts[sessionID]
	if acc == nil {
		acc = &account{}
		l.accounts[sessionID] = acc
	}
	acc.tokens += max(tokens, 0)
	acc.cost += max(cost, 0)
	l.mu.Unlock()
}

// spent returns the session's spend as the ledger knows it.
func (l *ledger) spent(sessionID string) (tokens int64, cost float64) {
	l.mu.Lock()
	defer l.mu.Unlock()
	if acc := l.accounts[sessionID]; acc != nil {
		return acc.tokens, acc.cost
	}
	return 0, 0
}

// mintedBudgetRefusal says which budget of a minted session is spent.
func mintedBudgetRefusal(sessionID string, b Budget, tokens int64, cost float64) string {
	if b.MaxTokens > 0 && tokens >= b.MaxTokens {
		return fmt.Sprintf("model token budget of session %q is spent (%d of %d tokens used); the budget was set when the session was minted: an operator can mint a new session", sessionID, tokens, b.MaxTokens)
	}
	return fmt.Sprintf("model cost budget of session %q is spent ($%.4f of $%.2f used); the budget was set when the session was minted: an operator can mint a new session", sessionID, cost, b.MaxCostUSD)
}

// budgetRefusal says which budget is spent and which setting raises it.
func budgetRefusal(sessionID string, b Budget, own bool, tokens int64, cost float64) *refusal {
	field := "relay.budget"
	if own {
		field = "relay.session_budgets." + sessionID
	}
	rf := &refusal{status: http.StatusForbidden, kind: kindBudget, reason: "budget", noRetry: true}
	switch {
	case b.MaxTokens > 0 && tokens >= b.MaxTokens:
		rf.msg = fmt.Sprintf("model token budget of session %q is spent (%d of %d tokens used); an operator can raise %s.max_tokens in gateway.yaml", sessionID, tokens, b.MaxTokens, field)
	case b.MaxCostUSD > 0 && cost >= b.MaxCostUSD:
		rf.msg = fmt.Sprintf("model cost budget of session %q is spent ($%.4f of $%.2f used); an operator can raise %s.max_cost_usd in gateway.yaml", sessionID, cost, b.MaxCostUSD, field)
	default:
		return nil
	}
	return rf
}
