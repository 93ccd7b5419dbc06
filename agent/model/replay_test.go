package model

import (
	"context"
	"errors"
	"os"
	"path/filepath"
	"strings"
	"testing"
)

func TestReplayPlaysSteps(t *testing.T) {
	r, err := ParseTranscript([]byte(`
steps:
  - say: looking
    code: return 1
    usage: {input: 10, output: 2}
  - expect: {status: error, contains: ["denied"], not_contains: ["secret"]}
    code: return 2
  - final: finished
`))
	if err != nil {
		t.Fatal(err)
	}
	ctx := context.Background()
	conv := []Message{{Role: User, Text: "task"}}
	r1, err := r.Complete(ctx, Request{Messages: conv})
	if err != nil {
		t.Fatal(err)
	}
	if r1.Text != "looking" || len(r1.Calls) != 1 || r1.Calls[0].Code != "return 1" || r1.Usage.Total() != 12 {
		t.Fatalf("step 1 = %+v", r1)
	}
	conv = append(conv, Message{Role: Assistant, Calls: r1.Calls})

	tests := []struct {
		name    string
		result  ToolResult
		wantErr string
	}{
		{name: "status mismatch", result: ToolResult{Content: "denied", IsError: false}, wantErr: "want an error"},
		{name: "missing text", result: ToolResult{Content: "refused", IsError: true}, wantErr: `lacks "denied"`},
		{name: "forbidden text", result: ToolResult{Content: "denied secret", IsError: true}, wantErr: `contains "secret"`},
		{name: "met", result: ToolResult{Content: "denied by policy", IsError: true}},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			c := append(append([]Message(nil), conv...), Message{Role: User, Results: []ToolResult{tc.result}})
			_, err := r.Complete(ctx, Request{Messages: c})
			if tc.wantErr == "" {
				if err != nil {
					t.Fatal(err)
				}
				return
			}
			if !errors.Is(err, ErrExpectation) || !strings.Contains(err.Error(), tc.wantErr) {
				t.Errorf("err = %v, want %q", err, tc.wantErr)
			}
		})
	}

	full := append(conv, Message{Role: User, Results: []ToolResult{{Content: "denied", IsError: true}}},
		Message{Role: Assistant}, Message{Role: User, Results: []ToolResult{{Content: "ok"}}})
	r3, err := r.Complete(ctx, Request{Messages: full})
	if err != nil || r3.Text != "finished" || len(r3.Calls) != 0 {
		t.Fatalf("final = %+v, %v", r3, err)
	}
	_, err = r.Complete(ctx, Request{Messages: append(full, Message{Role: Assistant})})
	if err == nil || !strings.Contains(err.Error(), "3 steps") {
		t.Errorf("exhausted transcript: %v", err)
	}
}

// TestShippedTranscriptsParse keeps the demo transcript loadable.
func TestShippedTranscriptsParse(t *testing.T) {
	files, err := filepath.Glob("../transcripts/*.yaml")
	if err != nil || len(files) == 0 {
		t.Fatalf("no shipped transcripts: %v", err)
	}
	for _, f := range files {
		t.Run(filepath.Base(f), func(t *testing.T) {
			if _, err := LoadReplay(f); err != nil {
				t.Fatal(err)
			}
			raw, _ := os.ReadFile(f)
			if !strings.Contains(string(raw), "final:") {
				t.Errorf("transcript never finishes")
			}
		})
	}
}
