package autoapprove

import (
	"context"
	"fmt"
	"time"

	"github.com/jackc/pgx/v5/pgxpool"
)

// Decision is one recent decision of a session.
type Decision struct {
	At       time.Time
	Tool     string // server__tool
	Decision string // allow | deny | escalate
	Rule     string
}

// History reads a session's recent decisions.
type History interface {
	// Recent returns at most n decisions of session, newest first, without
	// the call excludeCallID.
	Recent(ctx context.Context, session, excludeCallID string, n int) ([]Decision, error)
}

// historyFieldChars bounds each text field read from the audit trail.
const historyFieldChars = 200

// PGHistory reads tool_calls.
type PGHistory struct{ Pool *pgxpool.Pool }

var _ History = PGHistory{}

// Recent implements History.
func (h PGHistory) Recent(ctx context.Context, session, exclude string, n int) ([]Decision, error) {
	rows, err := h.Pool.Query(ctx, `
SELECT at, left(server, $4) || '__' || left(tool, $4), decision, left(rule, $4)
FROM tool_calls
WHERE session_id = $1 AND call_id <> $2
ORDER BY seq DESC
LIMIT $3`, session, exclude, n, historyFieldChars)
	if err != nil {
		return nil, fmt.Errorf("reading the session's recent decisions: %w", err)
	}
	defer rows.Close()
	var out []Decision
	for rows.Next() {
		var d Decision
		if err := rows.Scan(&d.At, &d.Tool, &d.Decision, &d.Rule); err != nil {
			return nil, fmt.Errorf("reading the session's recent decisions: %w", err)
		}
		out = append(out, d)
	}
	if err := rows.Err(); err != nil {
		return nil, fmt.Errorf("reading the session's recent decisions: %w", err)
	}
	return out, nil
}
