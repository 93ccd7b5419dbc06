package audit

import (
	"bytes"
	"context"
	"encoding/hex"
	"fmt"
	"sort"
	"time"

	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgxpool"
)

// Break describes the first broken link of a session's hash chain.
type Break struct {
	SessionID string
	Table     string // tool_calls, tool_call_outcomes, egress_events, llm_calls or sessions
	RowID     string // call_id or id of the row (empty for a missing row)
	Seq       int64  // the chain position where the break was found
	Problem   string // what is wrong, in words
}

func (b Break) String() string {
	if b.RowID == "" {
		return fmt.Sprintf("session %q: chain broken at seq %d (%s): %s", b.SessionID, b.Seq, b.Table, b.Problem)
	}
	return fmt.Sprintf("session %q: chain broken at seq %d, %s row %s: %s", b.SessionID, b.Seq, b.Table, b.RowID, b.Problem)
}

// SessionCheck is the verification result of one session.
type SessionCheck struct {
	SessionID string
	Records   int64  // records walked
	Head      string // hex hash of the last record (anchor it elsewhere to detect truncation by a DB admin)
	Break     *Break // nil when the chain is intact
}

// chained is one stored record with its chain columns.
type chained struct {
	table string
	id    string
	seq   int64
	prev  []byte
	hash  []byte
	ev    Event
}

// Verify recomputes the hash chain of one session (or of every session when
// sessionID is empty) and reports the first broken link of each: an edited
// row (hash mismatch), a deleted row (gap in seq), reordered rows (prev_hash
// mismatch) or truncation (the sessions head is ahead of the last row).
func Verify(ctx context.Context, pool *pgxpool.Pool, sessionID string) ([]SessionCheck, error) {
	var sessions []string
	if sessionID != "" {
		sessions = []string{sessionID}
	} else {
		rows, err := pool.Query(ctx, `SELECT id FROM sessions ORDER BY id`)
		if err != nil {
			return nil, fmt.Errorf("verifying audit chain: listing sessions: %w", err)
		}
		sessions, err = pgx.CollectRows(rows, pgx.RowTo[string])
		if err != nil {
			return nil, fmt.Errorf("verifying audit chain: listing sessions: %w", err)
		}
	}
	out := make([]SessionCheck, 0, len(sessions))
	for _, s := range sessions {
		c, err := verifySession(ctx, pool, s)
		if err != nil {
			return out, fmt.Errorf("verifying audit chain of session %q: %w", s, err)
		}
		out = append(out, c)
	}
	return out, nil
}

func verifySession(ctx context.Context, pool *pgxpool.Pool, session string) (SessionCheck, error) {
	check := SessionCheck{SessionID: session}
	// One snapshot for the head and all rows, so a concurrent writer cannot
	// make an intact chain look broken.
	tx, err := pool.BeginTx(ctx, pgx.TxOptions{IsoLevel: pgx.RepeatableRead, AccessMode: pgx.ReadOnly})
	if err != nil {
		return check, err
	}
	defer func() { _ = tx.Rollback(context.WithoutCancel(ctx)) }()

	var headSeq int64
	var headHash []byte
	err = tx.QueryRow(ctx, `SELECT chain_seq, chain_hash FROM sessions WHERE id = $1`, session).Scan(&headSeq, &headHash)
	if err == pgx.ErrNoRows {
		check.Break = &Break{SessionID: session, Table: "sessions", Problem: "no such session"}
		return check, nil
	}
	if err != nil {
		return check, err
	}
	recs, err := loadChain(ctx, tx, session)
	if err != nil {
		return check, err
	}
	prev := genesis
	for i, r := range recs {
		want := int64(i + 1)
		switch {
		case r.seq > want:
			check.Break = &Break{SessionID: session, Table: r.table, RowID: r.id, Seq: want,
				Problem: fmt.Sprintf("record seq %d is missing (deleted?); the next record found is seq %d", want, r.seq)}
		case r.seq < want:
			check.Break = &Break{SessionID: session, Table: r.table, RowID: r.id, Seq: r.seq,
				Problem: fmt.Sprintf("seq %d appears twice", r.seq)}
		case !bytes.Equal(r.prev, prev):
			check.Break = &Break{SessionID: session, Table: r.table, RowID: r.id, Seq: r.seq,
				Problem: "prev_hash does not match the previous record's hash (rows reordered, or a row before it was replaced)"}
		default:
			kind, sess, fields := chainFields(r.ev)
			if got := chainHash(prev, kind, sess, r.seq, fields); !bytes.Equal(got, r.hash) {
				check.Break = &Break{SessionID: session, Table: r.table, RowID: r.id, Seq: r.seq,
					Problem: "hash does not match the row's contents (row edited)"}
			}
		}
		if check.Break != nil {
			return check, nil
		}
		prev = r.hash
		check.Records++
	}
	check.Head = hex.EncodeToString(prev)
	switch {
	case headSeq != check.Records:
		check.Break = &Break{SessionID: session, Table: "sessions", Seq: check.Records + 1,
			Problem: fmt.Sprintf("the session head says %d records but %d were found (records deleted at the end?)", headSeq, check.Records)}
	case !bytes.Equal(headHash, prev):
		check.Break = &Break{SessionID: session, Table: "sessions", Seq: check.Records,
			Problem: "the session head hash does not match the last record"}
	}
	return check, nil
}

// loadChain reads every chained record of a session, ordered by seq.
func loadChain(ctx context.Context, tx pgx.Tx, session string) ([]chained, error) {
	var recs []chained
	type loader struct {
		table, sql string
		scan       func(pgx.Rows) (chained, error)
	}
	loaders := []loader{
		{"tool_calls", `SELECT call_id, session_id, seq, at, server, tool, args, decision, rule, reason, shadow_decision,
		   shadow_rule, escalation_id, detail, prev_hash, hash FROM tool_calls WHERE session_id = $1`,
			func(r pgx.Rows) (chained, error) {
				d := &ToolCallDecision{}
				c := chained{table: "tool_calls", ev: d}
				var args string
				err := r.Scan(&d.CallID, &d.SessionID, &c.seq, &d.Time, &d.Server, &d.Tool, &args, &d.Decision, &d.Rule,
					&d.Reason, &d.ShadowDecision, &d.ShadowRule, &d.EscalationID, &d.Detail, &c.prev, &c.hash)
				d.Args, c.id = []byte(args), d.CallID
				return c, err
			}},
		{"tool_call_outcomes", `SELECT call_id, session_id, seq, at, status, duration_ns, result_bytes, truncated, error,
		   prev_hash, hash FROM tool_call_outcomes WHERE session_id = $1`,
			func(r pgx.Rows) (chained, error) {
				o := &ToolCallOutcome{}
				c := chained{table: "tool_call_outcomes", ev: o}
				var dur, size int64
				err := r.Scan(&o.CallID, &o.SessionID, &c.seq, &o.Time, &o.Status, &dur, &size, &o.Truncated, &o.Error, &c.prev, &c.hash)
				o.Duration, o.ResultBytes, c.id = time.Duration(dur), int(size), o.CallID
				return c, err
			}},
		{"egress_events", `SELECT id, session_id, seq, tool_call_id, at, kind, method, host, port, resolved_ip, decision, reason,
		   rule, bytes_up, bytes_down, duration_ns, error, prev_hash, hash FROM egress_events WHERE session_id = $1`,
			func(r pgx.Rows) (chained, error) {
				g := &EgressEvent{}
				c := chained{table: "egress_events", ev: g}
				var port int32
				var dur int64
				err := r.Scan(&g.ID, &g.SessionID, &c.seq, &g.ToolCallID, &g.Time, &g.Kind, &g.Method, &g.Host, &port, &g.ResolvedIP,
					&g.Decision, &g.Reason, &g.Rule, &g.BytesUp, &g.BytesDown, &dur, &g.Error, &c.prev, &c.hash)
				g.Port, g.Duration, c.id = int(port), time.Duration(dur), g.ID
				return c, err
			}},
		{"llm_calls", `SELECT id, session_id, seq, at, provider, model, path, stream, status_code, input_tokens, output_tokens,
		   cost_usd, duration_ns, error, prev_hash, hash FROM llm_calls WHERE session_id = $1`,
			func(r pgx.Rows) (chained, error) {
				l := &LLMCall{}
				c := chained{table: "llm_calls", ev: l}
				var status int32
				var dur int64
				err := r.Scan(&l.ID, &l.SessionID, &c.seq, &l.Time, &l.Provider, &l.Model, &l.Path, &l.Stream, &status,
					&l.InputTokens, &l.OutputTokens, &l.CostUSD, &dur, &l.Error, &c.prev, &c.hash)
				l.StatusCode, l.Duration, c.id = int(status), time.Duration(dur), l.ID
				return c, err
			}},
	}
	for _, l := range loaders {
		rows, err := tx.Query(ctx, l.sql, session)
		if err != nil {
			return nil, fmt.Errorf("reading %s: %w", l.table, err)
		}
		for rows.Next() {
			c, err := l.scan(rows)
			if err != nil {
				rows.Close()
				return nil, fmt.Errorf("reading %s: %w", l.table, err)
			}
			recs = append(recs, c)
		}
		rows.Close()
		if err := rows.Err(); err != nil {
			return nil, fmt.Errorf("reading %s: %w", l.table, err)
		}
	}
	sort.SliceStable(recs, func(i, j int) bool { return recs[i].seq < recs[j].seq })
	return recs, nil
}
