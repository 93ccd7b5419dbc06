package audit

import (
	"context"
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"fmt"
	"strings"
	"testing"
	"time"

	"github.com/jackc/pgx/v5/pgxpool"

	"ironcurtain.dev/gateway/internal/store/pgtest"
)

// insertOldDecisions writes allowed decisions the way the gateway did
// before stored arguments were bounded (migration 0005): args whole and
// unescaped (args_escaped = false), correctly chained after the session's
// head. It returns the call ids.
func insertOldDecisions(t testing.TB, pool *pgxpool.Pool, session string, args []string) []string {
	t.Helper()
	ctx := context.Background()
	head := chainHead{hash: genesis}
	err := pool.QueryRow(ctx, `SELECT chain_seq, chain_hash FROM sessions WHERE id = $1`, session).Scan(&head.seq, &head.hash)
	if err != nil && !strings.Contains(err.Error(), "no rows") {
		t.Fatal(err)
	}
	var ids []string
	for i, a := range args {
		d := &ToolCallDecision{CallID: fmt.Sprintf("%s-old-%d", session, head.seq+1), SessionID: session,
			Time: normalizeTime(time.Now()), Server: "filesystem", Tool: "write_file", Args: json.RawMessage(a),
			Decision: "allow", Rule: "sandbox-write", Reason: fmt.Sprintf("old row %d", i)}
		kind, sess, fields := chainFields(d)
		seq := head.seq + 1
		hash := chainHash(head.hash, kind, sess, seq, fields)
		if _, err := pool.Exec(ctx, `INSERT INTO tool_calls (call_id, session_id, seq, at, server, tool, args, decision, rule, reason,
			prev_hash, hash, args_escaped) VALUES ($1, $2, $3, $4, $5, $6, $7, $8, $9, $10, $11, $12, false)`,
			d.CallID, session, seq, d.Time, d.Server, d.Tool, a, d.Decision, d.Rule, d.Reason, head.hash, hash); err != nil {
			t.Fatal(err)
		}
		head = chainHead{seq: seq, hash: hash}
		ids = append(ids, d.CallID)
	}
	if _, err := pool.Exec(ctx, `INSERT INTO sessions (id, chain_seq, chain_hash) VALUES ($1, $2, $3)
		ON CONFLICT (id) DO UPDATE SET chain_seq = excluded.chain_seq, chain_hash = excluded.chain_hash`, session, head.seq, head.hash); err != nil {
		t.Fatal(err)
	}
	return ids
}

func hexSHA(s string) string {
	sum := sha256.Sum256([]byte(s))
	return hex.EncodeToString(sum[:])
}

// TestBoundedArgsOnPostgres: large arguments are stored cut, with their
// length and hash, and the chain over what is stored verifies; rows stored
// whole by the old code come back bounded (Postgres cuts and hashes them)
// and escaped, and verify walks them.
func TestBoundedArgsOnPostgres(t *testing.T) {
	db := pgtest.New(t, pgtest.Migrated())
	ctx := pgCtx(t)
	big := strings.Repeat("0123456789abcdef", (4<<20)/16)
	oldBig := `{"content":"` + strings.Repeat("z", 1<<20) + `","path":"/workspace/old"}`
	oldForged := `{"content":{"$truncated":{"bytes":1,"sha256":"00","head":"x"}},"path":"/workspace/f"}`
	old := insertOldDecisions(t, db.Pool, "s", []string{oldBig, oldForged})

	sink, _ := newTestSink(t, db, Options{})
	if err := sink.Record(ctx, &ToolCallDecision{CallID: "new-big", SessionID: "s", Server: "filesystem", Tool: "write_file",
		Args: json.RawMessage(`{"path":"/workspace/big","content":"` + big + `"}`), Decision: "allow"}); err != nil {
		t.Fatal(err)
	}
	var stored int
	if err := db.Pool.QueryRow(ctx, `SELECT octet_length(args) FROM tool_calls WHERE call_id = 'new-big'`).Scan(&stored); err != nil {
		t.Fatal(err)
	}
	if stored > DefaultMaxArgsBytes {
		t.Fatalf("stored %d bytes of arguments", stored)
	}

	calls, err := Query(ctx, db.Pool, Filter{Session: "s"})
	if err != nil {
		t.Fatal(err)
	}
	byID := map[string]ToolCall{}
	for _, c := range calls {
		byID[c.CallID] = c
	}
	tests := []struct {
		name   string
		callID string
		check  func(t *testing.T, args map[string]any)
	}{
		{"new row: value cut with length and hash", "new-big", func(t *testing.T, a map[string]any) {
			m, _ := a["content"].(map[string]any)[KeyTruncated].(map[string]any)
			if m == nil || m["bytes"] != float64(len(big)) || m["sha256"] != hexSHA(big) || len(m["head"].(string)) != DefaultMaxValueBytes {
				t.Fatalf("content = %v", a["content"])
			}
		}},
		{"old large row: whole cut by Postgres", old[0], func(t *testing.T, a map[string]any) {
			m, _ := a[KeyTruncated].(map[string]any)
			if m == nil || m["bytes"] != float64(len(oldBig)) || m["sha256"] != hexSHA(oldBig) || !strings.HasPrefix(oldBig, m["head"].(string)) {
				t.Fatalf("args = %.300v", a)
			}
		}},
		{"old row with a forged marker: escaped on read", old[1], func(t *testing.T, a map[string]any) {
			c, _ := a["content"].(map[string]any)
			if _, forged := c[KeyTruncated]; forged || c["$"+KeyTruncated] == nil {
				t.Fatalf("content = %v", c)
			}
		}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			c, ok := byID[tt.callID]
			if !ok {
				t.Fatalf("call %s not returned", tt.callID)
			}
			if len(c.Args) > MaxReadArgsBytes {
				t.Fatalf("query returned %d bytes of arguments", len(c.Args))
			}
			var a map[string]any
			if err := json.Unmarshal(c.Args, &a); err != nil {
				t.Fatal(err)
			}
			tt.check(t, a)
		})
	}

	checks, err := Verify(ctx, db.Pool, "s")
	if err != nil {
		t.Fatal(err)
	}
	if len(checks) != 1 || checks[0].Break != nil || checks[0].Records != 3 {
		t.Fatalf("verify = %+v", checks)
	}
}

// TestVerifyGaps: a decision without an outcome is a gap, "decided, outcome
// unknown" when the call was allowed (or approved on an approval it used) and
// nothing shows it ran (after a SIGKILL such calls were called "ran, outcome
// pending" though they never ran), "ran, outcome unknown" when egress rows of
// the call exist, and "never ran" when it was denied or its escalation was
// not used by it.
func TestVerifyGaps(t *testing.T) {
	db := pgtest.New(t, pgtest.Migrated())
	ctx := pgCtx(t)
	sink, _ := newTestSink(t, db, Options{})
	dec := func(id, decision, esc string) *ToolCallDecision {
		return &ToolCallDecision{CallID: id, SessionID: "g", Server: "git", Tool: "push", Args: json.RawMessage(`{}`),
			Decision: decision, EscalationID: esc}
	}
	out := func(id, status string) *ToolCallOutcome {
		return &ToolCallOutcome{CallID: id, SessionID: "g", Status: status}
	}
	events := []Event{
		dec("done", "allow", ""), out("done", OutcomeOK),
		dec("allowed-no-outcome", "allow", ""),
		dec("denied-no-outcome", "deny", ""),
		dec("denied-with-outcome", "deny", ""), out("denied-with-outcome", OutcomeDenied),
		dec("approved-used", "escalate", "e-used"),
		dec("escalated-unused", "escalate", "e-unused"),
		dec("egress-no-outcome", "allow", ""),
		&EgressEvent{SessionID: "g", ToolCallID: "egress-no-outcome", Kind: "fetch", Host: "example.com", Port: 443, Decision: "allow", Reason: "listed"},
		&EgressEvent{SessionID: "g", ToolCallID: "denied-no-outcome", Kind: "fetch", Host: "example.com", Port: 443, Decision: "deny", Reason: "stray"},
		&EgressEvent{SessionID: "g", Kind: "connect", Host: "example.com", Port: 443, Decision: "allow", Reason: "listed"},
		&LLMCall{SessionID: "g", Provider: "anthropic", Model: "m", Path: "/v1/messages", StatusCode: 200, CostUSD: 0.25},
	}
	for _, e := range events {
		if err := sink.Record(ctx, e); err != nil {
			t.Fatal(err)
		}
	}
	for _, e := range []struct{ id, call, status, consumed string }{
		{"e-used", "approved-used", "approved", "approved-used"},
		{"e-unused", "escalated-unused", "denied", ""},
	} {
		var consumed any
		if e.consumed != "" {
			consumed = e.consumed
		}
		if _, err := db.Pool.Exec(ctx, `INSERT INTO escalations (id, call_id, session_id, kind, status, expires_at, decided_at,
			consumed_by_call_id, consumed_at) VALUES ($1, $2, 'g', 'tool_call', $3, now(), now(), $4, CASE WHEN $4::text IS NULL THEN NULL ELSE now() END)`,
			e.id, e.call, e.status, consumed); err != nil {
			t.Fatal(err)
		}
	}
	checks, err := Verify(ctx, db.Pool, "g")
	if err != nil {
		t.Fatal(err)
	}
	c := checks[0]
	if c.Break != nil || c.Records != int64(len(events)) {
		t.Fatalf("check = %+v", c)
	}
	want := map[string]string{
		"allowed-no-outcome": GapOutcomeUnknown,
		"denied-no-outcome":  GapNeverRan,
		"approved-used":      GapOutcomeUnknown,
		"escalated-unused":   GapNeverRan,
		"egress-no-outcome":  GapRanOutcomeUnknown,
	}
	if c.GapCount != len(want) || len(c.Gaps) != len(want) {
		t.Fatalf("gaps = %d %+v, want %v", c.GapCount, c.Gaps, want)
	}
	for i, g := range c.Gaps {
		if want[g.CallID] != g.Kind {
			t.Errorf("gap %s = %q, want %q", g.CallID, g.Kind, want[g.CallID])
		}
		if i > 0 && c.Gaps[i-1].Seq >= g.Seq {
			t.Errorf("gaps not in chain order: %+v", c.Gaps)
		}
		if g.Kind == GapOutcomeUnknown && (strings.Contains(g.String(), "ran,") || !strings.Contains(g.String(), "decided, outcome unknown: the gateway stopped")) {
			t.Errorf("gap text %q claims more than is known", g)
		}
	}
}
