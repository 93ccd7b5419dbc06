package gate

import (
	"context"
	"sync/atomic"
	"time"

	"ironcurtain.dev/gateway/internal/audit"
)

// RecordTimeout bounds a Recorder's audit write at the end of a request.
const RecordTimeout = 10 * time.Second

// Recorder writes the one record of each request a door decides and serves
// without a tool call (the egress proxy's requests and tunnels, the model
// relay's calls), once the request has ended, and keeps the audit health
// those doors refuse on: after a failed write Down reports true, and the
// door refuses new requests, until a write succeeds again (fail closed).
//
// Tool calls are recorded by the gate itself (write-ahead decision, then
// outcome: pipeline.go), not through a Recorder.
type Recorder struct {
	sink audit.Sink
	down atomic.Bool
}

// NewRecorder returns a Recorder writing to sink.
func NewRecorder(sink audit.Sink) *Recorder {
	return &Recorder{sink: sink}
}

// Record writes e, bounded by RecordTimeout and independent of the request's
// context (the request has ended, or its client has gone). It returns the
// sink's error unchanged, after marking the audit down; a success marks it
// up.
func (r *Recorder) Record(e audit.Event) error {
	ctx, cancel := context.WithTimeout(context.Background(), RecordTimeout)
	defer cancel()
	if err := r.sink.Record(ctx, e); err != nil {
		r.down.Store(true)
		return err
	}
	r.down.Store(false)
	return nil
}

// Down reports whether the last write failed: the door must refuse new
// requests.
func (r *Recorder) Down() bool { return r.down.Load() }
