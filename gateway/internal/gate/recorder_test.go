package gate

import (
	"context"
	"errors"
	"testing"
	"time"

	"ironcurtain.dev/gateway/internal/audit"
)

// latchSink fails while fail is set and remembers the deadline it was given.
type latchSink struct {
	fail     error
	deadline time.Duration
	got      []audit.Event
}

func (s *latchSink) Record(ctx context.Context, e audit.Event) error {
	if d, ok := ctx.Deadline(); ok {
		s.deadline = time.Until(d)
	}
	if s.fail != nil {
		return s.fail
	}
	s.got = append(s.got, e)
	return nil
}

func TestRecorder(t *testing.T) {
	sink := &latchSink{}
	r := NewRecorder(sink)
	ev := audit.NewEgressEvent(audit.EgressFields{ID: "e1", Kind: "connect"})
	if r.Down() {
		t.Fatal("a new recorder is down")
	}
	if err := r.Record(ev); err != nil || r.Down() {
		t.Fatalf("Record = %v, Down = %v; want nil, false", err, r.Down())
	}
	if len(sink.got) != 1 || sink.got[0] != ev {
		t.Fatalf("sink got %v", sink.got)
	}
	if sink.deadline <= 0 || sink.deadline > RecordTimeout {
		t.Fatalf("write deadline %v, want within %v", sink.deadline, RecordTimeout)
	}

	sink.fail = errors.New("database paused")
	if err := r.Record(ev); !errors.Is(err, sink.fail) || err.Error() != "database paused" {
		t.Fatalf("Record = %v; want the sink's error unchanged", err)
	}
	if !r.Down() {
		t.Fatal("not down after a failed write")
	}
	sink.fail = nil
	if err := r.Record(ev); err != nil || r.Down() {
		t.Fatalf("after recovery: Record = %v, Down = %v; want nil, false", err, r.Down())
	}
}
