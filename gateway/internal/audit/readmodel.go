package audit

// The read model of tool_calls. Every query that reads recorded tool calls
// lives in this package: QueryEach and Query (list, filter, tail, pages: the
// CLI, the ops API and the console), EachDecision (the decision timeline
// replay judges again), RecentDecisions (the auto-approver's history of a
// session) and Disagreements (shadow policy, the console). Two readers keep
// their own SQL because they belong to other jobs: the hash-chain check
// (Verify reads every chained column of every table in seq order) and the
// spool's write path (PGSink asks which spooled call ids are already
// stored before it writes).

import (
	"context"
	"fmt"
	"time"

	"github.com/jackc/pgx/v5"
)

// Beginner starts a transaction: a *pgxpool.Pool or *pgx.Conn.
type Beginner interface {
	BeginTx(ctx context.Context, opts pgx.TxOptions) (pgx.Tx, error)
}

// RecordedDecision is one tool call's decision as it was recorded, the
// arguments in stored form: what replay judges again.
type RecordedDecision struct {
	CallID    string
	SessionID string
	At        time.Time
	Server    string
	Tool      string
	// Args is the stored arguments text (StoredArgs form when ArgsEscaped;
	// whole and unescaped for rows written before migration 0005).
	Args        []byte
	ArgsEscaped bool
	Decision    string
	Rule        string
	// PolicyVersion is the version that decided ("" before migration 0007).
	PolicyVersion string
}

// DecisionFilter selects recorded decisions. Zero fields do not filter.
type DecisionFilter struct {
	Since, Until time.Time // at >= Since, at < Until
	Session      string
	Server       string
}

const decisionsSQL = `
SELECT call_id, session_id, at, server, tool, args, args_escaped, decision, rule, policy_version
FROM tool_calls
WHERE ($1::timestamptz IS NULL OR at >= $1) AND ($2::timestamptz IS NULL OR at < $2)
  AND ($3 = '' OR session_id = $3) AND ($4 = '' OR server = $4)
ORDER BY at, call_id`

// EachDecision calls fn with every recorded decision matching f, in the
// order they were decided, one row at a time as Postgres returns them
// (memory does not grow with the number of rows). The rows are read in one
// read-only repeatable-read snapshot: rows committed meanwhile do not appear
// half-way. The *RecordedDecision is reused: copy what you keep. An error of
// fn ends the reading and is returned as it is.
func EachDecision(ctx context.Context, db Beginner, f DecisionFilter, fn func(*RecordedDecision) error) error {
	tx, err := db.BeginTx(ctx, pgx.TxOptions{IsoLevel: pgx.RepeatableRead, AccessMode: pgx.ReadOnly})
	if err != nil {
		return fmt.Errorf("reading tool_calls: %w", err)
	}
	defer func() { _ = tx.Rollback(context.WithoutCancel(ctx)) }()
	rows, err := tx.Query(ctx, decisionsSQL, optTime(f.Since), optTime(f.Until), f.Session, f.Server)
	if err != nil {
		return fmt.Errorf("reading tool_calls: %w", err)
	}
	defer rows.Close()
	var r RecordedDecision
	for rows.Next() {
		r = RecordedDecision{Args: r.Args[:0]}
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

// RecentDecision is one recent decision of a session, without arguments.
type RecentDecision struct {
	At       time.Time
	Tool     string // server__tool
	Decision string // allow | deny | escalate
	Rule     string
}

// RecentDecisions returns at most n decisions of session, newest first (by
// seq), without the call excludeCallID. The server, tool and rule are each
// cut to fieldChars characters.
func RecentDecisions(ctx context.Context, q Querier, session, excludeCallID string, n, fieldChars int) ([]RecentDecision, error) {
	rows, err := q.Query(ctx, `
SELECT at, left(server, $4) || '__' || left(tool, $4), decision, left(rule, $4)
FROM tool_calls
WHERE session_id = $1 AND call_id <> $2
ORDER BY seq DESC
LIMIT $3`, session, excludeCallID, n, fieldChars)
	if err != nil {
		return nil, fmt.Errorf("reading the session's recent decisions: %w", err)
	}
	defer rows.Close()
	var out []RecentDecision
	for rows.Next() {
		var d RecentDecision
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

// Disagreement is a tool call the shadow policy decided otherwise.
type Disagreement struct {
	CallID, SessionID, Server, Tool string
	At                              time.Time
	Decision, Rule                  string
	ShadowDecision, ShadowRule      string
}

// Disagreements returns the most recent tool calls (at most limit) on which
// the shadow policy decided otherwise, newest first. Server and tool are cut
// to 256 characters, the rules to fieldChars.
func Disagreements(ctx context.Context, q Querier, limit, fieldChars int) ([]Disagreement, error) {
	rows, err := q.Query(ctx, `SELECT call_id, session_id, left(server, 256), left(tool, 256), at, decision, left(rule, $1),
       shadow_decision, left(shadow_rule, $1)
FROM tool_calls WHERE shadow_decision <> '' AND shadow_decision <> decision
ORDER BY at DESC LIMIT $2`, fieldChars, limit)
	if err != nil {
		return nil, fmt.Errorf("reading shadow disagreements: %w", err)
	}
	out, err := pgx.CollectRows(rows, func(r pgx.CollectableRow) (Disagreement, error) {
		var d Disagreement
		err := r.Scan(&d.CallID, &d.SessionID, &d.Server, &d.Tool, &d.At, &d.Decision, &d.Rule, &d.ShadowDecision, &d.ShadowRule)
		return d, err
	})
	if err != nil {
		return nil, fmt.Errorf("reading shadow disagreements: %w", err)
	}
	return out, nil
}
