package replay

import (
	"context"
	"fmt"
	"time"

	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgxpool"
)

// PG streams recorded decisions from the tool_calls table, one row at a
// time in the order they were decided: pgx reads the rows as they arrive,
// so memory does not grow with the number of rows.
type PG struct {
	Pool *pgxpool.Pool
}

var _ Source = PG{}

const selectSQL = `
SELECT call_id, session_id, at, server, tool, args, args_escaped, decision, rule, policy_version
FROM tool_calls
WHERE ($1::timestamptz IS NULL OR at >= $1) AND ($2::timestamptz IS NULL OR at < $2)
  AND ($3 = '' OR session_id = $3) AND ($4 = '' OR server = $4)
ORDER BY at, call_id`

// Each calls fn with every record matching f.
func (p PG) Each(ctx context.Context, f Filter, fn func(*Record) error) error {
	// One read-only snapshot: rows committed while the replay runs do not
	// appear half-way.
	tx, err := p.Pool.BeginTx(ctx, pgx.TxOptions{IsoLevel: pgx.RepeatableRead, AccessMode: pgx.ReadOnly})
	if err != nil {
		return fmt.Errorf("reading tool_calls: %w", err)
	}
	defer func() { _ = tx.Rollback(context.WithoutCancel(ctx)) }()
	rows, err := tx.Query(ctx, selectSQL, optTime(f.Since), optTime(f.Until), f.Session, f.Server)
	if err != nil {
		return fmt.Errorf("reading tool_calls: %w", err)
	}
	defer rows.Close()
	var r Record
	for rows.Next() {
		r = Record{Args: r.Args[:0]}
		if err := rows.Scan(&r.CallID, &r.SessionID, &r.At, &r.Server, &r.Tool, &r.Args, &r.ArgsEscaped,
			&r.Decision, &r.Rule, &r.PolicyVersion); err != nil {
			return fmt.Errorf("reading tool_calls: %w", err)
		}
		if err := fn(&r); err != nil {
			return err
		}
	}
	if err := rows.Err(); err != nil {
		return fmt.Errorf("reading tool_calls: %w", err)
	}
	return nil
}

func optTime(t time.Time) *time.Time {
	if t.IsZero() {
		return nil
	}
	return &t
}
