package store

import (
	"context"
	"fmt"

	"github.com/jackc/pgx/v5/pgxpool"
)

// LLMSpend reports what a session spent on model calls, summed over
// llm_calls, so the relay's budgets survive a gateway restart. It satisfies
// llmrelay.Spend.
type LLMSpend struct {
	Pool *pgxpool.Pool
}

// Load returns the tokens (input + output) and estimated cost a session spent.
func (s LLMSpend) Load(ctx context.Context, sessionID string) (tokens int64, costUSD float64, err error) {
	err = s.Pool.QueryRow(ctx,
		`SELECT COALESCE(SUM(input_tokens + output_tokens), 0)::bigint, COALESCE(SUM(cost_usd), 0)::double precision
		   FROM llm_calls WHERE session_id = $1`, sessionID).Scan(&tokens, &costUSD)
	if err != nil {
		return 0, 0, fmt.Errorf("loading model spend of session %s: %w", sessionID, err)
	}
	return tokens, costUSD, nil
}
