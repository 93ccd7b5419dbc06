package autoapprove

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"strings"
	"time"

	"github.com/prometheus/client_golang/prometheus"

	"ironcurtain.dev/gateway/internal/escalation"
	"ironcurtain.dev/gateway/internal/llmprovider"
	"ironcurtain.dev/gateway/internal/store"
)

// historyTimeout bounds reading the session's recent decisions.
const historyTimeout = 3 * time.Second

// Config configures the Approver. Every field is required (the config
// package's defaults fill them: config.AutoApproverConfig.WithDefaults).
type Config struct {
	Upstream        llmprovider.Upstream // provider, base URL and key (the relay's: llmrelay.ResolveUpstream)
	Model           string
	Timeout         time.Duration // one review's model call; then: left to a human
	MaxOutputTokens int
	MaxPromptBytes  int // the data block; a larger call is left to a human unseen
	RecentDecisions int
	RatePerMinute   int
	MaxConcurrent   int
	Budget          Budget
	// Price estimates a call's cost in US dollars (nil: the price table
	// without the relay's overrides, llmprovider.EstimateCost). ok false: the model's price is unknown.
	Price func(model string, in, out int64) (cost float64, ok bool)
}

// Deps are the Approver's collaborators.
type Deps struct {
	History History // required
	// Budget keeps the daily budget shared by every replica
	// (store.AutoApproverBudget); nil: this process's alone.
	Budget     BudgetStore
	Registerer prometheus.Registerer
	Logger     *slog.Logger
	Now        func() time.Time // nil: time.Now
}

// Approver implements escalation.Reviewer.
type Approver struct {
	cfg     Config
	client  *client
	history History
	ledger  *ledger
	shared  BudgetStore // nil: the ledger keeps the budget
	m       *metrics
	log     *slog.Logger
	now     func() time.Time
}

var _ escalation.Reviewer = (*Approver)(nil)

// New builds the Approver. The model's price must be known (relay.prices)
// so that the cost budget means something.
func New(cfg Config, d Deps) (*Approver, error) {
	switch {
	case cfg.Upstream.BaseURL == nil:
		return nil, errors.New("creating the auto-approver: no model API (upstream)")
	case cfg.Model == "":
		return nil, errors.New("creating the auto-approver: no model")
	case cfg.Timeout <= 0 || cfg.MaxOutputTokens <= 0 || cfg.MaxPromptBytes <= 0 || cfg.RecentDecisions <= 0 ||
		cfg.RatePerMinute <= 0 || cfg.MaxConcurrent <= 0:
		return nil, errors.New("creating the auto-approver: timeout, token, prompt, decision, rate and concurrency limits must be positive")
	case cfg.Budget.CallsPerDay <= 0 || cfg.Budget.TokensPerDay <= 0 || !(cfg.Budget.CostUSDPerDay > 0):
		return nil, errors.New("creating the auto-approver: every daily budget (calls, tokens, cost) must be positive")
	case d.History == nil:
		return nil, errors.New("creating the auto-approver: no history of decisions")
	}
	if cfg.Price == nil {
		cfg.Price = func(model string, in, out int64) (float64, bool) {
			return llmprovider.EstimateCost(nil, model, in, out)
		}
	}
	if _, ok := cfg.Price(cfg.Model, 1, 1); !ok {
		return nil, fmt.Errorf("creating the auto-approver: the price of model %q is unknown, so its cost budget could not be kept; add it to relay.prices", cfg.Model)
	}
	m, err := newMetrics(d.Registerer)
	if err != nil {
		return nil, fmt.Errorf("creating the auto-approver: %w", err)
	}
	log := d.Logger
	if log == nil {
		log = slog.New(slog.DiscardHandler)
	}
	now := d.Now
	if now == nil {
		now = time.Now
	}
	return &Approver{
		cfg: cfg, client: newClient(cfg.Upstream, cfg.Model, cfg.MaxOutputTokens), history: d.History,
		ledger: newLedger(cfg.Budget, cfg.RatePerMinute, cfg.MaxConcurrent), shared: d.Budget, m: m, log: log, now: now,
	}, nil
}

// Close releases idle connections to the model API.
func (a *Approver) Close() error {
	a.client.close()
	return nil
}

// Seed adds spend already recorded today (escalation.PG.AutoSpentSince of
// the UTC day's start) to the daily budget. With a shared budget it sets
// the day's spend only when no replica has counted the day yet.
func (a *Approver) Seed(ctx context.Context, s escalation.AutoSpend) error {
	if a.shared != nil {
		if err := a.shared.Seed(ctx, a.DayStart(), store.DaySpend{Calls: s.Calls, Tokens: s.Tokens, CostUSD: s.CostUSD}); err != nil {
			return err
		}
		a.publishSpend()
		return nil
	}
	a.ledger.seed(a.now(), s.Calls, s.Tokens, s.CostUSD)
	a.publishSpend()
	return nil
}

// DayStart is the start of the current UTC day, the budget's period.
func (a *Approver) DayStart() time.Time { return utcDay(a.now()) }

// Review implements escalation.Reviewer. It approves only when the model
// answered, in time and within budget, exactly {"verdict":"approve",...};
// every other path leaves the call to a human.
func (a *Approver) Review(ctx context.Context, req escalation.Request) escalation.Verdict {
	start := a.now()
	v := a.review(ctx, req)
	v.Model = a.cfg.Model
	a.m.reviews.WithLabelValues(v.Outcome).Inc()
	a.m.seconds.Observe(a.now().Sub(start).Seconds())
	level := slog.LevelInfo
	if v.Outcome == escalation.OutcomeError || v.Outcome == escalation.OutcomeMalformed {
		level = slog.LevelWarn
	}
	a.log.Log(ctx, level, "auto-approver", "call_id", req.CallID, "session", req.SessionID, "tool", req.Server+"__"+req.Tool,
		"rule", req.Rule, "outcome", v.Outcome, "approve", v.Approve, "tokens", v.Tokens)
	return v
}

func human(outcome, why string) escalation.Verdict {
	return escalation.Verdict{Outcome: outcome, Reasoning: why}
}

func (a *Approver) review(ctx context.Context, req escalation.Request) escalation.Verdict {
	// Belt and braces: the escalator consults the reviewer only for these.
	if !escalation.Eligible(req) || strings.HasPrefix(req.Rule, "structural-") {
		return human(escalation.OutcomeError, "not a compiled rule's escalation: not shown to the model")
	}
	hctx, cancel := context.WithTimeout(ctx, historyTimeout)
	recent, err := a.history.Recent(hctx, req.SessionID, req.CallID, a.cfg.RecentDecisions)
	cancel()
	if err != nil {
		a.log.Warn("auto-approver: reading recent decisions", "call_id", req.CallID, "err", err)
		return human(escalation.OutcomeError, "the session's recent decisions could not be read")
	}
	p, err := buildPrompt(req, recent, a.now(), a.cfg.MaxPromptBytes, newNonce())
	if errors.Is(err, errTooLarge) {
		return human(escalation.OutcomeTooLarge, fmt.Sprintf("the call is larger than the %d bytes the model may be shown", a.cfg.MaxPromptBytes))
	}
	if err != nil {
		return human(escalation.OutcomeError, "the call could not be rendered for the model")
	}
	switch a.ledger.reserve(a.now(), a.shared != nil) {
	case "budget":
		return human(escalation.OutcomeBudget, "the auto-approver's daily budget is spent")
	case "rate_limited":
		return human(escalation.OutcomeRateLimited, "the auto-approver's rate limit was reached")
	}
	day := a.DayStart()
	if v, ok := a.reserveShared(ctx, req, day); !ok {
		a.ledger.charge(a.now(), 0, 0) // frees the concurrency slot
		return v
	}
	mctx, cancel := context.WithTimeout(ctx, a.cfg.Timeout)
	r, err := a.client.complete(mctx, p)
	timedOut := mctx.Err() != nil
	cancel()
	tokens, cost := a.usage(p, r)
	a.ledger.charge(a.now(), tokens, cost)
	a.chargeShared(ctx, req, day, tokens, cost)
	a.m.tokens.Add(float64(tokens))
	a.m.cost.Add(cost)
	a.publishSpend()
	spent := func(v escalation.Verdict) escalation.Verdict { v.Tokens, v.CostUSD = tokens, cost; return v }
	switch {
	case err != nil && timedOut:
		return spent(human(escalation.OutcomeTimeout, fmt.Sprintf("the model did not answer within %s", a.cfg.Timeout)))
	case err != nil:
		a.log.Warn("auto-approver: model call failed", "call_id", req.CallID, "err", err)
		return spent(human(escalation.OutcomeError, "the model call failed: "+short(err.Error())))
	}
	ans, err := parseAnswer(strings.TrimSpace(r.Text))
	switch {
	case errors.Is(err, errDenied):
		return spent(human(escalation.OutcomeModelDenied, "the model answered deny (it may only approve or leave to a human): "+ans.Reasoning))
	case err != nil:
		return spent(human(escalation.OutcomeMalformed, "the model's answer was not the required JSON object"))
	case ans.Verdict == "approve":
		return spent(escalation.Verdict{Approve: true, Outcome: escalation.OutcomeApproved, Reasoning: ans.Reasoning})
	}
	return spent(human(escalation.OutcomeHuman, ans.Reasoning))
}

// usage is a call's tokens and estimated cost: the API's usage, or, when it
// reported none, an upper estimate (the prompt's bytes / 3 and the output
// limit), so a silent API cannot spend the budget for free.
func (a *Approver) usage(p prompt, r reply) (tokens int64, cost float64) {
	in, out := r.InputTokens, r.OutputTokens
	if !r.HaveUsage {
		in, out = int64(len(p.System)+len(p.User))/3+1, int64(a.cfg.MaxOutputTokens)
	}
	in, out = max(in, 0), max(out, 0)
	cost, _ = a.cfg.Price(a.cfg.Model, in, out)
	return in + out, cost
}

// reserveShared takes one call of the shared daily budget. ok false: the
// verdict leaves the call to a human (spent, or the budget could not be
// read: never a model call the budget does not cover).
func (a *Approver) reserveShared(ctx context.Context, req escalation.Request, day time.Time) (escalation.Verdict, bool) {
	if a.shared == nil {
		return escalation.Verdict{}, true
	}
	bctx, cancel := context.WithTimeout(ctx, budgetTimeout)
	s, ok, err := a.shared.Reserve(bctx, day, a.cfg.Budget.CallsPerDay, a.cfg.Budget.TokensPerDay, a.cfg.Budget.CostUSDPerDay)
	cancel()
	switch {
	case err != nil:
		a.log.Warn("auto-approver: reserving from the shared budget", "call_id", req.CallID, "err", err)
		return human(escalation.OutcomeError, "the auto-approver's budget could not be checked"), false
	case !ok:
		return human(escalation.OutcomeBudget, "the auto-approver's daily budget is spent"), false
	}
	a.ledger.set(a.now(), s)
	return escalation.Verdict{}, true
}

// chargeShared adds a call's usage to the shared budget. A failure is
// logged: the call was reserved, so the calls limit still holds.
func (a *Approver) chargeShared(ctx context.Context, req escalation.Request, day time.Time, tokens int64, cost float64) {
	if a.shared == nil {
		return
	}
	bctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), budgetTimeout)
	s, err := a.shared.Charge(bctx, day, tokens, cost)
	cancel()
	if err != nil {
		a.log.Error("auto-approver: charging the shared budget", "call_id", req.CallID, "tokens", tokens, "cost_usd", cost, "err", err)
		return
	}
	a.ledger.set(a.now(), s)
}

func (a *Approver) publishSpend() {
	calls, tokens, cost := a.ledger.spent(a.now())
	a.m.dayCalls.Set(float64(calls))
	a.m.dayTokens.Set(float64(tokens))
	a.m.dayCost.Set(cost)
}
