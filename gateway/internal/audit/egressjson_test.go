package audit

import (
	"bytes"
	"context"
	"encoding/json"
	"io"
	"testing"
	"time"
)

// egressSamples are events whose JSON the fast encoder must write exactly
// as json.Marshal does: every field set and unset, strings that need each
// kind of escape, the time's edge cases.
func egressSamples() []*EgressEvent {
	t0 := time.Date(2026, 11, 28, 16, 0, 0, 123456789, time.UTC)
	return []*EgressEvent{
		{},
		{ID: "4488740d-8b5e-4106-a9bb-1f7404be6db0", SessionID: "bench", Time: t0, Kind: "connect", Method: "CONNECT", Host: "127.0.0.1", Port: 39001,
			ResolvedIP: "127.0.0.1", Decision: "allow", Reason: "host is in the allowlist", Rule: "egress.allowed_hosts[127.0.0.1]",
			BytesUp: 9, BytesDown: 1, Duration: 256121, Error: "connection reset by peer"},
		{ID: "x", ToolCallID: "call-1", TraceID: "0af7651916cd43dd8448eb211c80319c", Time: t0.In(time.FixedZone("x", -7*3600)), Kind: "fetch", Port: -1,
			Reason: `a "quoted" \ back <b>&amp;</b>`, Error: "tab\there\nnew\rline\b\f\x00\x1f\x7f", Host: "bücher.example", BytesUp: -5, Duration: -1},
		{Reason: "bad utf-8 \xff\xfe and \u2028 \u2029 and 😀", Rule: "\xed\xa0\x80", Time: time.Unix(0, 0)},
	}
}

func TestEgressJSONMatchesMarshal(t *testing.T) {
	for i, e := range egressSamples() {
		checkEgressJSON(t, i, e)
	}
	// A year json.Marshal refuses: the fast encoder refuses it too.
	if _, err := appendEgressJSON(nil, &EgressEvent{Time: time.Date(10000, 1, 1, 0, 0, 0, 0, time.UTC)}); err == nil {
		t.Error("year 10000 encoded; json.Marshal refuses it")
	}
}

func checkEgressJSON(t *testing.T, i int, e *EgressEvent) {
	t.Helper()
	want, werr := json.Marshal(e)
	got, gerr := appendEgressJSON(nil, e)
	if (werr != nil) != (gerr != nil) {
		t.Fatalf("event %d: json.Marshal error %v, fast encoder error %v", i, werr, gerr)
	}
	if !bytes.Equal(got, want) {
		t.Fatalf("event %d:\n got %s\nwant %s", i, got, want)
	}
}

func FuzzEgressJSONMatchesMarshal(f *testing.F) {
	for _, e := range egressSamples() {
		f.Add(e.ID, e.SessionID, e.Reason, e.Error, e.Host, e.Rule, e.Time.UnixNano(), int64(e.Port), e.BytesUp, int64(e.Duration))
	}
	f.Fuzz(func(t *testing.T, id, sess, reason, errText, host, rule string, nanos, port, up, dur int64) {
		e := &EgressEvent{ID: id, SessionID: sess, ToolCallID: rule, Time: time.Unix(0, nanos).UTC(), Kind: host, Method: sess,
			Host: host, Port: int(port), ResolvedIP: id, Decision: rule, Reason: reason, Rule: rule,
			BytesUp: up, BytesDown: -up, Duration: time.Duration(dur), Error: errText, TraceID: reason}
		checkEgressJSON(t, 0, e)
	})
}

// The sink writes an egress row through the fast encoder: the line is the
// type and json.Marshal's fields of the stored (redacted) event.
func TestJSONLEgressLine(t *testing.T) {
	var out bytes.Buffer
	j := NewJSONL(&out)
	e := egressSamples()[1]
	if err := j.Record(context.Background(), e); err != nil {
		t.Fatal(err)
	}
	body, _ := json.Marshal(StoredEvent(e, j.limits))
	if want := `{"type":"egress",` + string(body[1:]) + "\n"; out.String() != want {
		t.Fatalf("line\n %s\nwant\n %s", out.String(), want)
	}
}

func BenchmarkJSONLRecordEgress(b *testing.B) {
	j := NewJSONL(io.Discard)
	e := egressSamples()[1]
	ctx := context.Background()
	b.ReportAllocs()
	for b.Loop() {
		if err := j.Record(ctx, e); err != nil {
			b.Fatal(err)
		}
	}
}
