package main

import (
	"context"
	"encoding/json"
	"os"
	"testing"
	"time"

	"ironcurtain.dev/gateway/internal/audit"
	"ironcurtain.dev/gateway/internal/store/pgtest"
)

func TestMain(m *testing.M) { os.Exit(pgtest.Main(m)) }

// TestVerifyCountsUnaudited: verify finds each successful call's allow
// decision by session and content, counts a call with no decision (or with
// only a denial, or a decision in another session) as unaudited and an allow
// decision without an outcome as missing one.
func TestVerifyCountsUnaudited(t *testing.T) {
	db := pgtest.New(t, pgtest.Migrated())
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	defer cancel()
	sink, err := audit.NewPG(db.Pool, audit.Options{}, nil, nil)
	if err != nil {
		t.Fatal(err)
	}
	defer sink.Close()
	write := func(id, sess, content, decision string, outcome bool) {
		t.Helper()
		args, _ := json.Marshal(map[string]string{"path": "/w/f.txt", "content": content})
		if err := sink.Record(ctx, &audit.ToolCallDecision{CallID: id, SessionID: sess, Time: time.Now(),
			Server: "filesystem", Tool: "write_file", Args: args, Decision: decision, Rule: "r", Reason: "x"}); err != nil {
			t.Fatal(err)
		}
		if outcome {
			if err := sink.Record(ctx, &audit.ToolCallOutcome{CallID: id, SessionID: sess, Time: time.Now(), Status: audit.OutcomeOK}); err != nil {
				t.Fatal(err)
			}
		}
	}
	write("c1", "s0", "benchmcp s0 c0", "allow", true)
	write("c2", "s0", "benchmcp s0 c1", "allow", false) // no outcome
	write("c3", "s1", "benchmcp s1 c0", "deny", true)   // a denial does not audit a success
	write("c4", "s1", "benchmcp s0 c2", "allow", true)  // s0's content in another session
	calls := []okCall{
		{0, "benchmcp s0 c0"}, // audited
		{0, "benchmcp s0 c1"}, // missing outcome
		{1, "benchmcp s1 c0"}, // unaudited (denied)
		{0, "benchmcp s0 c2"}, // unaudited (wrong session)
		{2, "benchmcp s2 c0"}, // unaudited (nothing)
	}
	unaudited, missing, err := verify(ctx, db.DSN, calls)
	if err != nil {
		t.Fatal(err)
	}
	if unaudited != 3 || missing != 1 {
		t.Fatalf("unaudited %d, missing outcome %d; want 3, 1", unaudited, missing)
	}
}
