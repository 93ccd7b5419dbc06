package audit

import (
	"bufio"
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"io"
	"os"
	"path/filepath"
	"testing"
	"time"
)

// TestJSONLLinesCarryMAC: every line the gateway writes verifies under its
// key and is still one JSON object; a line appended by another writer
// (forged, or copied with a field changed) does not.
func TestJSONLLinesCarryMAC(t *testing.T) {
	key := bytes.Repeat([]byte{5}, SpoolKeySize)
	path := filepath.Join(t.TempDir(), "audit.jsonl")
	j, err := OpenJSONL(path, MAC(key))
	if err != nil {
		t.Fatal(err)
	}
	ctx := context.Background()
	for _, e := range []Event{
		&ToolCallOutcome{CallID: "c1", SessionID: "s1", Status: OutcomeOK, Time: time.Unix(1, 0).UTC()},
		&EgressEvent{ID: "e1", Kind: "mcp-url", Host: "notes.example.com", Port: 443, Decision: "allow", Reason: "r"},
	} {
		if err := j.Record(ctx, e); err != nil {
			t.Fatal(err)
		}
	}
	_ = j.Close()
	data, err := os.ReadFile(path)
	if err != nil {
		t.Fatal(err)
	}
	var first []byte
	sc := bufio.NewScanner(bytes.NewReader(data))
	n := 0
	for sc.Scan() {
		n++
		line := sc.Bytes()
		if first == nil {
			first = bytes.Clone(line)
		}
		if err := VerifyJSONLLine(key, line); err != nil {
			t.Fatalf("line %d: %v", n, err)
		}
		var m map[string]any
		if err := json.Unmarshal(line, &m); err != nil || m["mac"] == nil || m["type"] == nil {
			t.Fatalf("line %d is not one object with type and mac: %v", n, err)
		}
	}
	if n != 2 {
		t.Fatalf("%d lines", n)
	}
	tampered := bytes.Replace(first, []byte(`"c1"`), []byte(`"c2"`), 1)
	other, _ := os.CreateTemp(t.TempDir(), "x")
	jo := NewJSONL(other, MAC(bytes.Repeat([]byte{6}, SpoolKeySize)))
	_ = jo.Record(ctx, &ToolCallOutcome{CallID: "forged", SessionID: "s1", Status: OutcomeOK})
	_ = other.Close()
	forged, _ := os.ReadFile(other.Name())
	for name, line := range map[string][]byte{
		"field changed":    tampered,
		"another key":      forged,
		"no mac":           []byte(`{"type":"tool_call_outcome","call_id":"x"}`),
		"mac not hex":      append(bytes.Clone(first[:len(first)-macSuffixLen]), []byte(`,"mac":"`+string(bytes.Repeat([]byte("z"), 64))+`"}`)...),
		"empty":            nil,
		"truncated suffix": first[:len(first)-3],
	} {
		if err := VerifyJSONLLine(key, line); !errors.Is(err, ErrJSONLMAC) {
			t.Errorf("%s: err = %v, want ErrJSONLMAC", name, err)
		}
	}
}

func FuzzVerifyJSONLLine(f *testing.F) {
	key := bytes.Repeat([]byte{5}, SpoolKeySize)
	var buf bytes.Buffer
	_ = NewJSONL(&buf, MAC(key)).Record(context.Background(), &ToolCallOutcome{CallID: "c1", Status: OutcomeOK})
	f.Add(buf.Bytes())
	f.Add([]byte(`{"mac":""}`))
	f.Fuzz(func(t *testing.T, line []byte) {
		if VerifyJSONLLine(key, line) == nil && !bytes.Equal(bytes.TrimSuffix(line, []byte("\n")), bytes.TrimSuffix(buf.Bytes(), []byte("\n"))) {
			// Only the one line written with the key may verify (a
			// different line verifying would be an HMAC forgery).
			t.Fatalf("a line the gateway did not write verified: %q", line)
		}
	})
}

func BenchmarkJSONLRecordDecisionMAC(b *testing.B) {
	j := NewJSONL(io.Discard, MAC(bytes.Repeat([]byte{5}, SpoolKeySize)))
	e := &ToolCallDecision{CallID: "c", SessionID: "s", Time: time.Now(), Server: "filesystem", Tool: "read_file", Args: json.RawMessage(`{"path":"/workspace/src/main.go"}`), Decision: "allow", Rule: "sandbox-read", Reason: "inside the sandbox"}
	ctx := context.Background()
	b.ReportAllocs()
	for b.Loop() {
		if err := j.Record(ctx, e); err != nil {
			b.Fatal(err)
		}
	}
}
