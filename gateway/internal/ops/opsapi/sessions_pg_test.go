package opsapi

import (
	"context"
	"encoding/json"
	"errors"
	"net/http/httptest"
	"strings"
	"testing"
	"time"

	"ironcurtain.dev/gateway/internal/audit"
	"ironcurtain.dev/gateway/internal/escalation"
	"ironcurtain.dev/gateway/internal/session/minted"
	"ironcurtain.dev/gateway/internal/store/pgtest"
)

// TestSessionsOnPostgres: a session minted through the client is listed
// (with no activity yet) next to a static one, shows its usage once it has
// records, and after revocation shows who revoked it; the waiting
// escalation it had is cancelled.
func TestSessionsOnPostgres(t *testing.T) {
	db := pgtest.New(t, pgtest.Migrated())
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	defer cancel()
	esc, sink := newPGEscalatorAndSink(t, db)
	store := minted.NewStore(db.Pool)
	ops, _ := NewOperators(map[string]OperatorToken{"alice": opToken})
	srv := httptest.NewServer(New(Deps{Operators: ops, Escalations: esc, Data: PGData{Pool: db.Pool}, Sessions: store}))
	defer srv.Close()
	client, _ := NewClient(srv.URL, opToken)

	if err := sink.Record(ctx, &audit.ToolCallDecision{CallID: "c0", SessionID: "agent", Server: "fs", Tool: "read",
		Args: json.RawMessage(`{}`), Decision: "allow", Rule: "r", Reason: "ok"}); err != nil {
		t.Fatal(err)
	}
	created, err := client.CreateSession(ctx, CreateSessionRequest{Name: "run-1", TTL: "1h", Budget: minted.Budget{MaxToolCalls: 5}, Labels: map[string]string{"ci/job": "42"}})
	if err != nil {
		t.Fatal(err)
	}
	id := created.Session.SessionID
	if !minted.ValidID(id) || !strings.HasPrefix(created.Token, minted.TokenPrefix) {
		t.Fatalf("created = %+v", created)
	}
	if _, err := store.Authenticate(ctx, created.Token); err != nil {
		t.Fatalf("the minted token does not authenticate: %v", err)
	}
	list, err := client.ListSessions(ctx, 0)
	if err != nil {
		t.Fatal(err)
	}
	statuses := map[string]string{}
	for _, s := range list {
		statuses[s.SessionID] = s.Status
	}
	if statuses[id] != "active" || statuses["agent"] != StatusStatic {
		t.Fatalf("statuses = %v", statuses)
	}

	for i, d := range []string{"allow", "deny", "escalate"} {
		if err := sink.Record(ctx, &audit.ToolCallDecision{CallID: "c" + string(rune('1'+i)), SessionID: id, Server: "git", Tool: "push",
			Args: json.RawMessage(`{}`), Decision: d, Rule: "r", Reason: "x", EscalationID: map[bool]string{true: "e-1"}[d == "escalate"]}); err != nil {
			t.Fatal(err)
		}
	}
	waited := make(chan escalation.Result, 1)
	go func() {
		res, _ := esc.Escalate(ctx, escalation.Request{ID: "e-1", CallID: "c3", SessionID: id, Server: "git", Tool: "push", Args: json.RawMessage(`{}`)})
		waited <- res
	}()
	var got SessionSummary
	for deadline := time.Now().Add(20 * time.Second); time.Now().Before(deadline); time.Sleep(20 * time.Millisecond) {
		if got, err = client.GetSession(ctx, id); err != nil {
			t.Fatal(err)
		}
		if got.PendingEscalations == 1 {
			break
		}
	}
	if got.ToolCalls != 3 || got.Denied != 1 || got.Escalated != 1 || got.PendingEscalations != 1 || got.Minted == nil || got.Minted.Labels["ci/job"] != "42" {
		t.Fatalf("show = %+v", got)
	}

	rev, err := client.RevokeSession(ctx, id, "done")
	if err != nil {
		t.Fatal(err)
	}
	if rev.Session.Status != "revoked" || rev.Session.Minted.RevokedBy != "alice" || len(rev.CancelledEscalations) != 1 || rev.Session.PendingEscalations != 0 {
		t.Fatalf("revoke = %+v", rev)
	}
	select {
	case res := <-waited:
		if res.Approved || res.Status != escalation.StatusCancelled {
			t.Fatalf("waiter = %+v", res)
		}
	case <-time.After(10 * time.Second):
		t.Fatal("waiter not woken")
	}
	if _, err := store.Authenticate(ctx, created.Token); !errors.Is(err, minted.ErrRevoked) {
		t.Fatalf("after revoke: %v", err)
	}
	// Listing filters by status on the server and pages with next tokens.
	second, err := client.CreateSession(ctx, CreateSessionRequest{Name: "run-2"})
	if err != nil {
		t.Fatal(err)
	}
	for status, want := range map[string][]string{"active": {second.Session.SessionID}, "revoked": {id}, StatusStatic: {"agent"}, "expired": nil} {
		var ids []string
		if err := client.EachSession(ctx, SessionFilter{Status: status, Limit: 10}, func(s *SessionSummary) error {
			ids = append(ids, s.SessionID)
			return nil
		}); err != nil {
			t.Fatal(err)
		}
		if strings.Join(ids, ",") != strings.Join(want, ",") {
			t.Errorf("status %s: %v, want %v", status, ids, want)
		}
	}
	var paged []string
	if err := (PGData{Pool: db.Pool}).SessionsEach(ctx, SessionFilter{Limit: 1}, func(s *SessionSummary) error {
		paged = append(paged, s.SessionID)
		return nil
	}); err != nil || len(paged) != 1 {
		t.Fatalf("first page: %v %v", paged, err)
	}
	var all []string
	if err := client.EachSession(ctx, SessionFilter{Limit: 50}, func(s *SessionSummary) error {
		all = append(all, s.SessionID)
		return nil
	}); err != nil || len(all) != 3 {
		t.Fatalf("all sessions: %v %v", all, err)
	}
	// One row per request: the client follows three next tokens, in order, without repeats.
	var one []string
	cur := audit.Cursor{}
	for range 4 {
		n := 0
		if err := (PGData{Pool: db.Pool}).SessionsEach(ctx, SessionFilter{Limit: 1, Cursor: cur}, func(s *SessionSummary) error {
			one = append(one, s.SessionID)
			cur = s.cursor()
			n++
			return nil
		}); err != nil {
			t.Fatal(err)
		}
		if n == 0 {
			break
		}
	}
	if strings.Join(one, ",") != strings.Join(all, ",") {
		t.Fatalf("paged one by one %v, want %v", one, all)
	}
	if _, err := client.ListSessions(ctx, 0); err != nil {
		t.Fatal(err)
	}
	var badStatus *APIError
	if err := client.EachSession(ctx, SessionFilter{Status: "pending"}, func(*SessionSummary) error { return nil }); !errors.As(err, &badStatus) || badStatus.Status != 400 {
		t.Fatalf("bad status filter: %v", err)
	}

	var apiErr *APIError
	if _, err := client.RevokeSession(ctx, "agent", ""); !errors.As(err, &apiErr) || apiErr.Status != 409 {
		t.Fatalf("revoking a static session: %v", err)
	}
}
