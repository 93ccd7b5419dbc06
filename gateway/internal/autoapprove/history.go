package autoapprove

import (
	"context"
	"time"

	"github.com/jackc/pgx/v5/pgxpool"

	"ironcurtain.dev/gateway/internal/audit"
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

// PGHistory reads the audit trail (audit.RecentDecisions).
type PGHistory struct{ Pool *pgxpool.Pool }

var _ History = PGHistory{}

// Recent implements History.
func (h PGHistory) Recent(ctx context.Context, session, exclude string, n int) ([]Decision, error) {
	rows, err := audit.RecentDecisions(ctx, h.Pool, session, exclude, n, historyFieldChars)
	if err != nil {
		return nil, err
	}
	out := make([]Decision, 0, len(rows))
	for _, r := range rows {
		out = append(out, Decision{At: r.At, Tool: r.Tool, Decision: r.Decision, Rule: r.Rule})
	}
	return out, nil
}
