package audit

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"hash"
	"io"
	"os"
	"sync"
)

// JSONL is a Sink that writes one JSON object per line, with a "type" field
// (tool_call_decision, tool_call_outcome, egress, llm_call) followed by the
// event's fields. Events are redacted before they are written. Lines are
// written whole under a mutex, so concurrent Records never interleave.
//
// Durability: Record returns once the line is handed to the writer. With
// the Fsync option (and a writer that has a Sync method, like *os.File)
// Record also syncs the file before returning, so the line survives a crash
// of the machine; that costs one fsync per record (milliseconds on ordinary
// disks). Without it a crash of the process loses nothing already written,
// a crash of the machine may lose the last lines.
type JSONL struct {
	mu     sync.Mutex
	w      io.Writer
	syncer interface{ Sync() error }
	closer io.Closer
	buf    bytes.Buffer
	err    error     // first write error: the sink stays failed after it
	limits Limits    // bounds stored arguments (ArgLimits)
	mac    hash.Hash // MAC: every line carries an HMAC (jsonl_mac.go)
}

var _ Sink = (*JSONL)(nil)

// JSONLOption configures a JSONL sink.
type JSONLOption func(*JSONL)

// Fsync makes every Record sync the writer (when it has a Sync method).
func Fsync() JSONLOption {
	return func(j *JSONL) {
		if s, ok := j.w.(interface{ Sync() error }); ok {
			j.syncer = s
		}
	}
}

// NewJSONL returns a sink writing to w. The caller keeps ownership of w.
func NewJSONL(w io.Writer, opts ...JSONLOption) *JSONL {
	j := &JSONL{w: w}
	for _, o := range opts {
		o(j)
	}
	return j
}

// OpenJSONL appends to the file at path (created with mode 0600). Close
// closes the file.
func OpenJSONL(path string, opts ...JSONLOption) (*JSONL, error) {
	f, err := os.OpenFile(path, os.O_WRONLY|os.O_APPEND|os.O_CREATE, 0o600)
	if err != nil {
		return nil, fmt.Errorf("opening audit log: %w", err)
	}
	j := NewJSONL(f, opts...)
	j.closer = f
	return j, nil
}

// ErrSinkFailed is returned by every Record after a write failed: a sink
// that lost a line does not pretend later lines are a complete record.
var ErrSinkFailed = errors.New("audit log failed earlier")

// Record implements Sink.
func (j *JSONL) Record(ctx context.Context, e Event) error {
	if err := ctx.Err(); err != nil {
		return fmt.Errorf("recording audit event: %w", err)
	}
	typ, err := eventType(e)
	if err != nil {
		return fmt.Errorf("recording audit event: %w", err)
	}
	bp := encodeBufs.Get().(*[]byte)
	body, err := appendMarshal((*bp)[:0], StoredEvent(e, j.limits))
	if err != nil {
		encodeBufs.Put(bp)
		return fmt.Errorf("recording audit event: encoding: %w", err)
	}
	defer func() {
		if cap(body) <= maxPooledBuf {
			*bp = body[:0]
			encodeBufs.Put(bp)
		}
	}()
	j.mu.Lock()
	defer j.mu.Unlock()
	if j.err != nil {
		return fmt.Errorf("recording audit event: %w: %w", ErrSinkFailed, j.err)
	}
	j.buf.Reset()
	j.buf.WriteString(`{"type":"`)
	j.buf.WriteString(typ)
	j.buf.WriteString(`"`)
	if len(body) > 2 { // body is {...}: splice its fields after "type"
		j.buf.WriteByte(',')
		j.buf.Write(body[1:])
	} else {
		j.buf.WriteByte('}')
	}
	j.buf.WriteByte('\n')
	if j.mac != nil {
		appendMAC(&j.buf, j.mac)
	}
	if _, err := j.w.Write(j.buf.Bytes()); err != nil {
		j.err = err
		return fmt.Errorf("recording audit event: writing: %w", err)
	}
	if j.syncer != nil {
		if err := j.syncer.Sync(); err != nil {
			j.err = err
			return fmt.Errorf("recording audit event: syncing: %w", err)
		}
	}
	return nil
}

// Close closes the file opened by OpenJSONL (a no-op for NewJSONL).
func (j *JSONL) Close() error {
	j.mu.Lock()
	defer j.mu.Unlock()
	if j.closer == nil {
		return nil
	}
	err := j.closer.Close()
	j.closer = nil
	if j.err == nil {
		j.err = errors.New("audit log closed")
	}
	if err != nil {
		return fmt.Errorf("closing audit log: %w", err)
	}
	return nil
}

// Event type names used in JSON lines and by the Postgres sink's metrics.
const (
	TypeToolCallDecision = "tool_call_decision"
	TypeToolCallOutcome  = "tool_call_outcome"
	TypeEgress           = "egress"
	TypeLLMCall          = "llm_call"
)

// ErrUnknownEvent is returned for a nil event or one of an unknown type.
var ErrUnknownEvent = errors.New("unknown audit event type")

func eventType(e Event) (string, error) {
	switch x := e.(type) {
	case *ToolCallDecision:
		if x != nil {
			return TypeToolCallDecision, nil
		}
	case *ToolCallOutcome:
		if x != nil {
			return TypeToolCallOutcome, nil
		}
	case *EgressEvent:
		if x != nil {
			return TypeEgress, nil
		}
	case *LLMCall:
		if x != nil {
			return TypeLLMCall, nil
		}
	}
	return "", ErrUnknownEvent
}
