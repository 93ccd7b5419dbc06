package audit

import (
	"bufio"
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"testing"
	"time"
)

func TestJSONLRecord(t *testing.T) {
	at := time.Date(2026, 1, 2, 3, 4, 5, 0, time.UTC)
	tests := []struct {
		name     string
		event    Event
		wantType string
		want     map[string]any // fields that must be present with these values
	}{
		{
			name:     "decision redacted",
			event:    &ToolCallDecision{CallID: "c1", SessionID: "s", Time: at, Server: "github", Tool: "pr_create", Args: json.RawMessage(`{"token":"` + ghToken + `","title":"x"}`), Decision: "allow", Rule: "r", Reason: "ok"},
			wantType: TypeToolCallDecision,
			want:     map[string]any{"call_id": "c1", "decision": "allow", "args": map[string]any{"token": Redacted, "title": "x"}},
		},
		{
			name:     "outcome",
			event:    &ToolCallOutcome{CallID: "c1", Status: OutcomeError, Duration: time.Millisecond, Error: "Authorization: Bearer abc"},
			wantType: TypeToolCallOutcome,
			want:     map[string]any{"status": "error", "duration_ns": float64(1e6), "error": "Authorization: " + Redacted},
		},
		{
			name:     "egress",
			event:    &EgressEvent{ID: "e1", Host: "github.com", Port: 443, Decision: "deny"},
			wantType: TypeEgress,
			want:     map[string]any{"host": "github.com", "port": float64(443)},
		},
		{
			name:     "llm",
			event:    &LLMCall{ID: "l1", Provider: "anthropic", InputTokens: 10},
			wantType: TypeLLMCall,
			want:     map[string]any{"provider": "anthropic", "input_tokens": float64(10)},
		},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			var buf bytes.Buffer
			j := NewJSONL(&buf)
			if err := j.Record(context.Background(), tt.event); err != nil {
				t.Fatal(err)
			}
			line := buf.String()
			if !strings.HasSuffix(line, "\n") || strings.Count(line, "\n") != 1 {
				t.Fatalf("want exactly one line, got %q", line)
			}
			var got map[string]any
			if err := json.Unmarshal([]byte(line), &got); err != nil {
				t.Fatalf("line is not JSON: %v: %q", err, line)
			}
			if got["type"] != tt.wantType {
				t.Errorf("type = %v, want %s", got["type"], tt.wantType)
			}
			for k, v := range tt.want {
				if fmt.Sprint(got[k]) != fmt.Sprint(v) {
					t.Errorf("%s = %v, want %v", k, got[k], v)
				}
			}
			if strings.Contains(line, ghToken) || strings.Contains(line, "abc\"") {
				t.Errorf("secret in line: %s", line)
			}
		})
	}
}

func TestJSONLRejects(t *testing.T) {
	j := NewJSONL(io.Discard)
	var nilDecision *ToolCallDecision
	tests := []struct {
		name  string
		ctx   func() context.Context
		event Event
		want  error
	}{
		{name: "nil event", ctx: context.Background, event: nil, want: ErrUnknownEvent},
		{name: "typed nil", ctx: context.Background, event: nilDecision, want: ErrUnknownEvent},
		{name: "cancelled", ctx: func() context.Context {
			ctx, cancel := context.WithCancel(context.Background())
			cancel()
			return ctx
		}, event: &ToolCallOutcome{}, want: context.Canceled},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			if err := j.Record(tt.ctx(), tt.event); !errors.Is(err, tt.want) {
				t.Fatalf("Record = %v, want %v", err, tt.want)
			}
		})
	}
}

type failWriter struct{ n int }

func (f *failWriter) Write(p []byte) (int, error) {
	f.n++
	if f.n > 1 {
		return 0, errors.New("disk full")
	}
	return len(p), nil
}

// A write error is returned, and the sink stays failed: no later record
// may look as if the log were complete.
func TestJSONLWriteFailureIsSticky(t *testing.T) {
	j := NewJSONL(&failWriter{})
	ctx := context.Background()
	if err := j.Record(ctx, &ToolCallOutcome{CallID: "1"}); err != nil {
		t.Fatal(err)
	}
	if err := j.Record(ctx, &ToolCallOutcome{CallID: "2"}); err == nil || !strings.Contains(err.Error(), "disk full") {
		t.Fatalf("second Record = %v, want disk full", err)
	}
	if err := j.Record(ctx, &ToolCallOutcome{CallID: "3"}); !errors.Is(err, ErrSinkFailed) {
		t.Fatalf("third Record = %v, want ErrSinkFailed", err)
	}
}

func TestJSONLConcurrentLinesDoNotInterleave(t *testing.T) {
	var buf bytes.Buffer
	j := NewJSONL(&buf)
	var wg sync.WaitGroup
	for w := range 16 {
		wg.Go(func() {
			for i := range 50 {
				_ = j.Record(context.Background(), &ToolCallDecision{CallID: fmt.Sprintf("%d-%d", w, i), Args: json.RawMessage(`{"content":"` + strings.Repeat("x", 500) + `"}`)})
			}
		})
	}
	wg.Wait()
	sc := bufio.NewScanner(&buf)
	sc.Buffer(make([]byte, 1<<20), 1<<20)
	n := 0
	for sc.Scan() {
		if !json.Valid(sc.Bytes()) {
			t.Fatalf("line %d is not JSON: %q", n, sc.Text())
		}
		n++
	}
	if n != 800 {
		t.Fatalf("got %d lines, want 800", n)
	}
}

func TestOpenJSONLFileModeAndFsync(t *testing.T) {
	path := filepath.Join(t.TempDir(), "audit.jsonl")
	j, err := OpenJSONL(path, Fsync())
	if err != nil {
		t.Fatal(err)
	}
	if j.syncer == nil {
		t.Fatal("Fsync option did not take effect on *os.File")
	}
	if err := j.Record(context.Background(), &EgressEvent{ID: "e"}); err != nil {
		t.Fatal(err)
	}
	if err := j.Close(); err != nil {
		t.Fatal(err)
	}
	if err := j.Record(context.Background(), &EgressEvent{ID: "late"}); err == nil {
		t.Fatal("Record after Close succeeded")
	}
	st, err := os.Stat(path)
	if err != nil {
		t.Fatal(err)
	}
	if st.Mode().Perm() != 0o600 {
		t.Fatalf("mode = %v, want 0600", st.Mode().Perm())
	}
	b, _ := os.ReadFile(path)
	if strings.Count(string(b), "\n") != 1 {
		t.Fatalf("file = %q", b)
	}
}

func BenchmarkJSONLRecordDecision(b *testing.B) {
	j := NewJSONL(io.Discard)
	e := &ToolCallDecision{CallID: "c", SessionID: "s", Time: time.Now(), Server: "filesystem", Tool: "read_file", Args: json.RawMessage(`{"path":"/workspace/src/main.go"}`), Decision: "allow", Rule: "sandbox-read", Reason: "inside the sandbox"}
	ctx := context.Background()
	b.ReportAllocs()
	for b.Loop() {
		if err := j.Record(ctx, e); err != nil {
			b.Fatal(err)
		}
	}
}
