package sandbox

import (
	"context"
	"errors"
	"strings"
	"sync"
	"testing"
	"time"

	"ironcurtain.dev/agent/tsdecl"
)

// fakeCaller answers tool calls from a table and records them.
type fakeCaller struct {
	mu      sync.Mutex
	calls   []Call
	replies map[string]Reply
	err     error
	delay   time.Duration
}

func (f *fakeCaller) CallTool(ctx context.Context, c Call) (Reply, error) {
	f.mu.Lock()
	f.calls = append(f.calls, c)
	f.mu.Unlock()
	if f.delay > 0 {
		select {
		case <-time.After(f.delay):
		case <-ctx.Done():
			return Reply{}, ctx.Err()
		}
	}
	if f.err != nil {
		return Reply{}, f.err
	}
	if r, ok := f.replies[c.Tool]; ok {
		return r, nil
	}
	return Reply{Text: "ok " + c.Tool}, nil
}

var testFuncs = tsdecl.Generate([]tsdecl.Tool{
	{Name: "filesystem__read_text_file"},
	{Name: "filesystem__write_file"},
	{Name: "filesystem__move_file"},
	{Name: "git__status"},
	{Name: "git__log", OutputSchema: []byte(`{"type":"object"}`)},
}).Functions

func newTestSandbox(c Caller, l Limits) *Sandbox {
	if l.ScriptTime == 0 {
		l.ScriptTime = 2 * time.Second
	}
	return New(testFuncs, c, l)
}

func TestRun(t *testing.T) {
	caller := &fakeCaller{replies: map[string]Reply{
		"filesystem__read_text_file": {Text: "hello from the workspace"},
		"filesystem__write_file":     {Text: "denied by policy (rule structural-sandbox): /etc/passwd is outside the sandbox", IsError: true},
		"filesystem__move_file":      {Text: "denied by a human: not today", IsError: true, Escalation: &Escalation{ID: "esc-7", Status: "denied"}},
		"git__log":                   {Text: `{"commits":[{"hash":"abc"}]}`, Structured: map[string]any{"commits": []any{map[string]any{"hash": "abc"}}}},
	}}
	tests := []struct {
		name       string
		code       string
		wantOK     bool
		wantValue  string
		wantOutput string
		wantErr    string
		wantKind   ErrorKind
		wantLine   int
		wantCol    int
		wantCalls  int
	}{
		{name: "return value", code: "return 6 * 7", wantOK: true, wantValue: "42"},
		{name: "typescript types are erased", code: "const n: number = 2;\ninterface P { x: string }\nconst p: P = {x: 'y'};\nreturn p.x + n", wantOK: true, wantValue: "y2"},
		{name: "console output", code: "console.log('a', 1, {b: [true, null]});\nconsole.error('bad')", wantOK: true, wantOutput: "a 1 {\"b\":[true,null]}\n[error] bad\n"},
		{name: "tool call returns text", code: "return filesystem.read_text_file({path: '/workspace/a.txt'})", wantOK: true, wantValue: "hello from the workspace", wantCalls: 1},
		{name: "await works on sync stubs", code: "const s = await git.status({path: '/workspace'});\nreturn s", wantOK: true, wantValue: "ok git__status", wantCalls: 1},
		{name: "structured result is an object", code: "const l = git.log({path: '/w'});\nreturn l.commits[0].hash", wantOK: true, wantValue: "abc", wantCalls: 1},
		{
			name:   "denied call throws a catchable error saying what and why",
			code:   "try {\n  filesystem.write_file({path: '/etc/passwd', content: 'x'});\n} catch (e) {\n  return e.name + ' | ' + e.message + ' | ' + e.tool;\n}",
			wantOK: true, wantValue: `ToolError | filesystem.write_file({"content":"x","path":"/etc/passwd"}) was not performed: denied by policy (rule structural-sandbox): /etc/passwd is outside the sandbox | filesystem.write_file`, wantCalls: 1,
		},
		{
			name:   "escalated and denied call names the escalation",
			code:   "try { filesystem.move_file({source: '/workspace/a'}) } catch (e) { return e.escalationId + ' ' + e.escalationStatus + ' ' + e.message }",
			wantOK: true, wantValue: `esc-7 denied filesystem.move_file({"source":"/workspace/a"}) needed human approval (escalation esc-7) and was denied: denied by a human: not today`, wantCalls: 1,
		},
		{
			name:    "uncaught refusal fails the run at the calling line",
			code:    "const a = 1;\nfilesystem.write_file({path: '/etc/passwd', content: ''});",
			wantErr: "ToolError: filesystem.write_file", wantKind: KindRuntime, wantLine: 2, wantCol: 23, wantCalls: 1,
		},
		{name: "syntax error has a position", code: "const a = 1;\nconst b = ;\n", wantErr: "syntax error", wantKind: KindSyntax, wantLine: 2, wantCol: 11},
		{name: "type error at runtime has a position", code: "const x: any = undefined;\n\n    x.boom();", wantErr: "TypeError", wantKind: KindRuntime, wantLine: 3, wantCol: 5},
		{name: "misspelt tool", code: "git.stauts({path: '/w'})", wantErr: "TypeError", wantKind: KindRuntime, wantLine: 1},
		{name: "thrown string", code: "throw 'plain'", wantErr: "uncaught exception: plain", wantKind: KindRuntime},
		{name: "array argument refused", code: "git.status(['/w'])", wantErr: "must be an object", wantKind: KindRuntime},
		{name: "function in arguments is dropped", code: "return git.status({path: '/w', f: () => 1})", wantOK: true, wantValue: "ok git__status", wantCalls: 1},
		{name: "cyclic argument refused", code: "const a: any = {}; a.self = a; git.status(a)", wantErr: "nested deeper", wantKind: KindRuntime},
		{name: "unsettled promise", code: "await new Promise(() => {})", wantErr: "never settled", wantKind: KindUnsettled},
		{name: "import is not available", code: "import fs from 'fs';", wantKind: KindSyntax, wantErr: "syntax error"},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			caller.mu.Lock()
			caller.calls = nil
			caller.mu.Unlock()
			res := newTestSandbox(caller, Limits{}).Run(context.Background(), tc.code)
			if tc.wantOK {
				if res.Err != nil {
					t.Fatalf("unexpected error: %v", res.Err)
				}
			} else {
				if res.Err == nil {
					t.Fatalf("no error; result %+v", res)
				}
				if res.Err.Kind != tc.wantKind {
					t.Errorf("kind = %v, want %v (%v)", res.Err.Kind, tc.wantKind, res.Err)
				}
				if !strings.Contains(res.Err.Message, tc.wantErr) {
					t.Errorf("message = %q, want it to contain %q", res.Err.Message, tc.wantErr)
				}
				if tc.wantLine != 0 && res.Err.Line != tc.wantLine {
					t.Errorf("line = %d, want %d (%v)", res.Err.Line, tc.wantLine, res.Err)
				}
				if tc.wantCol != 0 && res.Err.Column != tc.wantCol {
					t.Errorf("column = %d, want %d (%v)", res.Err.Column, tc.wantCol, res.Err)
				}
			}
			if res.Value != tc.wantValue {
				t.Errorf("value = %q, want %q", res.Value, tc.wantValue)
			}
			if tc.wantOutput != "" && res.Output != tc.wantOutput {
				t.Errorf("output = %q, want %q", res.Output, tc.wantOutput)
			}
			if res.ToolCalls != tc.wantCalls {
				t.Errorf("tool calls = %d, want %d", res.ToolCalls, tc.wantCalls)
			}
		})
	}
}

func TestToolArgumentsReachTheCaller(t *testing.T) {
	caller := &fakeCaller{}
	res := newTestSandbox(caller, Limits{}).Run(context.Background(),
		"filesystem.write_file({path: '/workspace/x', content: 'hi', n: 3, f: 1.5, list: [1, 'a', undefined], nested: {ok: true, gone: undefined}, d: new Date(0)})")
	if res.Err != nil {
		t.Fatal(res.Err)
	}
	got := caller.calls[0]
	if got.Tool != "filesystem__write_file" {
		t.Errorf("tool = %q", got.Tool)
	}
	want := map[string]any{
		"path": "/workspace/x", "content": "hi", "n": int64(3), "f": 1.5,
		"list":   []any{int64(1), "a", nil},
		"nested": map[string]any{"ok": true},
		"d":      "1970-01-01T00:00:00.000Z",
	}
	if s1, s2 := toJSON(t, got.Args), toJSON(t, want); s1 != s2 {
		t.Errorf("args = %s, want %s", s1, s2)
	}
}

func TestGatewayUnreachable(t *testing.T) {
	caller := &fakeCaller{err: errors.New("connection refused")}
	res := newTestSandbox(caller, Limits{}).Run(context.Background(), "try { git.status({path: '/w'}) } catch (e) { return e.message }")
	if res.Err != nil {
		t.Fatal(res.Err)
	}
	if !strings.Contains(res.Value, "git.status could not be called: connection refused") {
		t.Errorf("value = %q", res.Value)
	}
}

func TestToolTimeIsNotScriptTime(t *testing.T) {
	// A slow tool call (an escalation waiting for a human) must not count
	// against the script-time limit.
	caller := &fakeCaller{delay: 300 * time.Millisecond}
	res := newTestSandbox(caller, Limits{ScriptTime: 200 * time.Millisecond}).Run(context.Background(), "git.status({path: '/w'}); git.status({path: '/w'}); return 'done'")
	if res.Err != nil {
		t.Fatalf("run failed: %v", res.Err)
	}
	if res.ToolTime < 600*time.Millisecond || res.ScriptTime > 200*time.Millisecond {
		t.Errorf("tool time %v, script time %v", res.ToolTime, res.ScriptTime)
	}
}

func TestReport(t *testing.T) {
	tests := []struct {
		name string
		res  Result
		want []string
	}{
		{name: "ok", res: Result{Output: "line", Value: "42", ToolCalls: 1}, want: []string{"status: ok", "tool calls: 1", "output:\nline\n", "returned:\n42"}},
		{name: "error after calls", res: Result{ToolCalls: 2, Err: &Error{Kind: KindTimeout, Message: "stopped"}}, want: []string{"status: error (timeout)", "error: stopped", "have taken effect"}},
		{name: "syntax error", res: Result{Err: &Error{Kind: KindSyntax, Message: "syntax error: x", Line: 2, Column: 3}}, want: []string{"error: syntax error: x (line 2, column 3)"}},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			got := tc.res.Report()
			for _, w := range tc.want {
				if !strings.Contains(got, w) {
					t.Errorf("report lacks %q:\n%s", w, got)
				}
			}
		})
	}
}
