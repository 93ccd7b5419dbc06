package store

import (
	"context"
	"errors"
	"fmt"
	"time"

	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgxpool"
)

// DaySpend is what the auto-approver spent on one UTC day.
type DaySpend struct {
	Calls   int64
	Tokens  int64
	CostUSD float64
}

// AutoApproverBudget keeps the auto-approver's daily budget in Postgres
// (auto_approver_budget, migration 0010), so every replica spends from one
// budget. It satisfies autoapprove.BudgetStore.
type AutoApproverBudget struct {
	Pool *pgxpool.Pool
}

func day(t time.Time) time.Time {
	t = t.UTC()
	return time.Date(t.Year(), t.Month(), t.Day(), 0, 0, 0, 0, time.UTC)
}

// Seed sets day's spend to s unless the day is already counted (another
// replica, or this one before a restart, began it): the first writer wins.
func (b AutoApproverBudget) Seed(ctx context.Context, d time.Time, s DaySpend) error {
	_, err := b.Pool.Exec(ctx, `INSERT INTO auto_approver_budget (day, calls, tokens, cost_usd) VALUES ($1, $2, $3, $4) ON CONFLICT (day) DO NOTHING`,
		day(d), max(s.Calls, 0), max(s.Tokens, 0), max(s.CostUSD, 0))
	if err != nil {
		return fmt.Errorf("seeding the auto-approver's budget: %w", err)
	}
	return nil
}

// Reserve takes one call of day's budget, atomically over every replica,
// when calls, tokens and cost are all below their limits. ok false: the
// budget is spent. It returns the day's spend after the reservation.
func (b AutoApproverBudget) Reserve(ctx context.Context, d time.Time, maxCalls, maxTokens int64, maxCost float64) (DaySpend, bool, error) {
	var s DaySpend
	err := b.Pool.QueryRow(ctx, `
INSERT INTO auto_approver_budget AS b (day, calls) SELECT $1, 1 WHERE $2::bigint > 0
ON CONFLICT (day) DO UPDATE SET calls = b.calls + 1
 WHERE b.calls < $2 AND b.tokens < $3 AND b.cost_usd < $4
RETURNING calls, tokens, cost_usd`, day(d), maxCalls, maxTokens, maxCost).Scan(&s.Calls, &s.Tokens, &s.CostUSD)
	if errors.Is(err, pgx.ErrNoRows) {
		return DaySpend{}, false, nil
	}
	if err != nil {
		return DaySpend{}, false, fmt.Errorf("reserving an auto-approver call: %w", err)
	}
	return s, true, nil
}

// Charge adds a finished call's tokens and cost to day's spend and returns
// the day's spend.
func (b AutoApproverBudget) Charge(ctx context.Context, d time.Time, tokens int64, cost float64) (DaySpend, error) {
	var s DaySpend
	err := b.Pool.QueryRow(ctx, `
INSERT INTO auto_approver_budget AS b (day, tokens, cost_usd) VALUES ($1, $2, $3)
ON CONFLICT (day) DO UPDATE SET tokens = b.tokens + $2, cost_usd = b.cost_usd + $3
RETURNING calls, tokens, cost_usd`, day(d), max(tokens, 0), max(cost, 0)).Scan(&s.Calls, &s.Tokens, &s.CostUSD)
	if err != nil {
		return DaySpend{}, fmt.Errorf("charging the auto-approver's budget: %w", err)
	}
	return s, nil
}
