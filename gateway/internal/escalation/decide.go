package escalation

import (
	"context"
	"errors"
	"fmt"
	"path"
	"strings"

	"github.com/google/uuid"
	"github.com/jackc/pgx/v5"

	"ironcurtain.dev/gateway/internal/audit"
)

// Scopes of an "approve similar" entry.
const (
	ScopeDirectory = "directory" // later calls whose resource is inside the same directory
	ScopeDomain    = "domain"    // later calls whose resource is the same domain
	ScopeExact     = "exact"     // later calls with exactly the same server, tool and arguments
)

// Decision is an operator's answer to an escalation.
type Decision struct {
	Approve bool
	By      string // operator identity (from the operator token), required
	Reason  string
	// Similar, with Approve, also approves later escalations of the same
	// session, server and tool within this scope ("" = this call only).
	// It never overrides a deny: only calls that policy escalates consult it.
	Similar string
}

// Decide records an operator's decision on a pending escalation and wakes
// its waiter, on whichever replica it waits.
func (p *PG) Decide(ctx context.Context, id string, d Decision) (Escalation, error) {
	if strings.TrimSpace(d.By) == "" {
		return Escalation{}, fmt.Errorf("%w: who decided is required", ErrInvalidDecision)
	}
	if d.Similar != "" && !d.Approve {
		return Escalation{}, fmt.Errorf("%w: \"similar\" applies to approvals only", ErrInvalidDecision)
	}
	status := StatusDenied
	if d.Approve {
		status = StatusApproved
	}
	var out Escalation
	err := pgx.BeginFunc(ctx, p.pool, func(tx pgx.Tx) error {
		cur, err := scanEscalation(tx.QueryRow(ctx, `SELECT `+escalationColumns+`
FROM escalations WHERE id = $1 FOR UPDATE`, id))
		if errors.Is(err, pgx.ErrNoRows) {
			return ErrNotFound
		}
		if err != nil {
			return err
		}
		if cur.Status != StatusPending {
			out = cur
			return fmt.Errorf("%w (%s by %s)", ErrAlreadyDecided, cur.Status, cur.DecidedBy)
		}
		var value string
		if d.Similar != "" {
			if value, err = similarValue(cur, d.Similar); err != nil {
				return err
			}
		}
		out, err = scanEscalation(tx.QueryRow(ctx, `
UPDATE escalations
SET status = CASE WHEN expires_at <= now() THEN 'expired' ELSE $2 END,
    decided_at = now(),
    decided_by = CASE WHEN expires_at <= now() THEN 'timeout' ELSE $3 END,
    decision_reason = CASE WHEN expires_at <= now() THEN 'nobody decided in time' ELSE $4 END
WHERE id = $1
RETURNING `+escalationColumns, id, status, audit.RedactString(d.By), audit.RedactString(d.Reason)))
		if err != nil {
			return err
		}
		if out.Status == StatusExpired {
			if _, err := tx.Exec(ctx, `SELECT pg_notify($1, $2)`, notifyChannel, id); err != nil {
				return err
			}
			return nil // committed below; reported as already decided
		}
		if value != "" {
			_, err = tx.Exec(ctx, `
INSERT INTO session_approvals (id, session_id, escalation_id, server, tool, scope, value, created_by)
VALUES ($1, $2, $3, $4, $5, $6, $7, $8)`, uuid.NewString(), cur.SessionID, id, cur.Server, cur.Tool, d.Similar, value, d.By)
			if err != nil {
				return fmt.Errorf("adding approve-similar entry: %w", err)
			}
		}
		_, err = tx.Exec(ctx, `SELECT pg_notify($1, $2)`, notifyChannel, id)
		return err
	})
	if err != nil {
		return out, fmt.Errorf("deciding escalation %s: %w", id, err)
	}
	if out.Status == StatusExpired {
		return out, fmt.Errorf("deciding escalation %s: %w (expired)", id, ErrAlreadyDecided)
	}
	p.m.decided.WithLabelValues(out.Status, "operator").Inc()
	return out, nil
}

// similarValue is what an approve-similar entry of scope stores for e.
func similarValue(e Escalation, scope string) (string, error) {
	switch scope {
	case ScopeExact:
		return argsDigest(e.Server, e.Tool, e.Args), nil
	case ScopeDirectory:
		dir := e.Resource
		if !cleanAbsPath(dir) {
			return "", fmt.Errorf("%w: directory scope needs the escalation's resource to be an absolute clean directory path (got %q)", ErrInvalidDecision, e.Resource)
		}
		return dir, nil
	case ScopeDomain:
		dom := strings.ToLower(strings.TrimSuffix(e.Resource, "."))
		if dom == "" || strings.ContainsAny(dom, "/ *@:") {
			return "", fmt.Errorf("%w: domain scope needs the escalation's resource to be a host name (got %q)", ErrInvalidDecision, e.Resource)
		}
		return dom, nil
	}
	return "", fmt.Errorf("%w: similar scope %q is not directory, domain or exact", ErrInvalidDecision, scope)
}

func cleanAbsPath(p string) bool {
	return strings.HasPrefix(p, "/") && path.Clean(p) == p && !strings.ContainsAny(p, "\x00\n")
}

// matchSimilar returns the id of an active approve-similar entry of the
// request's session, server and tool that covers it, or "".
func (p *PG) matchSimilar(ctx context.Context, req Request, digest string) (string, error) {
	rows, err := p.pool.Query(ctx, `
SELECT id, scope, value FROM session_approvals
WHERE session_id = $1 AND server = $2 AND tool = $3 AND revoked_at IS NULL
ORDER BY created_at`, req.SessionID, req.Server, req.Tool)
	if err != nil {
		return "", fmt.Errorf("reading approve-similar entries: %w", err)
	}
	defer rows.Close()
	for rows.Next() {
		var id, scope, value string
		if err := rows.Scan(&id, &scope, &value); err != nil {
			return "", fmt.Errorf("reading approve-similar entries: %w", err)
		}
		if similarCovers(scope, value, req.Resource, digest) {
			return id, nil
		}
	}
	return "", rows.Err()
}

// similarCovers decides whether an entry (scope, value) covers a call with
// this resource and argument digest. Directory containment is by path
// segments ("/w/src" covers "/w/src/a" but not "/w/src2"); the resource
// must be a clean absolute path (the policy engine canonicalised it).
func similarCovers(scope, value, resource, digest string) bool {
	switch scope {
	case ScopeExact:
		return value == digest
	case ScopeDomain:
		return resource != "" && strings.ToLower(strings.TrimSuffix(resource, ".")) == value
	case ScopeDirectory:
		if !cleanAbsPath(resource) || !cleanAbsPath(value) {
			return false
		}
		return resource == value || strings.HasPrefix(resource, strings.TrimSuffix(value, "/")+"/")
	}
	return false
}

// Get returns one escalation.
func (p *PG) Get(ctx context.Context, id string) (Escalation, error) {
	e, err := scanEscalation(p.pool.QueryRow(ctx, `SELECT `+escalationColumns+` FROM escalations WHERE id = $1`, id))
	if errors.Is(err, pgx.ErrNoRows) {
		return e, fmt.Errorf("reading escalation %s: %w", id, ErrNotFound)
	}
	if err != nil {
		return e, fmt.Errorf("reading escalation %s: %w", id, err)
	}
	return e, nil
}
