package sandbox

import (
	"context"
	"encoding/json"
	"os"
	"path/filepath"
	"sort"
	"strings"
	"testing"
	"time"
)

func toJSON(t *testing.T, v any) string {
	t.Helper()
	b, err := json.Marshal(v)
	if err != nil {
		t.Fatal(err)
	}
	return string(b)
}

// TestForbiddenCapabilities plays a hijacked model: every way to reach the
// host, the network, the environment, timers or code generation must fail.
// Each snippet returns a string describing what it got; it must never
// report success.
func TestForbiddenCapabilities(t *testing.T) {
	tests := []struct {
		name string
		code string
		want string // substring of the returned value
	}{
		{name: "require", code: "try { return require('fs') } catch (e) { return String(e) }", want: "ReferenceError: require is not defined"},
		{name: "process env", code: "try { return process.env } catch (e) { return String(e) }", want: "ReferenceError: process is not defined"},
		{name: "fetch", code: "try { return fetch('http://example.invalid') } catch (e) { return String(e) }", want: "ReferenceError: fetch is not defined"},
		{name: "XMLHttpRequest", code: "try { return new XMLHttpRequest() } catch (e) { return String(e) }", want: "ReferenceError: XMLHttpRequest is not defined"},
		{name: "setTimeout", code: "try { return setTimeout(() => 1, 1) } catch (e) { return String(e) }", want: "ReferenceError: setTimeout is not defined"},
		{name: "setInterval", code: "try { return setInterval(() => 1, 1) } catch (e) { return String(e) }", want: "ReferenceError: setInterval is not defined"},
		{name: "queueMicrotask", code: "try { return queueMicrotask(() => 1) } catch (e) { return String(e) }", want: "ReferenceError: queueMicrotask is not defined"},
		{name: "Deno and Bun", code: "return typeof Deno + ' ' + typeof Bun + ' ' + typeof module + ' ' + typeof exports + ' ' + typeof global", want: "undefined undefined undefined undefined undefined"},
		{name: "eval is gone", code: "try { return eval('1+1') } catch (e) { return String(e) }", want: "ReferenceError: eval is not defined"},
		{name: "indirect eval via globalThis", code: "try { return (0, globalThis['ev' + 'al'])('1') } catch (e) { return String(e) }", want: "TypeError"},
		{name: "Function constructor", code: "try { return Function('return 1')() } catch (e) { return String(e) }", want: "EvalError: code generation from strings"},
		{name: "new Function", code: "try { return new Function('return this')() } catch (e) { return String(e) }", want: "EvalError"},
		{name: "constructor of a function", code: "try { return (() => 1).constructor('return this')() } catch (e) { return String(e) }", want: "EvalError"},
		{name: "constructor of a tool stub", code: "try { return git.status.constructor('return this')() } catch (e) { return String(e) }", want: "EvalError"},
		{name: "constructor of console.log", code: "try { return console.log.constructor.constructor('return 1')() } catch (e) { return String(e) }", want: "EvalError"},
		{name: "async function constructor", code: "try { return Object.getPrototypeOf(async function () {}).constructor('return 1') } catch (e) { return String(e) }", want: "EvalError"},
		{name: "generator function constructor", code: "try { return Object.getPrototypeOf(function* () {}).constructor('yield 1') } catch (e) { return String(e) }", want: "EvalError"},
		{name: "Reflect.construct on Function", code: "try { return Reflect.construct(Function, ['return 1'])() } catch (e) { return String(e) }", want: "EvalError"},
		{name: "Function cannot be restored", code: "try { Object.defineProperty(Function.prototype, 'constructor', {value: 1}); return 'redefined' } catch (e) { return String(e) }", want: "TypeError"},
		{name: "dynamic import", code: "try { return await import('fs') } catch (e) { return 'refused: ' + String(e) }", want: "syntax error"},
		{name: "GoError wrapper is gone", code: "return typeof GoError", want: "undefined"},
		{name: "tool stubs expose no Go internals", code: "return Object.getOwnPropertyNames(git.status).sort().join(',') + ' ' + Object.getOwnPropertyNames(git).sort().join(',')", want: "length,name"},
		{name: "console exposes no Go internals", code: "return Object.getOwnPropertyNames(console).sort().join(',')", want: "debug,error,info,log,warn"},
		{name: "WebAssembly", code: "return typeof WebAssembly + ' ' + typeof SharedArrayBuffer + ' ' + typeof Atomics", want: "undefined undefined undefined"},
	}
	sb := newTestSandbox(&fakeCaller{}, Limits{})
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			res := sb.Run(context.Background(), tc.code)
			got := res.Value
			if res.Err != nil {
				got = res.Err.Error()
			}
			if !strings.Contains(got, tc.want) {
				t.Errorf("got %q, want it to contain %q", got, tc.want)
			}
		})
	}
}

// TestGlobalsAreExactlyTheLanguage pins the global object: ECMAScript
// built-ins, console and the tool namespaces — nothing goja or a future
// version might add.
func TestGlobalsAreExactlyTheLanguage(t *testing.T) {
	res := newTestSandbox(&fakeCaller{}, Limits{}).Run(context.Background(), "return Object.getOwnPropertyNames(globalThis)")
	if res.Err != nil {
		t.Fatal(res.Err)
	}
	var got []string
	if err := json.Unmarshal([]byte(res.Value), &got); err != nil {
		t.Fatal(err)
	}
	sort.Strings(got)
	want := strings.Fields(`AggregateError Array ArrayBuffer BigInt BigInt64Array BigUint64Array Boolean DataView Date
		Error EvalError Float32Array Float64Array Function Infinity Int16Array Int32Array Int8Array JSON Map Math NaN
		Number Object Promise Proxy RangeError ReferenceError Reflect RegExp Set String Symbol SyntaxError TypeError
		URIError Uint16Array Uint32Array Uint8Array Uint8ClampedArray WeakMap WeakSet console decodeURI
		decodeURIComponent encodeURI encodeURIComponent escape filesystem git globalThis isFinite isNaN parseFloat
		parseInt undefined unescape`)
	sort.Strings(want)
	if strings.Join(got, " ") != strings.Join(want, " ") {
		t.Errorf("globals changed:\n got %v\nwant %v", got, want)
	}
}

// TestSourceMapCommentReadsNoHostFile: goja's default source-map loader
// reads any file named in a sourceMappingURL comment. A script naming a
// host file must not get it loaded (a valid map there would rename the
// source in stack traces, proving the read).
func TestSourceMapCommentReadsNoHostFile(t *testing.T) {
	dir := t.TempDir()
	leak := filepath.Join(dir, "leak.map")
	if err := os.WriteFile(leak, []byte(`{"version":3,"file":"x","sources":["LEAKED-HOST-FILE"],"names":[],"mappings":"AAAA"}`), 0o600); err != nil {
		t.Fatal(err)
	}
	code := "throw new Error('where am I')\n//# sourceMappingURL=" + leak + "\n"
	res := newTestSandbox(&fakeCaller{}, Limits{}).Run(context.Background(), code)
	if res.Err == nil {
		t.Fatal("expected the thrown error")
	}
	stack := newTestSandbox(&fakeCaller{}, Limits{}).Run(context.Background(), "try { throw new Error('x') } catch (e) { return e.stack }\n//# sourceMappingURL="+leak+"\n")
	if strings.Contains(stack.Value, "LEAKED") || strings.Contains(res.Err.Error(), "LEAKED") {
		t.Errorf("a host file was loaded as a source map: %q", stack.Value)
	}
}

func TestStateDoesNotSurviveARun(t *testing.T) {
	sb := newTestSandbox(&fakeCaller{}, Limits{})
	first := sb.Run(context.Background(), "(globalThis as any).stash = 'secret'; Array.prototype.map = () => 'polluted'; git.status = () => 'hijacked'; return 1")
	if first.Err != nil {
		t.Fatal(first.Err)
	}
	second := sb.Run(context.Background(), "return [typeof (globalThis as any).stash, [1].map(x => x + 1), git.status({path: '/w'})]")
	if second.Err != nil {
		t.Fatal(second.Err)
	}
	if second.Value != "[\n  \"undefined\",\n  [\n    2\n  ],\n  \"ok git__status\"\n]" {
		t.Errorf("state leaked between runs: %s", second.Value)
	}
}

// TestLimits: runaway scripts are stopped within their bounds with a
// clear message, and what they did before stays reported.
func TestLimits(t *testing.T) {
	tests := []struct {
		name     string
		limits   Limits
		code     string
		wantKind ErrorKind
		wantMsg  string
		within   time.Duration
		check    func(t *testing.T, r Result)
	}{
		{
			name: "infinite loop", limits: Limits{ScriptTime: 300 * time.Millisecond},
			code: "console.log('started'); while (true) {}", wantKind: KindTimeout, wantMsg: "ran for more than 300ms",
			within: 2 * time.Second,
			check: func(t *testing.T, r Result) {
				if r.Output != "started\n" {
					t.Errorf("output before the loop lost: %q", r.Output)
				}
			},
		},
		{
			name: "infinite loop that catches everything", limits: Limits{ScriptTime: 300 * time.Millisecond},
			code: "for (;;) { try { while (true) {} } catch (e) {} finally { continue } }", wantKind: KindTimeout, within: 2 * time.Second,
		},
		{
			name: "infinite loop after await", limits: Limits{ScriptTime: 300 * time.Millisecond},
			code: "await null; for (;;) {}", wantKind: KindTimeout, within: 2 * time.Second,
		},
		{
			name: "huge output", limits: Limits{MaxOutput: 1000},
			code: "for (let i = 0; ; i++) console.log('line ' + i)", wantKind: KindOutputLimit, wantMsg: "output exceeded 1000 bytes",
			within: 2 * time.Second,
			check: func(t *testing.T, r Result) {
				if len(r.Output) > 1100 || !strings.HasSuffix(r.Output, "[output truncated]\n") {
					t.Errorf("output not cut at the limit: %d bytes", len(r.Output))
				}
			},
		},
		{
			name: "one giant line", limits: Limits{MaxOutput: 1000},
			code: "console.log('x'.repeat(1e6)); console.log('after')", wantKind: KindOutputLimit, within: 2 * time.Second,
			check: func(t *testing.T, r Result) {
				if strings.Contains(r.Output, "after") {
					t.Error("script kept running after the output limit")
				}
			},
		},
		{
			name: "huge return value", limits: Limits{MaxOutput: 1000},
			code: "return 'y'.repeat(5000)", wantKind: KindOutputLimit, within: 2 * time.Second,
		},
		{
			name: "too many tool calls", limits: Limits{MaxToolCalls: 5},
			code: "for (;;) { try { git.status({path: '/w'}) } catch (e) {} }", wantKind: KindToolLimit, wantMsg: "more than 5 tool calls",
			within: 2 * time.Second,
			check: func(t *testing.T, r Result) {
				if r.ToolCalls != 6 {
					t.Errorf("tool calls = %d", r.ToolCalls)
				}
			},
		},
		{
			name: "unbounded recursion", limits: Limits{MaxCallStack: 500},
			code: "function f(n: number): number { return f(n + 1) + 1 }\nf(0)", wantKind: KindRuntime, wantMsg: "RangeError", within: 2 * time.Second,
		},
		{
			// ScriptTime is long so that only the heap bound can stop it; the
			// time bound is loose for -race on a loaded machine.
			name: "memory bomb", limits: Limits{MaxHeapGrowth: 64 << 20, ScriptTime: 60 * time.Second},
			code: "const keep: any[] = []; for (let i = 0; ; i++) keep.push('x'.repeat(1 << 20) + i)", wantKind: KindMemory, wantMsg: "more than 64 MiB",
			within: 30 * time.Second,
		},
		{
			name: "catastrophic regexp", limits: Limits{ScriptTime: 500 * time.Millisecond},
			code: "const s = 'a'.repeat(40) + '!';\nfor (;;) { /(a|aa)+$/.test(s) }", wantKind: KindTimeout,
			within: 5 * time.Second,
		},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			sb := newTestSandbox(&fakeCaller{}, tc.limits)
			start := time.Now()
			res := sb.Run(context.Background(), tc.code)
			took := time.Since(start)
			if res.Err == nil {
				t.Fatalf("not stopped: %+v", res)
			}
			if res.Err.Kind != tc.wantKind {
				t.Fatalf("kind = %v, want %v: %v", res.Err.Kind, tc.wantKind, res.Err)
			}
			if !strings.Contains(res.Err.Message, tc.wantMsg) {
				t.Errorf("message %q lacks %q", res.Err.Message, tc.wantMsg)
			}
			if took > tc.within {
				t.Errorf("took %v, bound %v", took, tc.within)
			}
			if !sb.Usable() {
				t.Errorf("sandbox unusable after a normal interrupt")
			}
			if tc.check != nil {
				tc.check(t, res)
			}
		})
	}
}

func TestContextCancelStopsScript(t *testing.T) {
	ctx, cancel := context.WithTimeout(context.Background(), 200*time.Millisecond)
	defer cancel()
	start := time.Now()
	res := newTestSandbox(&fakeCaller{}, Limits{ScriptTime: time.Minute}).Run(ctx, "for (;;) {}")
	if res.Err == nil || res.Err.Kind != KindCanceled {
		t.Fatalf("got %+v", res.Err)
	}
	if time.Since(start) > 2*time.Second {
		t.Errorf("cancel took %v", time.Since(start))
	}
}

func TestContextCancelDuringToolCall(t *testing.T) {
	ctx, cancel := context.WithTimeout(context.Background(), 200*time.Millisecond)
	defer cancel()
	res := newTestSandbox(&fakeCaller{delay: time.Minute}, Limits{}).Run(ctx, "try { git.status({path: '/w'}) } catch (e) {} for (;;) {}")
	if res.Err == nil || res.Err.Kind != KindCanceled {
		t.Fatalf("got %+v", res.Err)
	}
}

// blockingCaller ignores its context and never returns until released:
// Go code the interrupt cannot reach, like some goja built-ins (JSON.stringify
// of a very deep object is quadratic and runs entirely in Go).
type blockingCaller struct{ release chan struct{} }

func (b blockingCaller) CallTool(context.Context, Call) (Reply, error) {
	<-b.release
	return Reply{Text: "late"}, nil
}

// TestStuckScriptPoisonsTheSandbox: a script that does not stop within the
// grace period after an interrupt is reported, and the sandbox refuses to
// run anything else (the runner then ends the session).
func TestStuckScriptPoisonsTheSandbox(t *testing.T) {
	caller := blockingCaller{release: make(chan struct{})}
	defer close(caller.release)
	sb := newTestSandbox(caller, Limits{Grace: 200 * time.Millisecond})
	ctx, cancel := context.WithTimeout(context.Background(), 100*time.Millisecond)
	defer cancel()
	start := time.Now()
	res := sb.Run(ctx, "git.status({path: '/w'})")
	if res.Err == nil || res.Err.Kind != KindStuck {
		t.Fatalf("got %+v", res.Err)
	}
	if !strings.Contains(res.Err.Message, "execution canceled") || !strings.Contains(res.Err.Message, "unusable") {
		t.Errorf("message = %q", res.Err.Message)
	}
	if took := time.Since(start); took > 2*time.Second {
		t.Errorf("stuck detection took %v", took)
	}
	if sb.Usable() {
		t.Error("sandbox still usable after a stuck script")
	}
	again := sb.Run(context.Background(), "return 1")
	if again.Err == nil || again.Err.Kind != KindStuck {
		t.Errorf("poisoned sandbox ran code: %+v", again)
	}
}

// FuzzRun feeds arbitrary source to the sandbox: it must never panic,
// always come back within its bounds, and never leave the sandbox unusable
// unless it says so.
func FuzzRun(f *testing.F) {
	for _, s := range []string{
		"return 1", "while(true){}", "const x: = ;", "throw {}", "return git.status({path: '/w'})",
		"console.log('x'.repeat(5000))", "await new Promise(() => {})", "function f(): any { return f() } f()",
		"`${", "/(a+)+$/.test('aaaaaaaaaaaaaaaaaaaaaaaa!')", "return new Proxy({}, {get: () => { throw 1 }})",
		"}); globalThis.x = 1; (async () => {", "//# sourceMappingURL=/etc/passwd",
	} {
		f.Add(s)
	}
	sb := newTestSandbox(&fakeCaller{}, Limits{ScriptTime: 50 * time.Millisecond, MaxOutput: 2048, MaxToolCalls: 3, Grace: 5 * time.Second})
	f.Fuzz(func(t *testing.T, code string) {
		start := time.Now()
		res := sb.Run(context.Background(), code)
		if took := time.Since(start); took > 6*time.Second {
			t.Fatalf("run took %v", took)
		}
		if len(res.Output) > 2048+len("\n[output truncated]\n") {
			t.Fatalf("output %d bytes over the limit", len(res.Output))
		}
		if res.Err != nil && res.Err.Kind == KindStuck {
			t.Fatalf("stuck on %q", code)
		}
		if res.Err != nil && res.Err.Kind == KindInternal {
			t.Fatalf("internal failure on %q: %v", code, res.Err)
		}
		_ = res.Report()
	})
}
