package escalation

import (
	"context"
	"fmt"

	"github.com/jackc/pgx/v5"

	"ironcurtain.dev/gateway/internal/audit"
)

// CancelSession cancels every pending escalation of a session inside tx
// (the revocation of a minted session runs it in its own transaction) and
// notifies their waiters when tx commits: each waiting call then ends,
// refused, and its outcome is recorded by the hub or the proxy. The
// escalation rows keep who cancelled them and why. It returns the ids of the
// cancelled escalations.
func CancelSession(ctx context.Context, tx pgx.Tx, sessionID, by, reason string) ([]string, error) {
	rows, err := tx.Query(ctx, `
UPDATE escalations
SET status = 'cancelled', decided_at = now(), decided_by = $2, decision_reason = $3
WHERE session_id = $1 AND status = 'pending'
RETURNING id`, sessionID, audit.RedactString(by), audit.RedactString(reason))
	if err != nil {
		return nil, fmt.Errorf("cancelling the escalations of session %q: %w", sessionID, err)
	}
	ids, err := pgx.CollectRows(rows, pgx.RowTo[string])
	if err != nil {
		return nil, fmt.Errorf("cancelling the escalations of session %q: %w", sessionID, err)
	}
	for _, id := range ids {
		// NOTIFY is delivered at commit: waiters read the cancelled row.
		if _, err := tx.Exec(ctx, `SELECT pg_notify($1, $2)`, notifyChannel, id); err != nil {
			return nil, fmt.Errorf("notifying the waiter of escalation %s: %w", id, err)
		}
	}
	return ids, nil
}
