package audit

import (
	"testing"
	"time"

	"ironcurtain.dev/gateway/internal/store/pgtest"
)

const testTraceID = "4bf92f3577b34da6a3ce929d0e0e4736"

// TestPGTraceIDs: decisions, egress events and model calls keep their
// trace ids (migration 0009); a malformed id is stored empty instead of
// failing the batch; the trace id is outside the hash chain, so the chain
// verifies and editing the id breaks nothing.
func TestPGTraceIDs(t *testing.T) {
	db := pgtest.New(t, pgtest.Migrated())
	ctx := pgCtx(t)
	s, _ := newTestSink(t, db, Options{})
	d1 := decision("s", "c1")
	d1.TraceID = testTraceID
	d2 := decision("s", "c2")
	d2.TraceID = "not-a-trace-id'); DROP TABLE x; --"
	now := time.Now()
	for _, e := range []Event{
		d1, d2,
		&EgressEvent{ID: "e1", SessionID: "s", Time: now, Kind: "connect", Host: "example.com", Port: 443, Decision: "allow", TraceID: testTraceID},
		&LLMCall{ID: "l1", SessionID: "s", Time: now, Provider: "anthropic", Model: "m", Path: "/v1/messages", StatusCode: 200, TraceID: testTraceID},
	} {
		if err := s.Record(ctx, e); err != nil {
			t.Fatal(err)
		}
	}
	for _, q := range []struct{ sql, want string }{
		{`SELECT trace_id FROM tool_calls WHERE call_id = 'c1'`, testTraceID},
		{`SELECT trace_id FROM tool_calls WHERE call_id = 'c2'`, ""},
		{`SELECT trace_id FROM egress_events WHERE id = 'e1'`, testTraceID},
		{`SELECT trace_id FROM llm_calls WHERE id = 'l1'`, testTraceID},
	} {
		var got string
		if err := db.Pool.QueryRow(ctx, q.sql).Scan(&got); err != nil || got != q.want {
			t.Fatalf("%s = %q, %v; want %q", q.sql, got, err, q.want)
		}
	}
	traces := map[string]string{}
	if err := QueryEach(ctx, db.Pool, Filter{Session: "s"}, func(c *ToolCall) error {
		traces[c.CallID] = c.TraceID
		return nil
	}); err != nil || traces["c1"] != testTraceID || traces["c2"] != "" {
		t.Fatalf("queried trace ids %v, %v", traces, err)
	}
	if _, err := db.Pool.Exec(ctx, `UPDATE tool_calls SET trace_id = '' WHERE call_id = 'c1'`); err != nil {
		t.Fatal(err)
	}
	checks, err := Verify(ctx, db.Pool, "s")
	if err != nil || len(checks) != 1 || checks[0].Break != nil {
		t.Fatalf("verify: %+v, %v", checks, err)
	}
}

func TestTraceIDColumn(t *testing.T) {
	for in, want := range map[string]string{
		testTraceID: testTraceID, "": "", "4BF92F3577B34DA6A3CE929D0E0E4736": "", testTraceID + "0": "", "zz" + testTraceID[2:]: "",
	} {
		if got := traceIDColumn(in); got != want {
			t.Errorf("traceIDColumn(%q) = %q, want %q", in, got, want)
		}
	}
}
