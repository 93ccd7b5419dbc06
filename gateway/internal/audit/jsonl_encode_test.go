package audit

import (
	"bytes"
	"encoding/json"
	"testing"
	"time"
)

// encodeCases are records the hub writes, and ones the direct encoder must
// hand to json.Marshal or escape like it.
func encodeCases() []Event {
	at := time.Date(2026, 11, 28, 16, 4, 5, 123456789, time.UTC)
	return []Event{
		&ToolCallDecision{CallID: "b15f0816-fc59-40fe-a522-1d5cc655816f", SessionID: "s0", Time: at, Server: "filesystem", Tool: "write_file",
			Args: json.RawMessage(`{"content":"benchmcp s0 c1","path":"/w/s0/f1.txt"}`), Decision: "allow", Rule: "allow-sandbox-write", Reason: "in the sandbox",
			PolicyVersion: "sha256:ab", TraceID: "0123456789abcdef0123456789abcdef"},
		&ToolCallDecision{CallID: "c", Time: at.In(time.FixedZone("x", 3600)), Args: json.RawMessage(`{"a":1}`), Decision: "deny", ShadowDecision: "allow", ShadowRule: "r", EscalationID: "e", Detail: "d"},
		&ToolCallDecision{CallID: "c", Args: json.RawMessage(`{"a":"<b>&"}`), Reason: "x < y & \"q\" \\ é \u2028 \x01"},
		&ToolCallDecision{CallID: "c", Args: json.RawMessage(`{"a":"\u2028"}`)},
		&ToolCallDecision{CallID: "c", Args: json.RawMessage(`{"a": 1 }`)}, // not compact: json.Marshal compacts
		&ToolCallDecision{CallID: "c", Args: json.RawMessage(`{"a":"x\" y"}`)},
		&ToolCallDecision{CallID: "c", Args: json.RawMessage(`{"a":[1,2.5e3,true,null,{"b":"\\\""}]}`)},
		&ToolCallDecision{CallID: "c"},                                                     // nil args: null
		&ToolCallDecision{CallID: "c", Args: json.RawMessage(`{`)},                         // invalid: json.Marshal's error
		&ToolCallDecision{CallID: "c", Args: json.RawMessage{}},                            // empty: json.Marshal's error
		&ToolCallDecision{CallID: "c", Time: time.Date(10000, 1, 1, 0, 0, 0, 0, time.UTC)}, // a year JSON refuses
		&ToolCallOutcome{CallID: "c", SessionID: "s", Time: at, Status: OutcomeOK, Duration: 1234567, ResultBytes: 42},
		&ToolCallOutcome{CallID: "c", Status: OutcomeError, Duration: -1, Truncated: true, Error: "bad \x00 \xff thing"},
		&EgressEvent{ID: "e", Host: "h", Port: 443},
		&LLMCall{ID: "l", CostUSD: 0.25},
	}
}

// TestAppendEventMatchesMarshal: marshalEvent writes json.Marshal's bytes
// (or fails where it fails), and the hub's own records take the direct path.
func TestAppendEventMatchesMarshal(t *testing.T) {
	for i, e := range encodeCases() {
		sameAsMarshal(t, e)
		if i < 2 || i == 11 { // the hub's records: the direct encoder, not the fallback
			if _, ok := appendEvent(nil, e); !ok {
				t.Errorf("case %d: the direct encoder declined %#v", i, e)
			}
		}
	}
}

func sameAsMarshal(t *testing.T, e Event) {
	t.Helper()
	want, wantErr := json.Marshal(e)
	got, err := marshalEvent(e)
	if (err != nil) != (wantErr != nil) {
		t.Fatalf("%#v: error %v, json.Marshal's %v", e, err, wantErr)
	}
	if !bytes.Equal(got, want) {
		t.Fatalf("%#v:\n got %s\nwant %s", e, got, want)
	}
}

func FuzzAppendEventMatchesMarshal(f *testing.F) {
	f.Add("c1", "s0", "filesystem", `{"content":"x","path":"/w/f"}`, "allow", "detail", int64(0), 5, false)
	f.Add("c<", "s\u2028", "é", `{"a" : [1, "<&>"]}`, "", "\xff", int64(-5), 0, true)
	f.Add("", "", "", `nul`, "", "", int64(1)<<62, -1, false)
	f.Fuzz(func(t *testing.T, id, sess, srv, args, reason, detail string, nanos int64, n int, trunc bool) {
		at := time.Unix(0, nanos).UTC()
		raw := json.RawMessage(args)
		if args == "nul" {
			raw = nil
		}
		sameAsMarshal(t, &ToolCallDecision{CallID: id, SessionID: sess, Time: at, Server: srv, Tool: srv, Args: raw,
			Decision: reason, Rule: detail, Reason: reason, Detail: detail, ShadowRule: id, TraceID: sess})
		sameAsMarshal(t, &ToolCallOutcome{CallID: id, SessionID: sess, Time: at, Status: reason, Duration: time.Duration(nanos),
			ResultBytes: n, Truncated: trunc, Error: detail})
	})
}
