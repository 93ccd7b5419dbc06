package audit

import (
	"context"
	"errors"
	"strings"
	"testing"
	"time"

	"ironcurtain.dev/gateway/internal/store/pgtest"
)

// readModelRows are the tool calls the read-model tests share: two
// sessions, two servers, one shadow disagreement and one agreement, one row
// from before migration 0005 (args not escaped) and one before 0007 (no
// policy version).
var readModelRows = []struct {
	call, session string
	seq, secs     int // secs: seconds after t0
	server, tool  string
	args          string
	escaped       bool
	decision      string
	rule          string
	shadow        string
	shadowRule    string
	version       string
}{
	{"c1", "s1", 1, 1, "filesystem", "read_file", `{"path":"/w/a"}`, true, "allow", "allow-reads", "", "", "v1"},
	{"c2", "s1", 2, 2, "filesystem", "write_file", `{"$path":"/w/b"}`, false, "deny", "deny-writes", "allow", "allow-all", "v1"},
	{"x1", "s2", 1, 3, "github", "pr_view", `{"number":1}`, true, "allow", "allow-github", "allow", "allow-github", ""},
	{"c3", "s1", 3, 4, "filesystem", "delete_file", `{}`, true, "escalate", "escalate-deletes", "deny", strings.Repeat("r", 300), "v2"},
}

func insertReadModelRows(t *testing.T, db *pgtest.DB, t0 time.Time) {
	t.Helper()
	for _, r := range readModelRows {
		_, err := db.Pool.Exec(context.Background(), `
INSERT INTO tool_calls (call_id, session_id, seq, at, server, tool, args, args_escaped, decision, rule, reason,
                        shadow_decision, shadow_rule, policy_version, prev_hash, hash)
VALUES ($1, $2, $3, $4, $5, $6, $7, $8, $9, $10, 'reason', $11, $12, $13, '\x00'::bytea, '\x00'::bytea)`,
			r.call, r.session, r.seq, t0.Add(time.Duration(r.secs)*time.Second), r.server, r.tool, r.args, r.escaped,
			r.decision, r.rule, r.shadow, r.shadowRule, r.version)
		if err != nil {
			t.Fatal(err)
		}
	}
}

// TestPGReadModel: each reader of the tool_calls read model returns the
// rows it names, in its order, with its bounds.
func TestPGReadModel(t *testing.T) {
	db := pgtest.New(t, pgtest.Migrated())
	ctx := pgCtx(t)
	t0 := time.Date(2026, 3, 1, 12, 0, 0, 0, time.UTC)
	insertReadModelRows(t, db, t0)

	t.Run("decisions in order", func(t *testing.T) {
		var got []string
		err := EachDecision(ctx, db.Pool, DecisionFilter{}, func(r *RecordedDecision) error {
			got = append(got, r.CallID)
			return nil
		})
		if err != nil || strings.Join(got, ",") != "c1,c2,x1,c3" {
			t.Fatalf("EachDecision = %v, %v", got, err)
		}
	})
	t.Run("decisions filtered", func(t *testing.T) {
		var got []RecordedDecision
		f := DecisionFilter{Since: t0.Add(2 * time.Second), Until: t0.Add(4 * time.Second), Session: "s1", Server: "filesystem"}
		err := EachDecision(ctx, db.Pool, f, func(r *RecordedDecision) error {
			c := *r
			c.Args = append([]byte(nil), r.Args...)
			got = append(got, c)
			return nil
		})
		if err != nil || len(got) != 1 {
			t.Fatalf("EachDecision = %+v, %v", got, err)
		}
		want := RecordedDecision{CallID: "c2", SessionID: "s1", At: t0.Add(2 * time.Second), Server: "filesystem", Tool: "write_file",
			Args: []byte(`{"$path":"/w/b"}`), ArgsEscaped: false, Decision: "deny", Rule: "deny-writes", PolicyVersion: "v1"}
		g := got[0]
		if g.CallID != want.CallID || g.SessionID != want.SessionID || !g.At.Equal(want.At) || g.Server != want.Server ||
			g.Tool != want.Tool || string(g.Args) != string(want.Args) || g.ArgsEscaped != want.ArgsEscaped ||
			g.Decision != want.Decision || g.Rule != want.Rule || g.PolicyVersion != want.PolicyVersion {
			t.Fatalf("EachDecision = %+v, want %+v", g, want)
		}
	})
	t.Run("decisions stop on fn error", func(t *testing.T) {
		stop := errors.New("enough")
		n := 0
		err := EachDecision(ctx, db.Pool, DecisionFilter{}, func(*RecordedDecision) error { n++; return stop })
		if !errors.Is(err, stop) || n != 1 {
			t.Fatalf("EachDecision = %v after %d rows, want the fn's error after 1", err, n)
		}
	})
	t.Run("recent decisions", func(t *testing.T) {
		got, err := RecentDecisions(ctx, db.Pool, "s1", "c3", 10, 8)
		if err != nil || len(got) != 2 {
			t.Fatalf("RecentDecisions = %+v, %v", got, err)
		}
		if got[0].Tool != "filesyst__write_fi" || got[0].Decision != "deny" || got[0].Rule != "deny-wri" ||
			got[1].Tool != "filesyst__read_fil" || !got[0].At.After(got[1].At) {
			t.Fatalf("RecentDecisions = %+v", got)
		}
		if got, err := RecentDecisions(ctx, db.Pool, "s1", "", 1, 200); err != nil || len(got) != 1 || got[0].Tool != "filesystem__delete_file" {
			t.Fatalf("RecentDecisions limit 1 = %+v, %v", got, err)
		}
	})
	t.Run("disagreements", func(t *testing.T) {
		got, err := Disagreements(ctx, db.Pool, 10, 100)
		if err != nil || len(got) != 2 {
			t.Fatalf("Disagreements = %+v, %v", got, err)
		}
		if got[0].CallID != "c3" || got[0].ShadowDecision != "deny" || len(got[0].ShadowRule) != 100 ||
			got[1].CallID != "c2" || got[1].Decision != "deny" || got[1].ShadowDecision != "allow" || got[1].ShadowRule != "allow-all" {
			t.Fatalf("Disagreements = %+v", got)
		}
		if got, err := Disagreements(ctx, db.Pool, 1, 100); err != nil || len(got) != 1 || got[0].CallID != "c3" {
			t.Fatalf("Disagreements limit 1 = %+v, %v", got, err)
		}
	})
	t.Run("list", func(t *testing.T) {
		got, err := Query(ctx, db.Pool, Filter{Session: "s1", Decision: "deny"})
		if err != nil || len(got) != 1 || got[0].CallID != "c2" || got[0].ShadowDecision != "allow" {
			t.Fatalf("Query = %+v, %v", got, err)
		}
	})
}
