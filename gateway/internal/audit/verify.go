package audit

import (
	"bytes"
	"context"
	"encoding/hex"
	"encoding/json"
	"errors"
	"fmt"
	"math"
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

// Kinds of Gap. A decision is written before its call runs and the outcome
// after; a gap says only what the rows show.
const (
	// GapOutcomeUnknown: the call was allowed (or approved, on an approval
	// it used) and neither an outcome row nor an egress row of the call
	// exists. Whether it ran is not known: the gateway stopped (a kill, a
	// crash) between the decision and the outcome, or the outcome still
	// waits in the running gateway's spool for the database.
	GapOutcomeUnknown = "decided, outcome unknown"
	// GapRanOutcomeUnknown: as GapOutcomeUnknown, but egress rows of the
	// call exist, so it ran at least as far as the network.
	GapRanOutcomeUnknown = "ran, outcome unknown"
	// GapNeverRan: the call was denied (or its escalation was never
	// approved and used by it), so it did not run; only its outcome row,
	// which would say so, is missing.
	GapNeverRan = "never ran"
)

// gapExplanations say, for the text report, why a gap's outcome is unknown.
var gapExplanations = map[string]string{
	GapOutcomeUnknown:    "the gateway stopped before recording an outcome (or the outcome still waits in its spool); whether the call ran is not recorded",
	GapRanOutcomeUnknown: "its egress was recorded; the gateway stopped before recording an outcome (or the outcome still waits in its spool)",
}

// MaxReportedGaps bounds the gaps listed per session (all are counted).
const MaxReportedGaps = 100

// Gap is a decision row without an outcome row. It is not a broken link:
// the chain holds what was written; the gap says what is missing.
type Gap struct {
	CallID   string
	Seq      int64  // the decision's chain position
	Decision string // allow, deny or escalate
	Kind     string // GapOutcomeUnknown, GapRanOutcomeUnknown or GapNeverRan
}

func (g Gap) String() string {
	if why := gapExplanations[g.Kind]; why != "" {
		return fmt.Sprintf("call %s (seq %d, %s): no outcome row: %s: %s", g.CallID, g.Seq, g.Decision, g.Kind, why)
	}
	return fmt.Sprintf("call %s (seq %d, %s): no outcome row: %s", g.CallID, g.Seq, g.Decision, g.Kind)
}

// SessionCheck is the verification result of one session.
type SessionCheck struct {
	SessionID string
	Records   int64  // records walked
	Head      string // hex hash of the last record (anchor it elsewhere to detect truncation by a DB admin)
	Break     *Break // nil when the chain is intact
	// Gaps lists decisions without an outcome (at most MaxReportedGaps,
	// in chain order); GapCount counts them all. Only reported for an
	// intact chain.
	Gaps     []Gap
	GapCount int
	// Seconds is how long the walk took (reading, hashing and, when the
	// open decisions overflowed maxOpenDecisions, the gap query), and
	// RecordsPerSecond is Records / Seconds.
	Seconds          float64
	RecordsPerSecond float64
}

// chained is one stored record with its chain columns.
type chained struct {
	table string
	id    string
	seq   int64
	prev  []byte
	hash  []byte
	ev    Event
	// ranOnApproval is set for an escalated decision whose approval this
	// call used (so it ran).
	ranOnApproval bool
}

// Verify recomputes the hash chain of one session (or of every session when
// sessionID is empty) and reports the first broken link of each: an edited
// row (hash mismatch), a deleted row (gap in seq), reordered rows (prev_hash
// mismatch) or truncation (the sessions head is ahead of the last row). It
// also lists decisions without an outcome (Gaps).
func Verify(ctx context.Context, pool *pgxpool.Pool, sessionID string) ([]SessionCheck, error) {
	var out []SessionCheck
	err := VerifyEach(ctx, pool, sessionID, func(c SessionCheck) error {
		out = append(out, c)
		return nil
	})
	return out, err
}

// VerifyEach is Verify reporting each session to fn as soon as it is
// checked. Each session's records are walked one row at a time from one
// query in chain order: memory does not grow with the session.
func VerifyEach(ctx context.Context, pool *pgxpool.Pool, sessionID string, fn func(SessionCheck) error) error {
	if sessionID != "" {
		c, err := verifySession(ctx, pool, sessionID)
		if err != nil {
			return fmt.Errorf("verifying audit chain of session %q: %w", sessionID, err)
		}
		return fn(c)
	}
	// Sessions are listed in pages (keyset on id), not all at once.
	after := ""
	for {
		rows, err := pool.Query(ctx, `SELECT id FROM sessions WHERE id > $1 ORDER BY id LIMIT 1000`, after)
		if err != nil {
			return fmt.Errorf("verifying audit chain: listing sessions: %w", err)
		}
		ids, err := pgx.CollectRows(rows, pgx.RowTo[string])
		if err != nil {
			return fmt.Errorf("verifying audit chain: listing sessions: %w", err)
		}
		for _, s := range ids {
			c, err := verifySession(ctx, pool, s)
			if err != nil {
				return fmt.Errorf("verifying audit chain of session %q: %w", s, err)
			}
			if err := fn(c); err != nil {
				return err
			}
		}
		if len(ids) < 1000 {
			return nil
		}
		after = ids[len(ids)-1]
	}
}

// verifySession checks one session and times the walk.
func verifySession(ctx context.Context, pool *pgxpool.Pool, session string) (SessionCheck, error) {
	start := time.Now()
	check, err := checkSession(ctx, pool, session)
	check.Seconds = time.Since(start).Seconds()
	if check.Seconds > 0 {
		check.RecordsPerSecond = float64(check.Records) / check.Seconds
	}
	return check, err
}

func checkSession(ctx context.Context, pool *pgxpool.Pool, session string) (SessionCheck, error) {
	check := SessionCheck{SessionID: session}
	// One snapshot for the head and all rows, so a concurrent writer cannot
	// make an intact chain look broken.
	tx, err := pool.BeginTx(ctx, pgx.TxOptions{IsoLevel: pgx.RepeatableRead, AccessMode: pgx.ReadOnly})
	if err != nil {
		return check, err
	}
	defer func() { _ = tx.Rollback(context.WithoutCancel(ctx)) }()
	// A page's plan is a few index scans with limits; the planner's cost
	// of the approval subquery can still pass the JIT threshold, and JIT
	// compiling each page took seconds (10^7 records). A page's sort
	// (up to four tables' pages) stays in memory.
	if _, err := tx.Exec(ctx, `SET LOCAL jit = off; SET LOCAL work_mem = '64MB'`); err != nil {
		return check, err
	}

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
	w := chainWalk{check: &check, prev: genesis, open: map[string]Gap{}, maxOpen: maxOpenDecisions}
	if err := walkChain(ctx, tx, session, w.step); err != nil && !errors.Is(err, errBroken) {
		return check, err
	}
	if check.Break != nil {
		return check, nil
	}
	check.Head = hex.EncodeToString(w.prev)
	switch {
	case headSeq != check.Records:
		check.Break = &Break{SessionID: session, Table: "sessions", Seq: check.Records + 1,
			Problem: fmt.Sprintf("the session head says %d records but %d were found (records deleted at the end?)", headSeq, check.Records)}
	case !bytes.Equal(headHash, w.prev):
		check.Break = &Break{SessionID: session, Table: "sessions", Seq: check.Records,
			Problem: "the session head hash does not match the last record"}
	case w.open == nil:
		// More decisions were open at once than the walk keeps: Postgres
		// lists the gaps instead (same snapshot, same rules).
		if err := queryGaps(ctx, tx, &check); err != nil {
			return check, err
		}
	default:
		w.reportGaps()
	}
	return check, nil
}

// maxOpenDecisions bounds the decisions the walk keeps while they wait for
// their outcome (about 150 bytes each). A live session has as many open as
// calls in flight; a chain with more (millions of calls cut off by crashes,
// or rows written to exhaust the verifier) is walked without them and its
// gaps are listed by queryGaps, so memory stays bounded whatever the rows.
// A variable so the differential test can force the query.
var maxOpenDecisions = 1 << 16

// gapsSQL lists, in chain order, the decisions of a session that have no
// outcome row later in the chain, each with whether its escalation's
// approval was used by it and whether egress rows of it follow it: the
// same rules as chainWalk.step applies row by row. Window count(*) gives
// the total beside the first $2.
const gapsSQL = `
SELECT c.call_id, c.seq, c.decision,
       c.escalation_id <> '' AND EXISTS (SELECT 1 FROM escalations e WHERE e.id = c.escalation_id AND e.consumed_by_call_id = c.call_id),
       EXISTS (SELECT 1 FROM egress_events g WHERE g.tool_call_id = c.call_id AND g.tool_call_id <> '' AND g.session_id = c.session_id AND g.seq > c.seq),
       count(*) OVER ()
FROM tool_calls c
WHERE c.session_id = $1
  AND NOT EXISTS (SELECT 1 FROM tool_call_outcomes o WHERE o.call_id = c.call_id AND o.session_id = c.session_id AND o.seq > c.seq)
ORDER BY c.seq
LIMIT $2`

// queryGaps fills check's gaps from gapsSQL.
func queryGaps(ctx context.Context, tx pgx.Tx, check *SessionCheck) error {
	rows, err := tx.Query(ctx, gapsSQL, check.SessionID, MaxReportedGaps)
	if err != nil {
		return fmt.Errorf("listing decisions without an outcome: %w", err)
	}
	defer rows.Close()
	for rows.Next() {
		var (
			g           Gap
			ran, egress bool
			total       int64
		)
		if err := rows.Scan(&g.CallID, &g.Seq, &g.Decision, &ran, &egress, &total); err != nil {
			return fmt.Errorf("listing decisions without an outcome: %w", err)
		}
		g.Kind = gapKind(g.Decision, ran)
		if g.Kind == GapOutcomeUnknown && egress {
			g.Kind = GapRanOutcomeUnknown
		}
		check.Gaps = append(check.Gaps, g)
		check.GapCount = int(total)
	}
	if err := rows.Err(); err != nil {
		return fmt.Errorf("listing decisions without an outcome: %w", err)
	}
	return nil
}

// gapKind is the kind of a decision left without an outcome, before any
// egress of it is seen.
func gapKind(decision string, ranOnApproval bool) string {
	if decision == "allow" || (decision == "escalate" && ranOnApproval) {
		return GapOutcomeUnknown
	}
	return GapNeverRan
}

// errBroken stops the walk at the first broken link.
var errBroken = errors.New("chain broken")

// chainWalk checks records one at a time, in seq order.
type chainWalk struct {
	check *SessionCheck
	prev  []byte
	// open holds the decisions not yet followed by their outcome, at most
	// maxOpen of them; nil once there were more (see maxOpenDecisions).
	open    map[string]Gap
	maxOpen int
}

func (w *chainWalk) step(r *chained) error {
	session := w.check.SessionID
	want := w.check.Records + 1
	switch {
	case r.seq > want:
		w.check.Break = &Break{SessionID: session, Table: r.table, RowID: r.id, Seq: want,
			Problem: fmt.Sprintf("record seq %d is missing (deleted?); the next record found is seq %d", want, r.seq)}
	case r.seq < want:
		w.check.Break = &Break{SessionID: session, Table: r.table, RowID: r.id, Seq: r.seq,
			Problem: fmt.Sprintf("seq %d appears twice", r.seq)}
	case !bytes.Equal(r.prev, w.prev):
		w.check.Break = &Break{SessionID: session, Table: r.table, RowID: r.id, Seq: r.seq,
			Problem: "prev_hash does not match the previous record's hash (rows reordered, or a row before it was replaced)"}
	default:
		kind, sess, fields := chainFields(r.ev)
		if got := chainHash(w.prev, kind, sess, r.seq, fields); !bytes.Equal(got, r.hash) {
			w.check.Break = &Break{SessionID: session, Table: r.table, RowID: r.id, Seq: r.seq,
				Problem: "hash does not match the row's contents (row edited)"}
		}
	}
	if w.check.Break != nil {
		return errBroken
	}
	w.prev = r.hash
	w.check.Records++
	if w.open == nil {
		return nil // gaps are left to queryGaps
	}
	switch x := r.ev.(type) {
	case *ToolCallDecision:
		if len(w.open) >= w.maxOpen {
			w.open = nil
			return nil
		}
		w.open[x.CallID] = Gap{CallID: x.CallID, Seq: r.seq, Decision: x.Decision, Kind: gapKind(x.Decision, r.ranOnApproval)}
	case *ToolCallOutcome:
		delete(w.open, x.CallID)
	case *EgressEvent:
		// Egress linked to an open decision shows the call ran (its
		// decision is written first, so it is already open).
		if g, ok := w.open[x.ToolCallID]; ok && x.ToolCallID != "" && g.Kind == GapOutcomeUnknown {
			g.Kind = GapRanOutcomeUnknown
			w.open[x.ToolCallID] = g
		}
	}
	return nil
}

// reportGaps moves the decisions left open into the check, in seq order.
func (w *chainWalk) reportGaps() {
	w.check.GapCount = len(w.open)
	if len(w.open) == 0 {
		return
	}
	gaps := make([]Gap, 0, len(w.open))
	for _, g := range w.open {
		gaps = append(gaps, g)
	}
	sort.Slice(gaps, func(i, j int) bool { return gaps[i].Seq < gaps[j].Seq })
	w.check.Gaps = gaps[:min(len(gaps), MaxReportedGaps)]
}

// chainSQL reads one page of the chained records of a session in seq
// order (seq >= $2, at most $3 rows), one row per record, from the four
// audit tables in one query. Each table gives at most $3 rows from its
// (session_id, seq) index, entered at $2, and only those are sorted: a
// page costs its own rows, not those before or after it. (Without the
// per-table limits, EXPLAIN over 10^7 records showed every table scanned
// and every row from $2 on sorted, for each page.) Columns: table, id, seq, at, prev_hash, hash,
// eleven text, four bigint, one boolean and one float slot (see scanChained),
// and for a decision whether its escalation's approval was used by it.
const chainSQL = `
(SELECT 'tool_calls', c.call_id, c.seq, c.at, c.prev_hash, c.hash,
       c.server, c.tool, c.args, c.decision, c.rule, c.reason, c.shadow_decision, c.shadow_rule, c.escalation_id, c.detail, c.policy_version,
       0::bigint, 0::bigint, 0::bigint, 0::bigint, false, 0::float8,
       c.escalation_id <> '' AND EXISTS (SELECT 1 FROM escalations e WHERE e.id = c.escalation_id AND e.consumed_by_call_id = c.call_id)
FROM tool_calls c WHERE c.session_id = $1 AND c.seq >= $2
 ORDER BY c.seq LIMIT $3)
UNION ALL
(SELECT 'tool_call_outcomes', o.call_id, o.seq, o.at, o.prev_hash, o.hash,
       o.status, o.error, '', '', '', '', '', '', '', '', '',
       o.duration_ns, o.result_bytes, 0, 0, o.truncated, 0, false
FROM tool_call_outcomes o WHERE o.session_id = $1 AND o.seq >= $2
 ORDER BY o.seq LIMIT $3)
UNION ALL
(SELECT 'egress_events', g.id, g.seq, g.at, g.prev_hash, g.hash,
       g.tool_call_id, g.kind, g.method, g.host, g.resolved_ip, g.decision, g.reason, g.rule, g.error, '', '',
       g.port, g.bytes_up, g.bytes_down, g.duration_ns, false, 0, false
FROM egress_events g WHERE g.session_id = $1 AND g.seq >= $2
 ORDER BY g.seq LIMIT $3)
UNION ALL
(SELECT 'llm_calls', l.id, l.seq, l.at, l.prev_hash, l.hash,
       l.provider, l.model, l.path, l.error, '', '', '', '', '', '', '',
       l.status_code, l.input_tokens, l.output_tokens, l.duration_ns, l.stream, l.cost_usd, false
FROM llm_calls l WHERE l.session_id = $1 AND l.seq >= $2
 ORDER BY l.seq LIMIT $3)
ORDER BY 3
LIMIT $3`

// chainPageRows is the records one chainSQL query returns. Pages (keyset
// on seq) rather than one query: a walk that stops at a broken link stops
// the server too (closing a half-read result would read the rest of it).
// A variable so tests can put page boundaries where they want them.
var chainPageRows = 10000

// walkChain calls fn with each chained record of a session in seq order,
// one row at a time (the record is reused between calls), reading the
// chain in pages of chainPageRows. Each page starts at the last seq of the
// one before (seq >= last) and skips only that very row (by table and id),
// so another record with the same seq is never lost between two pages: it
// reaches fn, which reports the seq appearing twice.
func walkChain(ctx context.Context, tx pgx.Tx, session string, fn func(*chained) error) error {
	var from pageStart
	from.seq = math.MinInt64 // seq starts at 1; a row with seq <= 0 is still read (and reported)
	for {
		read, err := walkPage(ctx, tx, session, &from, fn)
		if err != nil || read < chainPageRows {
			return err
		}
	}
}

// pageStart is where a page starts: at seq, after the row (table, id).
type pageStart struct {
	seq       int64
	table, id string
}

// walkPage walks one page from *from, advances *from to its last row and
// returns how many rows it read.
func walkPage(ctx context.Context, tx pgx.Tx, session string, from *pageStart, fn func(*chained) error) (read int, err error) {
	rows, err := tx.Query(ctx, chainSQL, session, from.seq, chainPageRows)
	if err != nil {
		return 0, fmt.Errorf("reading the chain: %w", err)
	}
	defer rows.Close()
	skip := *from
	var (
		r   chained
		at  time.Time
		t   [11]string
		t2  []byte // the third text slot: a decision's arguments, scanned once as bytes
		n   [4]int64
		b   bool
		f   float64
		ran bool
	)
	for rows.Next() {
		r = chained{}
		if err := rows.Scan(&r.table, &r.id, &r.seq, &at, &r.prev, &r.hash,
			&t[0], &t[1], &t2, &t[3], &t[4], &t[5], &t[6], &t[7], &t[8], &t[9], &t[10],
			&n[0], &n[1], &n[2], &n[3], &b, &f, &ran); err != nil {
			return read, fmt.Errorf("reading the chain: %w", err)
		}
		read++
		if r.seq == skip.seq && r.table == skip.table && r.id == skip.id {
			continue // the last row of the page before
		}
		*from = pageStart{seq: r.seq, table: r.table, id: r.id}
		if r.table == "tool_calls" {
			t[2] = ""
		} else {
			t[2] = string(t2)
		}
		switch r.table {
		case "tool_calls":
			r.ev = &ToolCallDecision{CallID: r.id, SessionID: session, Time: at, Server: t[0], Tool: t[1], Args: json.RawMessage(t2),
				Decision: t[3], Rule: t[4], Reason: t[5], ShadowDecision: t[6], ShadowRule: t[7], EscalationID: t[8], Detail: t[9], PolicyVersion: t[10]}
			r.ranOnApproval = ran
		case "tool_call_outcomes":
			r.ev = &ToolCallOutcome{CallID: r.id, SessionID: session, Time: at, Status: t[0], Error: t[1],
				Duration: time.Duration(n[0]), ResultBytes: int(n[1]), Truncated: b}
		case "egress_events":
			ev := NewEgressEvent(EgressFields{ID: r.id, SessionID: session, Time: at, ToolCallID: t[0], Kind: t[1], Method: t[2], Host: t[3],
				Port: int(n[0])})
			ev.ResolvedIP, ev.Decision, ev.Reason, ev.Rule, ev.Error = t[4], t[5], t[6], t[7], t[8]
			ev.BytesUp, ev.BytesDown, ev.Duration = n[1], n[2], time.Duration(n[3])
			r.ev = ev
		case "llm_calls":
			r.ev = &LLMCall{ID: r.id, SessionID: session, Time: at, Provider: t[0], Model: t[1], Path: t[2], Error: t[3],
				StatusCode: int(n[0]), InputTokens: n[1], OutputTokens: n[2], Duration: time.Duration(n[3]), Stream: b, CostUSD: f}
		}
		if err := fn(&r); err != nil {
			return read, err
		}
	}
	if err := rows.Err(); err != nil {
		return read, fmt.Errorf("reading the chain: %w", err)
	}
	return read, nil
}
