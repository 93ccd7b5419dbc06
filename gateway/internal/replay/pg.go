package replay

import (
	"context"

	"github.com/jackc/pgx/v5/pgxpool"

	"ironcurtain.dev/gateway/internal/audit"
)

// PG streams recorded decisions from the audit trail (audit.EachDecision),
// one row at a time in the order they were decided, in one read-only
// snapshot: memory does not grow with the number of rows.
type PG struct {
	Pool *pgxpool.Pool
}

var _ Source = PG{}

// Each calls fn with every record matching f.
func (p PG) Each(ctx context.Context, f Filter, fn func(*Record) error) error {
	return audit.EachDecision(ctx, p.Pool, audit.DecisionFilter{Since: f.Since, Until: f.Until, Session: f.Session, Server: f.Server}, fn)
}
