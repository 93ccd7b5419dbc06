package escalation

import (
	"context"
	"crypto/hmac"
	"crypto/rand"
	"crypto/sha256"
	"encoding/hex"
	"errors"
	"fmt"
	"strings"
	"time"

	"github.com/jackc/pgx/v5"

	"ironcurtain.dev/gateway/internal/audit"
)

// maxReuseCandidates bounds the rows Reusable checks: escalations of the same
// session, server, tool and redacted arguments that are still usable.
const maxReuseCandidates = 20

var _ Reuser = (*PG)(nil)

// Reusable implements Reuser. Candidates share the session, server, tool and
// redacted-argument digest (indexed); the exact call must then match the
// candidate's salted digest, since redacted-equal arguments may differ in a
// secret. An approved, unused escalation is preferred (the retry runs at
// once) over a pending one (the retry waits on it); among each, the oldest.
func (p *PG) Reusable(ctx context.Context, req Request) (string, error) {
	if err := validateRequest(&req); err != nil {
		return "", err
	}
	if req.Kind != KindToolCall || len(req.Exact) == 0 {
		return "", nil
	}
	digest := argsDigest(req.Server, req.Tool, audit.Redact(req.Args))
	rows, err := p.pool.Query(ctx, `
SELECT id, exact_digest FROM escalations
WHERE session_id = $1 AND server = $2 AND tool = $3 AND args_digest = $4
  AND kind = 'tool_call' AND consumed_by_call_id IS NULL AND status IN ('pending', 'approved')
  AND exact_digest <> ''
  AND ((status = 'pending' AND expires_at > now())
    OR (status = 'approved' AND decided_at > now() - make_interval(secs => $5::float8)))
ORDER BY status = 'approved' DESC, created_at
LIMIT `+fmt.Sprint(maxReuseCandidates),
		audit.RedactString(req.SessionID), audit.RedactString(req.Server), audit.RedactString(req.Tool), digest,
		p.cfg.ReuseWindow.Seconds())
	if err != nil {
		return "", fmt.Errorf("finding a reusable escalation: %w", err)
	}
	defer rows.Close()
	for rows.Next() {
		var id, stored string
		if err := rows.Scan(&id, &stored); err != nil {
			return "", fmt.Errorf("finding a reusable escalation: %w", err)
		}
		if exactMatches(stored, req) {
			return id, nil
		}
	}
	if err := rows.Err(); err != nil {
		return "", fmt.Errorf("finding a reusable escalation: %w", err)
	}
	return "", nil
}

// attach returns the escalation req.ID after checking that it belongs to an
// identical call of the same session: the hub found it with Reusable, and
// anything else is refused.
func (p *PG) attach(ctx context.Context, req Request, digest string) (Escalation, error) {
	var stored, storedDigest string
	e, err := scanEscalation(p.pool.QueryRow(ctx, `SELECT `+escalationColumns+`, exact_digest, args_digest
FROM escalations WHERE id = $1`, req.ID), &stored, &storedDigest)
	if errors.Is(err, pgx.ErrNoRows) {
		return Escalation{}, fmt.Errorf("attaching to escalation %s: %w", req.ID, ErrNotFound)
	}
	if err != nil {
		return Escalation{}, fmt.Errorf("attaching to escalation %s: %w", req.ID, err)
	}
	if e.Kind != KindToolCall || e.SessionID != audit.RedactString(req.SessionID) ||
		e.Server != audit.RedactString(req.Server) || e.Tool != audit.RedactString(req.Tool) ||
		storedDigest != digest || !exactMatches(stored, req) {
		return Escalation{}, fmt.Errorf("%w: escalation %s is not for an identical call of this session", ErrInvalidRequest, req.ID)
	}
	p.m.reused.WithLabelValues(e.Status).Inc()
	return e, nil
}

// consume hands the approval of escalation id to callID, once: the row
// records the call that runs on it. Another call than the escalation's own
// may use it only within Config.ReuseWindow of the approval.
//
// A transient database failure is retried (jittered back-off, at most
// consumeBudget): an approved call is not refused for a blip. When an
// earlier attempt of this consume failed after sending the update, its
// commit may have gone through with the answer lost: a row that then names
// callID is this call's own use, not another's. (Outside that case a row
// that already names callID means the call ran before: refused as used.)
func (p *PG) consume(ctx context.Context, id, callID string) (Result, error) {
	var (
		res       Result
		outcome   error
		ambiguous bool // an update was sent and its answer lost
	)
	err := p.retryUntil(ctx, time.Now().Add(consumeBudget), nil, "using the approval of escalation "+id, func(actx context.Context) error {
		res, outcome = Result{}, nil
		e, err := scanEscalation(p.pool.QueryRow(actx, `
UPDATE escalations SET consumed_by_call_id = $2, consumed_at = now()
WHERE id = $1 AND status = 'approved' AND consumed_by_call_id IS NULL
  AND (call_id = $2 OR decided_at > now() - make_interval(secs => $3::float8))
RETURNING `+escalationColumns, id, callID, p.cfg.ReuseWindow.Seconds()))
		if err == nil {
			res = e.result()
			return nil
		}
		if !errors.Is(err, pgx.ErrNoRows) {
			ambiguous = true
			return err
		}
		cur, err := scanEscalation(p.pool.QueryRow(actx, `SELECT `+escalationColumns+` FROM escalations WHERE id = $1`, id))
		if errors.Is(err, pgx.ErrNoRows) {
			return ErrNotFound
		}
		if err != nil {
			return err
		}
		switch {
		case ambiguous && cur.ConsumedByCallID == callID && cur.Status == StatusApproved:
			res = cur.result() // our own earlier attempt committed
		case cur.ConsumedByCallID != "":
			p.m.approvalRefused.WithLabelValues("used").Inc()
			res, outcome = Result{ID: id, Status: cur.Status}, fmt.Errorf("%w (call %s)", ErrApprovalUsed, cur.ConsumedByCallID)
		default:
			p.m.approvalRefused.WithLabelValues("stale").Inc()
			res, outcome = Result{ID: id, Status: cur.Status}, ErrApprovalStale
		}
		return nil
	})
	if err != nil {
		return Result{}, fmt.Errorf("using the approval of escalation %s: %w", id, err)
	}
	if outcome != nil {
		return res, fmt.Errorf("using the approval of escalation %s: %w", id, outcome)
	}
	return res, nil
}

// exactDigestVersion prefixes stored exact digests.
const exactDigestVersion = "v1"

// newExactDigest is what an escalation stores of req.Exact: a random salt and
// HMAC-SHA-256(salt, server, tool, exact call). The salt keeps equal calls of
// different escalations from having equal digests; "" when req has no exact
// call (no retry may use the escalation).
func newExactDigest(req Request) string {
	if req.Kind != KindToolCall || len(req.Exact) == 0 {
		return ""
	}
	salt := make([]byte, 16)
	_, _ = rand.Read(salt) // crypto/rand.Read never fails (Go 1.24+)
	return exactDigestVersion + ":" + hex.EncodeToString(salt) + ":" + hex.EncodeToString(exactMAC(salt, req))
}

func exactMAC(salt []byte, req Request) []byte {
	m := hmac.New(sha256.New, salt)
	for _, s := range []string{req.Server, "\x00", req.Tool, "\x00"} {
		m.Write([]byte(s))
	}
	m.Write(req.Exact)
	return m.Sum(nil)
}

// exactMatches reports whether stored (newExactDigest's form) is the digest of
// req's exact call. Anything malformed does not match.
func exactMatches(stored string, req Request) bool {
	if len(req.Exact) == 0 {
		return false
	}
	version, rest, ok := strings.Cut(stored, ":")
	if !ok || version != exactDigestVersion {
		return false
	}
	saltHex, macHex, ok := strings.Cut(rest, ":")
	if !ok {
		return false
	}
	salt, err1 := hex.DecodeString(saltHex)
	mac, err2 := hex.DecodeString(macHex)
	if err1 != nil || err2 != nil || len(salt) == 0 || len(mac) != sha256.Size {
		return false
	}
	return hmac.Equal(mac, exactMAC(salt, req))
}
