package scenarios

import (
	"context"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"ironcurtain.dev/gateway/policy"
)

func TestExpectationMet(t *testing.T) {
	tests := []struct {
		e    Expectation
		s    policy.Status
		want bool
	}{
		{e: ExpectAllow, s: policy.Allow, want: true},
		{e: ExpectAllow, s: policy.Escalate, want: false},
		{e: ExpectDeny, s: policy.Deny, want: true},
		{e: ExpectEscalate, s: policy.Deny, want: false},
		{e: ExpectNotAllow, s: policy.Deny, want: true},
		{e: ExpectNotAllow, s: policy.Escalate, want: true},
		{e: ExpectNotAllow, s: policy.Allow, want: false},
		{e: "bogus", s: policy.Deny, want: false},
	}
	for _, tt := range tests {
		t.Run(string(tt.e)+"/"+tt.s.String(), func(t *testing.T) {
			if got := tt.e.Met(tt.s); got != tt.want {
				t.Errorf("Met = %v, want %v", got, tt.want)
			}
		})
	}
}

func sc(desc, tool string, args map[string]any, src Source) Scenario {
	return Scenario{Description: desc, Request: Request{ServerName: "fs", ToolName: tool, Arguments: args}, ExpectedDecision: ExpectDeny, Source: src}
}

func TestMerge(t *testing.T) {
	base := []Scenario{sc("read", "read", map[string]any{"p": "/a"}, Handwritten)}
	got := Merge(base,
		sc("read again", "read", map[string]any{"p": "/a"}, Generated), // same call: dropped
		sc("read", "read", map[string]any{"p": "/b"}, Generated),       // same name: renamed
		sc("read", "read", map[string]any{"p": "/c"}, Generated),
	)
	var names []string
	for _, s := range got {
		names = append(names, s.Description)
	}
	if strings.Join(names, "|") != "read|read (2)|read (3)" {
		t.Errorf("merged = %v", names)
	}
	if got[0].Source != Handwritten {
		t.Error("the base scenario must win")
	}
}

func TestCorrectNeverTouchesGroundTruth(t *testing.T) {
	list := []Scenario{
		sc("hand", "w", nil, Handwritten),
		sc("inv", "w", nil, Invariant),
		sc("gen", "w", nil, Generated),
	}
	out, refused := Correct(list, []Correction{
		{Description: "hand", Decision: ExpectAllow},
		{Description: "inv", Decision: ExpectAllow},
		{Description: "gen", Decision: ExpectEscalate, Reasoning: "fixed"},
		{Description: "missing", Decision: ExpectAllow},
	})
	if out[0].ExpectedDecision != ExpectDeny || out[1].ExpectedDecision != ExpectDeny {
		t.Errorf("ground truth changed: %+v", out[:2])
	}
	if out[2].ExpectedDecision != ExpectEscalate || out[2].Reasoning != "fixed" {
		t.Errorf("generated not corrected: %+v", out[2])
	}
	if len(refused) != 2 {
		t.Errorf("refused = %+v", refused)
	}
	if list[2].ExpectedDecision != ExpectDeny {
		t.Error("Correct modified its input")
	}
}

func TestParse(t *testing.T) {
	tests := []struct {
		name, body, wantErr string
	}{
		{name: "ok", body: `{"scenarios":[{"description":"d","request":{"serverName":"s","toolName":"t","arguments":{}},"expectedDecision":"not-allow","reasoning":"r","source":"handwritten"}]}`},
		{name: "bad decision", body: `{"scenarios":[{"description":"d","request":{"serverName":"s","toolName":"t"},"expectedDecision":"maybe","source":"generated"}]}`, wantErr: "scenarios[0]: expectedDecision"},
		{name: "bad source", body: `{"scenarios":[{"description":"d","request":{"serverName":"s","toolName":"t"},"expectedDecision":"deny","source":"llm"}]}`, wantErr: "source"},
		{name: "empty description", body: `{"scenarios":[{"description":" ","request":{"serverName":"s","toolName":"t"},"expectedDecision":"deny","source":"generated"}]}`, wantErr: "description"},
		{name: "no tool", body: `{"scenarios":[{"description":"d","request":{"serverName":"s"},"expectedDecision":"deny","source":"generated"}]}`, wantErr: "toolName"},
		{name: "not json", body: `{`, wantErr: "f.json"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			_, err := Parse("f.json", []byte(tt.body))
			if tt.wantErr == "" && err != nil || tt.wantErr != "" && (err == nil || !strings.Contains(err.Error(), tt.wantErr)) {
				t.Fatalf("err = %v, want %q", err, tt.wantErr)
			}
		})
	}
}

func FuzzParse(f *testing.F) {
	f.Add([]byte(`{"scenarios":[{"description":"d","request":{"serverName":"s","toolName":"t","arguments":{"a":[1,{"b":null}]}},"expectedDecision":"deny","reasoning":"r","source":"generated"}]}`))
	f.Add([]byte(`{"generatedAt":"x","scenarios":null}`))
	f.Fuzz(func(t *testing.T, b []byte) {
		file, err := Parse("f", b)
		if err != nil {
			return
		}
		for _, s := range file.Scenarios {
			if !s.ExpectedDecision.Valid() || s.Request.ToolName == "" {
				t.Fatalf("Parse accepted an invalid scenario: %+v", s)
			}
			_ = s.Request.Key()
		}
	})
}

func TestLoadHandwrittenExpandsPlaceholders(t *testing.T) {
	p := filepath.Join(t.TempDir(), "hw.json")
	body := `{"scenarios":[{"description":"d","request":{"serverName":"fs","toolName":"read","arguments":{"paths":["${SANDBOX}/a","${HOME}/b",{"x":"${SANDBOX}"}],"n":1}},"expectedDecision":"allow","reasoning":"r","source":"generated"}]}`
	if err := os.WriteFile(p, []byte(body), 0o600); err != nil {
		t.Fatal(err)
	}
	list, err := LoadHandwritten(p, "/ws", "/home/u")
	if err != nil {
		t.Fatal(err)
	}
	got := list[0]
	if got.Source != Handwritten {
		t.Errorf("source = %s; an operator's file is ground truth", got.Source)
	}
	paths := got.Request.Arguments["paths"].([]any)
	if paths[0] != "/ws/a" || paths[1] != "/home/u/b" || paths[2].(map[string]any)["x"] != "/ws" || got.Request.Arguments["n"] != 1.0 {
		t.Errorf("arguments = %v", got.Request.Arguments)
	}
	if _, err := LoadHandwritten(filepath.Join(t.TempDir(), "missing.json"), "/ws", "/h"); err == nil {
		t.Error("a missing file must be an error")
	}
}

// TestEvaluatorTranslate moves sandbox paths into the scratch sandbox at
// path boundaries only: /workspace-evil is not inside /workspace.
func TestEvaluatorTranslate(t *testing.T) {
	ev := Evaluator{Logical: "/workspace", Actual: "/tmp/scratch"}
	in := map[string]any{
		"a": "/workspace",
		"b": "/workspace/src/x.go",
		"c": "/workspace-evil/x",
		"d": []any{"/workspace/y", "relative", 3.0},
		"e": map[string]any{"f": "/workspace/z"},
		"g": "/other/workspace/q",
	}
	got := ev.translate(in).(map[string]any)
	want := map[string]any{"a": "/tmp/scratch", "b": "/tmp/scratch/src/x.go", "c": "/workspace-evil/x", "g": "/other/workspace/q"}
	for k, v := range want {
		if got[k] != v {
			t.Errorf("%s = %v, want %v", k, got[k], v)
		}
	}
	if d := got["d"].([]any); d[0] != "/tmp/scratch/y" || d[1] != "relative" {
		t.Errorf("d = %v", d)
	}
	if got["e"].(map[string]any)["f"] != "/tmp/scratch/z" {
		t.Errorf("e = %v", got["e"])
	}
	if in["b"] != "/workspace/src/x.go" {
		t.Error("translate modified its input")
	}
	_ = context.Background()
}
