package opsapi

import (
	"context"
	"encoding/json"
	"errors"
	"net/http/httptest"
	"os"
	"testing"
	"time"

	"ironcurtain.dev/gateway/internal/audit"
	"ironcurtain.dev/gateway/internal/escalation"
	"ironcurtain.dev/gateway/internal/store/pgtest"
)

func TestMain(m *testing.M) { os.Exit(pgtest.Main(m)) }

// newPGEscalatorAndSink returns the real escalator and audit sink on db,
// both closed when the test ends.
func newPGEscalatorAndSink(t *testing.T, db *pgtest.DB) (*escalation.PG, *audit.PGSink) {
	t.Helper()
	esc, err := escalation.NewPG(db.Pool, escalation.Config{}, nil, nil)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { esc.Close() })
	sink, err := audit.NewPG(db.Pool, audit.Options{}, nil, nil)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { sink.Close() })
	return esc, sink
}

// TestEndToEndOnPostgres: a call escalates on the real escalator, the
// operator approves it through the ops API client, the call resumes; the
// audit query and session summary see the session.
func TestEndToEndOnPostgres(t *testing.T) {
	db := pgtest.New(t, pgtest.Migrated())
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	defer cancel()
	esc, sink := newPGEscalatorAndSink(t, db)
	ops, _ := NewOperators(map[string]OperatorToken{"alice": opToken})
	srv := httptest.NewServer(New(Deps{Operators: ops, Escalations: esc, Data: PGData{Pool: db.Pool}}))
	defer srv.Close()
	client, _ := NewClient(srv.URL, opToken)

	if err := sink.Record(ctx, &audit.ToolCallDecision{CallID: "c1", SessionID: "s1", Server: "git", Tool: "push",
		Args: json.RawMessage(`{}`), Decision: "escalate", Rule: "r", Reason: "push needs approval", EscalationID: "e-1"}); err != nil {
		t.Fatal(err)
	}
	done := make(chan escalation.Result, 1)
	go func() {
		res, err := esc.Escalate(ctx, escalation.Request{ID: "e-1", CallID: "c1", SessionID: "s1", Server: "git", Tool: "push", Args: json.RawMessage(`{}`)})
		if err != nil {
			t.Error(err)
		}
		done <- res
	}()
	var pending []escalation.Escalation
	var err error
	for deadline := time.Now().Add(20 * time.Second); len(pending) == 0 && time.Now().Before(deadline); {
		pending, err = client.ListEscalations(ctx, escalation.ListFilter{Status: escalation.StatusPending})
		if err != nil {
			t.Fatal(err)
		}
		time.Sleep(20 * time.Millisecond)
	}
	if len(pending) != 1 || pending[0].ID != "e-1" {
		t.Fatalf("pending = %+v", pending)
	}
	if _, err := client.Decide(ctx, "e-1", true, DecideRequest{Reason: "ok"}); err != nil {
		t.Fatal(err)
	}
	select {
	case res := <-done:
		if !res.Approved || res.DecidedBy != "alice" {
			t.Fatalf("result = %+v", res)
		}
	case <-time.After(20 * time.Second):
		t.Fatal("call did not resume")
	}

	data := PGData{Pool: db.Pool}
	if err := data.Ready(ctx); err != nil {
		t.Fatalf("Ready on a migrated database: %v", err)
	}
	sessions, err := data.Sessions(ctx, 0)
	if err != nil || len(sessions) != 1 || sessions[0].Escalated != 1 || sessions[0].Records != 1 {
		t.Fatalf("sessions = %+v, %v", sessions, err)
	}
	if _, err := data.Session(ctx, "nobody"); !errors.Is(err, ErrNotFound) {
		t.Fatalf("unknown session = %v", err)
	}
	calls, err := audit.Query(ctx, db.Pool, audit.Filter{Decision: "escalate"})
	if err != nil || len(calls) != 1 || calls[0].EscalationID != "e-1" {
		t.Fatalf("tool calls = %+v, %v", calls, err)
	}
}

func TestReadyOnOldSchema(t *testing.T) {
	db := pgtest.New(t, pgtest.MigratedTo(1))
	err := PGData{Pool: db.Pool}.Ready(context.Background())
	if err == nil {
		t.Fatal("ready on an old schema")
	}
}
