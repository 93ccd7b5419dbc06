package escalation

import (
	"context"
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"errors"
	"fmt"
	"log/slog"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	"github.com/google/uuid"
	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgxpool"
	"github.com/prometheus/client_golang/prometheus"

	"ironcurtain.dev/gateway/internal/audit"
)

// Defaults of Config.
const (
	DefaultTimeout        = 300 * time.Second
	DefaultPollInterval   = 5 * time.Second
	DefaultSweepInterval  = 15 * time.Second
	DefaultWebhookTimeout = 5 * time.Second
)

// Statuses of an escalation.
const (
	StatusPending   = "pending"
	StatusApproved  = "approved"
	StatusDenied    = "denied"
	StatusExpired   = "expired"
	StatusCancelled = "cancelled"
)

// Kinds of escalated requests.
const (
	KindToolCall = "tool_call"
	KindEgress   = "egress"
)

// notifyChannel is the LISTEN/NOTIFY channel; the payload is the id.
const notifyChannel = "ironcurtain_escalations"

// Config configures the Postgres escalator. The zero value uses defaults
// and sends no webhook.
type Config struct {
	// Timeout after which a pending escalation expires (denied).
	Timeout time.Duration
	// WebhookURL receives a Slack-compatible JSON message for every new
	// escalation ("" = none). Failures are logged and counted, never block.
	WebhookURL     string
	WebhookTimeout time.Duration
	// PollInterval is a safety net: a waiter re-reads its row this often
	// even without a notification (e.g. while the listener reconnects).
	PollInterval time.Duration
	// SweepInterval is how often overdue pending rows are expired, so an
	// escalation whose gateway died does not stay pending.
	SweepInterval time.Duration
	// ReuseWindow is how long after its approval an escalation whose own
	// call never ran may still be used by an identical retry (default:
	// Timeout). The escalation's own call is not bound by it.
	ReuseWindow time.Duration
}

func (c Config) withDefaults() Config {
	if c.Timeout <= 0 {
		c.Timeout = DefaultTimeout
	}
	if c.PollInterval <= 0 {
		c.PollInterval = DefaultPollInterval
	}
	if c.SweepInterval <= 0 {
		c.SweepInterval = DefaultSweepInterval
	}
	if c.WebhookTimeout <= 0 {
		c.WebhookTimeout = DefaultWebhookTimeout
	}
	if c.ReuseWindow <= 0 {
		c.ReuseWindow = c.Timeout
	}
	return c
}

// Errors of the Postgres escalator (wrapped; test with errors.Is).
var (
	ErrNotFound        = errors.New("no such escalation")
	ErrAlreadyDecided  = errors.New("escalation is already decided")
	ErrShuttingDown    = errors.New("the gateway is shutting down; the escalation stays pending and the call can be retried")
	ErrInvalidRequest  = errors.New("invalid escalation request")
	ErrInvalidDecision = errors.New("invalid decision")
	ErrInvalidFilter   = errors.New("invalid filter")
	// ErrApprovalUsed: the approval already ran another call (an approval
	// runs at most one call).
	ErrApprovalUsed = errors.New("the approval was already used by another call")
	// ErrApprovalStale: the escalation a call attached to was decided
	// otherwise (denied, expired, cancelled) before the call could attach,
	// or its approval is older than Config.ReuseWindow.
	ErrApprovalStale = errors.New("the escalation can no longer be used by this call")
)

// openTimeout bounds creating or finding the escalation row. That step is not
// cut short when the caller gives up: the call's decision row already names
// the escalation, so the row should exist.
const openTimeout = 5 * time.Second

// PG is the Postgres-backed Escalator: rows in escalations, waiters woken by
// LISTEN/NOTIFY on any replica (one listening connection per gateway),
// expiry after Config.Timeout, a webhook for new escalations, and the
// session-scoped "approve similar" whitelist.
type PG struct {
	pool     *pgxpool.Pool
	cfg      Config
	log      *slog.Logger
	m        *metrics
	listener *listener
	hook     *webhook

	reviewer atomic.Pointer[reviewerBox] // the auto-approver (auto.go); nil: none

	closeOnce sync.Once
	closing   chan struct{}
	wg        sync.WaitGroup
}

var _ Escalator = (*PG)(nil)

// NewPG starts the escalator: its listener connection and expiry sweeper.
// reg receives metrics (nil: not registered), log receives failures (nil:
// discarded). Close stops it.
func NewPG(pool *pgxpool.Pool, cfg Config, reg prometheus.Registerer, log *slog.Logger) (*PG, error) {
	if pool == nil {
		return nil, errors.New("creating escalator: nil pool")
	}
	if log == nil {
		log = slog.New(slog.DiscardHandler)
	}
	cfg = cfg.withDefaults()
	m, err := newMetrics(reg)
	if err != nil {
		return nil, fmt.Errorf("creating escalator: %w", err)
	}
	p := &PG{pool: pool, cfg: cfg, log: log, m: m, closing: make(chan struct{})}
	p.listener = newListener(pool, log, m)
	if cfg.WebhookURL != "" {
		p.hook, err = newWebhook(cfg.WebhookURL, cfg.WebhookTimeout, log, m)
		if err != nil {
			return nil, fmt.Errorf("creating escalator: %w", err)
		}
	}
	ctx, cancel := context.WithCancel(context.Background())
	p.wg.Add(2)
	go func() { defer p.wg.Done(); p.listener.run(ctx) }()
	go func() { defer p.wg.Done(); p.sweepLoop(ctx) }()
	if p.hook != nil {
		p.wg.Add(1)
		go func() { defer p.wg.Done(); p.hook.run(ctx) }()
	}
	go func() { <-p.closing; cancel() }()
	return p, nil
}

// Close stops the listener, the sweeper and the webhook sender. Waiting
// Escalate calls return ErrShuttingDown; their rows stay pending (they
// expire on schedule; a retry with the same call id re-attaches, and an
// identical retry with a new call id finds them with Reusable). Close may
// be called more than once.
func (p *PG) Close() error {
	p.closeOnce.Do(func() { close(p.closing) })
	p.wg.Wait()
	return nil
}

// Escalate implements Escalator. A call id that already has an escalation
// re-attaches to it (a retry after a gateway restart) instead of opening a
// second one; with Request.Attach the call waits on, or runs on, the
// escalation of an identical earlier call (Reuser). An approved Result is
// handed out once: the escalation records the call that runs on it, and any
// other call gets ErrApprovalUsed.
func (p *PG) Escalate(ctx context.Context, req Request) (Result, error) {
	if err := validateRequest(&req); err != nil {
		return Result{}, err
	}
	args := audit.Redact(req.Args)
	digest := argsDigest(req.Server, req.Tool, args)

	octx, cancel := context.WithTimeout(context.WithoutCancel(ctx), openTimeout)
	e, err := p.find(octx, req, args, digest, p.reviewFunc(ctx, req))
	cancel()
	if err != nil {
		return Result{}, err
	}
	if e.Status == StatusPending {
		res, err := p.wait(ctx, e)
		if err != nil || !res.Approved {
			return res, err
		}
	} else if e.Status != StatusApproved {
		if req.Attach && e.CallID != req.CallID {
			// Decided otherwise between Reusable and now: this retry did
			// not wait for that answer; it asks again.
			return Result{}, fmt.Errorf("escalation %s is %s: %w", e.ID, e.Status, ErrApprovalStale)
		}
		return e.result(), nil
	}
	return p.consume(ctx, e.ID, req.CallID)
}

// find returns the escalation the call waits on: its own (by call id), the
// one it attaches to, or a new one.
//
// review, when not nil, is the auto-approver's review of a new escalation
// (reviewFunc); it runs before the row is created.
func (p *PG) find(ctx context.Context, req Request, args []byte, digest string, review func() Verdict) (Escalation, error) {
	e, err := p.getByCallID(ctx, req.CallID)
	switch {
	case err == nil:
		return e, nil
	case !errors.Is(err, ErrNotFound):
		return Escalation{}, fmt.Errorf("escalating: %w", err)
	case req.Attach:
		return p.attach(ctx, req, digest)
	}
	return p.open(ctx, req, args, digest, review)
}

func validateRequest(req *Request) error {
	if req.CallID == "" {
		return fmt.Errorf("%w: no call id", ErrInvalidRequest)
	}
	if req.Kind == "" {
		req.Kind = KindToolCall
	}
	if req.Kind != KindToolCall && req.Kind != KindEgress {
		return fmt.Errorf("%w: kind %q is not tool_call or egress", ErrInvalidRequest, req.Kind)
	}
	if req.ID != "" && len(req.ID) > 128 {
		return fmt.Errorf("%w: id longer than 128 bytes", ErrInvalidRequest)
	}
	if req.Attach && (req.ID == "" || req.Kind != KindToolCall) {
		return fmt.Errorf("%w: attaching needs the id of a tool call's escalation", ErrInvalidRequest)
	}
	return nil
}

// argsDigest identifies "the same call" for exact-argument approvals.
func argsDigest(server, tool string, args []byte) string {
	h := sha256.New()
	for _, s := range []string{server, "\x00", tool, "\x00"} {
		h.Write([]byte(s))
	}
	h.Write(args)
	return hex.EncodeToString(h.Sum(nil))
}

// open creates the escalation, or an approved one when an "approve
// similar" entry of the session covers the call or the auto-approver
// (review) approves it. The review's verdict is stored on the row either way.
func (p *PG) open(ctx context.Context, req Request, args []byte, digest string, review func() Verdict) (Escalation, error) {
	id := req.ID
	if id == "" {
		id = uuid.NewString()
	}
	approval, err := p.matchSimilar(ctx, req, digest)
	if err != nil {
		return Escalation{}, fmt.Errorf("escalating: %w", err)
	}
	status, by, why := StatusPending, "", ""
	var auto *Verdict
	switch {
	case approval != "":
		status, by, why = StatusApproved, "similar:"+approval, "covered by an earlier \"approve similar\" of this session"
	case review != nil:
		v := review()
		auto = &v
		if v.approves() {
			status, by, why = autoDecision(v)
		}
		// The review may have taken most of ctx's time: creating the row
		// gets its own.
		var cancel context.CancelFunc
		ctx, cancel = context.WithTimeout(context.WithoutCancel(ctx), openTimeout)
		defer cancel()
	}
	params := []any{id, req.CallID, audit.RedactString(req.SessionID), req.Kind, audit.RedactString(req.Server), audit.RedactString(req.Tool),
		string(args), digest, audit.RedactString(req.Rule), audit.RedactString(req.Reason), audit.RedactString(req.Resource),
		status, p.cfg.Timeout.Seconds(), by, why, newExactDigest(req)}
	row := p.pool.QueryRow(ctx, `
INSERT INTO escalations (id, call_id, session_id, kind, server, tool, args, args_digest, rule, reason, resource,
                         status, expires_at, decided_at, decided_by, decision_reason, exact_digest,
                         auto_verdict, auto_outcome, auto_model, auto_reasoning, auto_at, auto_tokens, auto_cost_usd)
VALUES ($1, $2, $3, $4, $5, $6, $7, $8, $9, $10, $11, $12, now() + make_interval(secs => $13::float8),
        CASE WHEN $12 = 'pending' THEN NULL ELSE now() END, $14, $15, $16,
        $17, $18, $19, $20, CASE WHEN $17::text IS NULL THEN NULL ELSE now() END, $21, $22)
ON CONFLICT (call_id) DO NOTHING
RETURNING `+escalationColumns, append(params, autoParams(auto)...)...)
	e, err := scanEscalation(row)
	if errors.Is(err, pgx.ErrNoRows) { // lost a race with another replica for this call id
		return p.getByCallID(ctx, req.CallID)
	}
	if err != nil {
		return Escalation{}, fmt.Errorf("escalating: creating escalation: %w", err)
	}
	if e.Status == StatusPending {
		p.m.opened.WithLabelValues(e.Kind).Inc()
		p.notifyOpened(ctx, e.ID)
		if p.hook != nil {
			p.hook.announce(e)
		}
	} else if auto != nil {
		p.m.decided.WithLabelValues(e.Status, "auto").Inc()
	} else {
		p.m.decided.WithLabelValues(e.Status, "similar").Inc()
	}
	return e, nil
}

// wait blocks until e is decided, expires, ctx ends or the gateway closes.
//
// A database outage shorter than the escalation's remaining time does not
// end the wait: a read that fails for a transient reason (connection
// refused or broken, a restart, a timeout) is retried with jittered
// exponential back-off until the escalation's deadline, as last read from
// the database (before the first successful read: Config.Timeout from now,
// an upper bound). Only when the deadline passes while the database is
// still unreachable does the wait end, with ErrDatabaseUnavailable.
func (p *PG) wait(ctx context.Context, e Escalation) (Result, error) {
	wake, unsubscribe := p.listener.subscribe(e.ID)
	defer unsubscribe()
	deadline := time.Now().Add(p.cfg.Timeout)
	for {
		// Re-read after subscribing: a decision that landed before the
		// subscription is seen here, one after it wakes us.
		var (
			cur       Escalation
			remaining time.Duration
		)
		err := p.retryUntil(ctx, deadline, wake, "waiting for escalation "+e.ID, func(actx context.Context) error {
			var err error
			cur, remaining, err = p.getWithRemaining(actx, e.ID)
			if err == nil && cur.Status == StatusPending && remaining <= 0 {
				if _, err = p.expireOverdue(actx, e.ID); err == nil {
					cur, remaining, err = p.getWithRemaining(actx, e.ID)
				}
			}
			return err
		})
		if err != nil {
			if ctx.Err() != nil {
				return Result{}, fmt.Errorf("waiting for escalation %s: %w", e.ID, ctx.Err())
			}
			return Result{}, fmt.Errorf("waiting for escalation %s: %w", e.ID, err)
		}
		if cur.Status != StatusPending {
			p.m.waitSeconds.Observe(time.Since(cur.CreatedAt).Seconds())
			return cur.result(), nil
		}
		deadline = time.Now().Add(remaining)
		if remaining <= 0 {
			continue // decided (or expired) by someone else in between: read again
		}
		timer := time.NewTimer(min(remaining, p.cfg.PollInterval))
		select {
		case <-wake:
		case <-timer.C:
		case <-ctx.Done():
			timer.Stop()
			return Result{}, fmt.Errorf("waiting for escalation %s: %w", e.ID, ctx.Err())
		case <-p.closing:
			timer.Stop()
			return Result{}, fmt.Errorf("waiting for escalation %s: %w", e.ID, ErrShuttingDown)
		}
		timer.Stop()
	}
}

// expireOverdue marks pending escalations past their deadline expired (one
// id, or all when id is "") and notifies their waiters.
func (p *PG) expireOverdue(ctx context.Context, id string) (int, error) {
	var n int
	err := pgx.BeginFunc(ctx, p.pool, func(tx pgx.Tx) error {
		rows, err := tx.Query(ctx, `
UPDATE escalations
SET status = 'expired', decided_at = now(), decided_by = 'timeout',
    decision_reason = 'nobody decided within ' || $2::text
WHERE status = 'pending' AND expires_at <= now() AND ($1 = '' OR id = $1)
RETURNING id, kind`, id, p.cfg.Timeout.String())
		if err != nil {
			return err
		}
		var ids []string
		for rows.Next() {
			var eid, kind string
			if err := rows.Scan(&eid, &kind); err != nil {
				rows.Close()
				return err
			}
			ids = append(ids, eid)
			p.m.decided.WithLabelValues(StatusExpired, "timeout").Inc()
		}
		rows.Close()
		if err := rows.Err(); err != nil {
			return err
		}
		for _, eid := range ids {
			if _, err := tx.Exec(ctx, `SELECT pg_notify($1, $2)`, notifyChannel, eid); err != nil {
				return err
			}
		}
		n = len(ids)
		return nil
	})
	return n, err
}

func (p *PG) sweepLoop(ctx context.Context) {
	t := time.NewTicker(p.cfg.SweepInterval)
	defer t.Stop()
	for {
		if n, err := p.expireOverdue(ctx, ""); err != nil && ctx.Err() == nil {
			p.log.Warn("expiring overdue escalations", "err", err)
		} else if n > 0 {
			p.log.Info("expired overdue escalations", "count", n)
		}
		var pending int64
		if err := p.pool.QueryRow(ctx, `SELECT count(*) FROM escalations WHERE status = 'pending'`).Scan(&pending); err == nil {
			p.m.pending.Set(float64(pending))
		}
		select {
		case <-ctx.Done():
			return
		case <-t.C:
		}
	}
}

// Escalation is one stored escalation, as operators see it.
type Escalation struct {
	ID             string          `json:"id"`
	CallID         string          `json:"call_id"`
	SessionID      string          `json:"session_id"`
	Kind           string          `json:"kind"`
	Server         string          `json:"server,omitempty"`
	Tool           string          `json:"tool,omitempty"`
	Args           json.RawMessage `json:"args"`
	Rule           string          `json:"rule,omitempty"`
	Reason         string          `json:"reason,omitempty"`
	Resource       string          `json:"resource,omitempty"`
	Status         string          `json:"status"`
	CreatedAt      time.Time       `json:"created_at"`
	ExpiresAt      time.Time       `json:"expires_at"`
	DecidedAt      *time.Time      `json:"decided_at,omitempty"`
	DecidedBy      string          `json:"decided_by,omitempty"`
	DecisionReason string          `json:"decision_reason,omitempty"`
	// ConsumedByCallID is the tool call that ran on this approval: its own
	// call, or an identical retry of it ("" while unused).
	ConsumedByCallID string     `json:"consumed_by_call_id,omitempty"`
	ConsumedAt       *time.Time `json:"consumed_at,omitempty"`
	// Auto is the auto-approver's verdict (nil: it was not consulted).
	Auto *AutoReview `json:"auto,omitempty"`
}

func (e Escalation) result() Result {
	r := Result{ID: e.ID, Approved: e.Status == StatusApproved, Status: e.Status, DecidedBy: e.DecidedBy, Reason: e.DecisionReason}
	if e.DecidedAt != nil {
		r.DecidedAt = *e.DecidedAt
	}
	if e.Status == StatusExpired && r.Reason == "" {
		r.Reason = "nobody decided in time"
	}
	return r
}

const escalationColumns = `id, call_id, session_id, kind, server, tool, args, rule, reason, resource, status,
       created_at, expires_at, decided_at, decided_by, decision_reason, consumed_by_call_id, consumed_at, ` + autoColumns

// stateColumns are escalationColumns without the arguments (NULL in their
// place): what a waiting call reads on every poll and wake. A wake of many
// waiters at once (a listener reconnect) then reads no 4 MiB argument
// texts; the arguments are read only to list, show or decide.
var stateColumns = strings.Replace(escalationColumns, "args,", "NULL::text AS args,", 1)

func scanEscalation(row pgx.Row, extra ...any) (Escalation, error) {
	var e Escalation
	var args []byte // scanned once: a 4 MiB argument text is not copied again
	var consumedBy *string
	var auto autoScan
	dest := append([]any{&e.ID, &e.CallID, &e.SessionID, &e.Kind, &e.Server, &e.Tool, &args, &e.Rule, &e.Reason, &e.Resource,
		&e.Status, &e.CreatedAt, &e.ExpiresAt, &e.DecidedAt, &e.DecidedBy, &e.DecisionReason, &consumedBy, &e.ConsumedAt}, auto.dest()...)
	dest = append(dest, extra...)
	err := row.Scan(dest...)
	e.Auto = auto.review()
	e.Args = json.RawMessage(args)
	if consumedBy != nil {
		e.ConsumedByCallID = *consumedBy
	}
	return e, err
}

func (p *PG) getByCallID(ctx context.Context, callID string) (Escalation, error) {
	e, err := scanEscalation(p.pool.QueryRow(ctx, `SELECT `+stateColumns+` FROM escalations WHERE call_id = $1`, callID))
	if errors.Is(err, pgx.ErrNoRows) {
		return e, ErrNotFound
	}
	return e, err
}

// getWithRemaining reads an escalation and the time left before it
// expires, by the database's clock (replicas' clocks may differ).
func (p *PG) getWithRemaining(ctx context.Context, id string) (Escalation, time.Duration, error) {
	var secs float64
	e, err := scanEscalation(p.pool.QueryRow(ctx, `SELECT `+stateColumns+`, extract(epoch FROM expires_at - now())::float8
FROM escalations WHERE id = $1`, id), &secs)
	if errors.Is(err, pgx.ErrNoRows) {
		return e, 0, ErrNotFound
	}
	return e, time.Duration(secs * float64(time.Second)), err
}
