package sandbox

import (
	"context"
	"encoding/json"
	"fmt"
	"regexp"
	"runtime/metrics"
	"strconv"
	"strings"
	"sync"
	"time"

	"github.com/dop251/goja"
	"github.com/dop251/goja/parser"
)

// run is the state of one Run. Everything except stop/stopErr/clock is
// used only on the script goroutine.
type run struct {
	ctx    context.Context
	vm     *goja.Runtime
	sb     *Sandbox
	caller Caller
	limits Limits

	mu      sync.Mutex
	stopped *Error
	stuck   chan struct{}
	clock   clock

	out       strings.Builder
	outBytes  int
	value     string
	toolCalls int
	toolTime  time.Duration

	// Captured before any model code runs, so the script cannot swap them.
	errorCtor goja.Value
	jsonParse goja.Callable
}

func newRun(ctx context.Context, s *Sandbox) *run {
	r := &run{ctx: ctx, sb: s, caller: s.caller, limits: s.limits, stuck: make(chan struct{})}
	r.clock.budget = s.limits.ScriptTime
	r.clock.onExpired = func() {
		r.stop(KindTimeout, fmt.Sprintf("execution stopped: the script ran for more than %s (runaway loop?)", s.limits.ScriptTime))
	}
	return r
}

// prelude removes code generation from strings: eval is deleted and every
// function constructor (reachable as Function or through .constructor of
// any function) is replaced by one that throws.
const prelude = `(function () {
  "use strict";
  var thrower = function Function() {
    throw new EvalError("code generation from strings (eval, Function) is not available in the sandbox");
  };
  var protos = [
    Object.getPrototypeOf(function () {}),
    Object.getPrototypeOf(function* () {}),
    Object.getPrototypeOf(async function () {})
  ]; // goja has no async generators (esbuild lowers them for ES2017)
  for (var i = 0; i < protos.length; i++) {
    Object.defineProperty(protos[i], "constructor", { value: thrower, writable: false, enumerable: false, configurable: false });
  }
  Object.defineProperty(thrower, "prototype", { value: protos[0], writable: false, enumerable: false, configurable: false });
  Object.defineProperty(globalThis, "Function", { value: thrower, writable: false, enumerable: false, configurable: false });
  delete globalThis.eval;
  delete globalThis.GoError; // goja's wrapper type for Go errors: not standard, not needed
})();`

var preludeProgram = goja.MustCompile("prelude.js", prelude, true)

func (r *run) setup() error {
	vm := goja.New()
	r.vm = vm
	// eval and Function are gone, but no code path may load source maps
	// from the host filesystem either (goja's default loader would).
	vm.SetParserOptions(parser.WithDisableSourceMaps)
	vm.SetMaxCallStackSize(r.limits.MaxCallStack)
	r.errorCtor = vm.Get("Error")
	parse, ok := goja.AssertFunction(vm.Get("JSON").ToObject(vm).Get("parse"))
	if !ok {
		return fmt.Errorf("capturing JSON.parse: not a function")
	}
	r.jsonParse = parse
	if _, err := vm.RunProgram(preludeProgram); err != nil {
		return fmt.Errorf("running prelude: %w", err)
	}
	console := vm.NewObject()
	for _, level := range []string{"log", "info", "debug", "warn", "error"} {
		if err := console.Set(level, r.consoleFunc(level)); err != nil {
			return fmt.Errorf("installing console.%s: %w", level, err)
		}
	}
	if err := vm.Set("console", console); err != nil {
		return fmt.Errorf("installing console: %w", err)
	}
	namespaces := map[string]*goja.Object{}
	for _, fn := range r.sb.funcs {
		ns, ok := namespaces[fn.Namespace]
		if !ok {
			ns = vm.NewObject()
			namespaces[fn.Namespace] = ns
			if err := vm.Set(fn.Namespace, ns); err != nil {
				return fmt.Errorf("installing namespace %s: %w", fn.Namespace, err)
			}
		}
		if err := ns.Set(fn.Name, r.stub(fn.Qualified(), fn.Tool, fn.Structured)); err != nil {
			return fmt.Errorf("installing %s: %w", fn.Qualified(), err)
		}
	}
	return nil
}

func (r *run) consoleFunc(level string) func(goja.FunctionCall) goja.Value {
	prefix := ""
	if level == "warn" || level == "error" {
		prefix = "[" + level + "] "
	}
	return func(call goja.FunctionCall) goja.Value {
		parts := make([]string, len(call.Arguments))
		for i, a := range call.Arguments {
			s, err := r.format(a, false)
			if err != nil {
				s = "[unprintable: " + err.Error() + "]"
			}
			parts[i] = s
		}
		line := prefix + strings.Join(parts, " ") + "\n"
		r.write(line)
		return goja.Undefined()
	}
}

// write appends console output, cutting it and stopping the script when
// the output limit is reached.
func (r *run) write(s string) {
	room := r.limits.MaxOutput - r.outBytes
	if room <= 0 {
		return
	}
	if len(s) > room {
		r.out.WriteString(cutUTF8(s, room))
		r.out.WriteString("\n[output truncated]\n")
		r.outBytes = r.limits.MaxOutput
		r.stopOutput()
		return
	}
	r.out.WriteString(s)
	r.outBytes += len(s)
}

// addOutput accounts n more bytes (the returned value); false when over.
func (r *run) addOutput(n int) bool {
	if r.outBytes+n > r.limits.MaxOutput {
		r.stopOutput()
		return false
	}
	r.outBytes += n
	return true
}

func (r *run) stopOutput() {
	r.stop(KindOutputLimit, fmt.Sprintf("execution stopped: output exceeded %d bytes (print less, or return a summary)", r.limits.MaxOutput))
}

func cutUTF8(s string, n int) string {
	if n >= len(s) {
		return s
	}
	for n > 0 && n < len(s) && s[n]&0xC0 == 0x80 {
		n--
	}
	return s[:n]
}

// stub returns the native function bound as ns.fn: it converts the
// argument object, calls the gateway, and returns the result or throws.
func (r *run) stub(qualified, tool string, structured bool) func(goja.FunctionCall) goja.Value {
	return func(call goja.FunctionCall) goja.Value {
		args, err := r.toolArgs(call.Argument(0))
		if err != nil {
			panic(r.newError("TypeError", qualified+": "+err.Error(), nil))
		}
		r.toolCalls++
		if r.toolCalls > r.limits.MaxToolCalls {
			r.stop(KindToolLimit, fmt.Sprintf("execution stopped: more than %d tool calls in one execute_code run", r.limits.MaxToolCalls))
			return goja.Undefined()
		}
		r.clock.pause()
		start := time.Now()
		reply, err := r.caller.CallTool(r.ctx, Call{Tool: tool, Args: args})
		r.toolTime += time.Since(start)
		r.clock.start()
		if se := r.stopErr(); se != nil {
			return goja.Undefined() // interrupted meanwhile: the VM stops at the next instruction
		}
		if err != nil {
			panic(r.newError("ToolError", qualified+" could not be called: "+shorten(err.Error(), 300), map[string]any{"tool": qualified}))
		}
		if reply.IsError {
			panic(r.toolError(qualified, args, reply))
		}
		if structured && reply.Structured != nil {
			raw, err := json.Marshal(reply.Structured)
			if err == nil {
				v, err := r.jsonParse(goja.Undefined(), r.vm.ToValue(string(raw)))
				if err == nil {
					return v
				}
			}
		}
		return r.vm.ToValue(reply.Text)
	}
}

// toolError builds the Error thrown for a refused or failed call: its
// message says which call, whether a human was asked, and the gateway's
// reason.
func (r *run) toolError(qualified string, args map[string]any, reply Reply) *goja.Object {
	reason := strings.TrimSpace(reply.Text)
	if reason == "" {
		reason = "no reason given"
	}
	props := map[string]any{"tool": qualified, "reason": reason}
	var msg string
	if esc := reply.Escalation; esc != nil {
		props["escalationId"] = esc.ID
		props["escalationStatus"] = esc.Status
		msg = fmt.Sprintf("%s(%s) needed human approval (escalation %s) and was %s: %s", qualified, argSummary(args), esc.ID, esc.Status, reason)
	} else {
		msg = fmt.Sprintf("%s(%s) was not performed: %s", qualified, argSummary(args), reason)
	}
	return r.newError("ToolError", shorten(msg, 2000), props)
}

func argSummary(args map[string]any) string {
	if len(args) == 0 {
		return ""
	}
	b, err := json.Marshal(args)
	if err != nil {
		return "…"
	}
	return shorten(string(b), 200)
}

func shorten(s string, n int) string {
	if len(s) <= n {
		return s
	}
	return cutUTF8(s, n) + "…"
}

// newError constructs a JavaScript Error (with a stack pointing at the
// calling line) using the constructor captured before the script ran.
func (r *run) newError(name, msg string, props map[string]any) *goja.Object {
	ctor, _ := goja.AssertConstructor(r.errorCtor)
	obj, err := ctor(nil, r.vm.ToValue(msg))
	if err != nil {
		return r.vm.NewTypeError(msg)
	}
	_ = obj.DefineDataProperty("name", r.vm.ToValue(name), goja.FLAG_TRUE, goja.FLAG_FALSE, goja.FLAG_FALSE)
	for k, v := range props {
		_ = obj.Set(k, v)
	}
	return obj
}

// toolArgs converts the stub's argument to JSON-compatible Go values.
func (r *run) toolArgs(v goja.Value) (map[string]any, error) {
	if v == nil || goja.IsUndefined(v) || goja.IsNull(v) {
		return map[string]any{}, nil
	}
	obj, ok := v.(*goja.Object)
	if !ok || obj.ClassName() == "Array" {
		return nil, fmt.Errorf("the argument must be an object of named arguments")
	}
	nodes := 0
	x, _, err := r.export(v, 0, &nodes)
	if err != nil {
		return nil, err
	}
	m, ok := x.(map[string]any)
	if !ok {
		return nil, fmt.Errorf("the argument must be an object of named arguments")
	}
	raw, err := json.Marshal(m)
	if err != nil {
		return nil, fmt.Errorf("arguments are not JSON: %w", err)
	}
	if len(raw) > r.limits.MaxArgBytes {
		return nil, fmt.Errorf("arguments are %d bytes, more than the %d allowed", len(raw), r.limits.MaxArgBytes)
	}
	return m, nil
}

// Bounds of a value converted from JavaScript.
const (
	maxExportDepth = 64
	maxExportNodes = 200_000
)

// export converts a JavaScript value to JSON-compatible Go values with
// JSON.stringify's rules (undefined, functions and symbols are skipped
// in objects and become null in arrays), bounded in depth and size.
// ok is false for values JSON would skip.
func (r *run) export(v goja.Value, depth int, nodes *int) (x any, ok bool, err error) {
	*nodes++
	if *nodes > maxExportNodes {
		return nil, false, fmt.Errorf("value has more than %d parts", maxExportNodes)
	}
	if depth > maxExportDepth {
		return nil, false, fmt.Errorf("value is nested deeper than %d levels (cyclic?)", maxExportDepth)
	}
	if v == nil || goja.IsUndefined(v) {
		return nil, false, nil
	}
	if goja.IsNull(v) {
		return nil, true, nil
	}
	obj, isObj := v.(*goja.Object)
	if !isObj {
		switch p := v.Export().(type) {
		case string, bool, int64:
			return p, true, nil
		case float64:
			if p != p || p > 1.7976931348623157e308 || p < -1.7976931348623157e308 {
				return nil, true, nil // NaN and ±Infinity become null, as in JSON
			}
			return p, true, nil
		case *goja.Symbol:
			return nil, false, nil
		default:
			return v.String(), true, nil // BigInt
		}
	}
	if _, isFn := goja.AssertFunction(v); isFn {
		return nil, false, nil
	}
	if toJSON, ok := goja.AssertFunction(obj.Get("toJSON")); ok {
		j, err := toJSON(obj)
		if err != nil {
			return nil, false, err
		}
		return r.export(j, depth+1, nodes)
	}
	switch obj.ClassName() {
	case "Array":
		n := obj.Get("length").ToInteger()
		if n > maxExportNodes {
			return nil, false, fmt.Errorf("array has more than %d elements", maxExportNodes)
		}
		out := make([]any, 0, n)
		for i := int64(0); i < n; i++ {
			el, ok, err := r.export(obj.Get(strconv.FormatInt(i, 10)), depth+1, nodes)
			if err != nil {
				return nil, false, err
			}
			if !ok {
				el = nil
			}
			out = append(out, el)
		}
		return out, true, nil
	case "Error":
		return obj.Get("name").String() + ": " + obj.Get("message").String(), true, nil
	case "String", "Number", "Boolean":
		if valueOf, ok := goja.AssertFunction(obj.Get("valueOf")); ok {
			p, err := valueOf(obj)
			if err != nil {
				return nil, false, err
			}
			if _, still := p.(*goja.Object); !still {
				return r.export(p, depth+1, nodes)
			}
		}
	}
	out := map[string]any{}
	for _, k := range obj.Keys() {
		el, ok, err := r.export(obj.Get(k), depth+1, nodes)
		if err != nil {
			return nil, false, err
		}
		if ok {
			out[k] = el
		}
	}
	return out, true, nil
}

// format renders a value for console output or as the returned value:
// strings as they are, everything else as JSON.
func (r *run) format(v goja.Value, result bool) (string, error) {
	if v == nil || goja.IsUndefined(v) {
		return "undefined", nil
	}
	if s, ok := v.Export().(string); ok && !isObject(v) {
		return s, nil
	}
	if fn, ok := v.(*goja.Object); ok {
		if _, isFn := goja.AssertFunction(v); isFn {
			return "[Function " + fn.Get("name").String() + "]", nil
		}
	}
	nodes := 0
	x, ok, err := r.export(v, 0, &nodes)
	if err != nil {
		return "", err
	}
	if !ok {
		return v.String(), nil
	}
	var b []byte
	if result {
		b, err = json.MarshalIndent(x, "", "  ")
	} else {
		b, err = json.Marshal(x)
	}
	if err != nil {
		return "", err
	}
	return string(b), nil
}

func isObject(v goja.Value) bool { _, ok := v.(*goja.Object); return ok }

// stackPosition finds the first position in the model's code in a goja
// stack trace ("at f (code.ts:3:5(12))").
var stackPosition = regexp.MustCompile(regexp.QuoteMeta(sourceName) + `:(\d+):(\d+)`)

// runtimeError describes an uncaught exception value.
func (r *run) runtimeError(v goja.Value) *Error {
	e := &Error{Kind: KindRuntime}
	obj, ok := v.(*goja.Object)
	if !ok {
		s, err := r.format(v, false)
		if err != nil {
			s = "(unprintable value)"
		}
		e.Message = "uncaught exception: " + shorten(s, 2000)
		return e
	}
	name := obj.Get("name")
	msg := obj.Get("message")
	if name == nil || goja.IsUndefined(name) || msg == nil || goja.IsUndefined(msg) {
		s, err := r.format(v, false)
		if err != nil {
			s = "(unprintable object)"
		}
		e.Message = "uncaught exception: " + shorten(s, 2000)
		return e
	}
	e.Message = shorten(name.String()+": "+msg.String(), 2000)
	if st := obj.Get("stack"); st != nil && !goja.IsUndefined(st) {
		e.Line, e.Column = positionFromStack(st.String())
	}
	return e
}

// positionFromStack returns the first position in the model's code named
// by a goja stack trace; 0, 0 when there is none. goja reports source-map
// columns 0-based.
func positionFromStack(stack string) (line, col int) {
	m := stackPosition.FindStringSubmatch(stack)
	if m == nil {
		return 0, 0
	}
	line, _ = strconv.Atoi(m[1])
	col, _ = strconv.Atoi(m[2])
	return codePosition(line, col+1)
}

// heapBytes reads the bytes of live and not-yet-swept heap objects.
func heapBytes(sample []metrics.Sample) uint64 {
	metrics.Read(sample)
	if sample[0].Value.Kind() != metrics.KindUint64 {
		return 0
	}
	return sample[0].Value.Uint64()
}

// watchHeap interrupts the script if the heap grows by more than the
// limit; the returned func stops watching.
func (r *run) watchHeap() func() {
	sample := []metrics.Sample{{Name: "/memory/classes/heap/objects:bytes"}}
	base := heapBytes(sample)
	done := make(chan struct{})
	go func() {
		t := time.NewTicker(20 * time.Millisecond)
		defer t.Stop()
		for {
			select {
			case <-done:
				return
			case <-t.C:
				if h := heapBytes(sample); h > base && h-base > r.limits.MaxHeapGrowth {
					r.stop(KindMemory, fmt.Sprintf("execution stopped: the script used more than %d MiB of memory", r.limits.MaxHeapGrowth>>20))
					return
				}
			}
		}
	}()
	var once sync.Once
	return func() { once.Do(func() { close(done) }) }
}
