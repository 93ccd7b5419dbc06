// Package sandbox runs the model's TypeScript in code mode: esbuild
// transpiles it, goja runs it, and the only things the script can reach are
// `console` and one synchronous stub per gateway tool
// (`git.status({path: "/workspace/repo"})`), which call the gateway through
// a Caller. There is no require, no timers, no filesystem, network or
// environment, and no code generation from strings (eval and the Function
// constructors throw). Every run is bounded in script time (interrupt),
// tool calls, output size, call-stack depth and heap growth.
//
// A fresh JavaScript runtime is made for every Run: nothing a script
// defines survives into the next one.
package sandbox

import (
	"context"
	"errors"
	"fmt"
	"sync"
	"sync/atomic"
	"time"

	"github.com/dlclark/regexp2/v2"
	"github.com/dop251/goja"
	"github.com/dop251/goja/parser"

	"ironcurtain.dev/agent/tsdecl"
)

// Default limits (Limits zero values mean these).
const (
	DefaultScriptTime    = 10 * time.Second
	DefaultMaxToolCalls  = 50
	DefaultMaxOutput     = 64 << 10
	DefaultMaxCallStack  = 2048
	DefaultMaxHeapGrowth = 512 << 20
	DefaultMaxArgBytes   = 1 << 20
	DefaultGrace         = 2 * time.Second
	// regexpTimeout bounds one regular-expression match: goja's
	// backtracking engine runs in Go, where an interrupt cannot reach it.
	regexpTimeout = time.Second
)

func init() {
	// Read by regexp2 when a pattern is compiled; goja treats a timed-out
	// match as "no match". This is the only process-wide setting we change.
	regexp2.DefaultMatchTimeout = regexpTimeout
}

// Limits bound one Run.
type Limits struct {
	// ScriptTime is how long the script itself may run, not counting time
	// spent waiting for tool calls (an escalated call may wait for a human).
	ScriptTime time.Duration
	// MaxToolCalls is the number of tool calls one run may make.
	MaxToolCalls int
	// MaxOutput is the number of bytes of console output plus the returned
	// value one run may produce.
	MaxOutput int
	// MaxCallStack is the JavaScript call-stack depth.
	MaxCallStack int
	// MaxHeapGrowth is how far the process heap may grow during the run.
	// It is measured process-wide, so it is approximate.
	MaxHeapGrowth uint64
	// MaxArgBytes bounds the JSON size of one tool call's arguments.
	MaxArgBytes int
	// Grace is how long an interrupted script may take to stop. Some
	// built-ins run in Go and cannot be interrupted; a script still running
	// after Grace makes the Sandbox unusable (ErrStuck).
	Grace time.Duration
}

func (l Limits) withDefaults() Limits {
	if l.ScriptTime <= 0 {
		l.ScriptTime = DefaultScriptTime
	}
	if l.MaxToolCalls <= 0 {
		l.MaxToolCalls = DefaultMaxToolCalls
	}
	if l.MaxOutput <= 0 {
		l.MaxOutput = DefaultMaxOutput
	}
	if l.MaxCallStack <= 0 {
		l.MaxCallStack = DefaultMaxCallStack
	}
	if l.MaxHeapGrowth == 0 {
		l.MaxHeapGrowth = DefaultMaxHeapGrowth
	}
	if l.MaxArgBytes <= 0 {
		l.MaxArgBytes = DefaultMaxArgBytes
	}
	if l.Grace <= 0 {
		l.Grace = DefaultGrace
	}
	return l
}

// Call is one tool call made by a script.
type Call struct {
	Tool string         // MCP tool name ("git__status")
	Args map[string]any // JSON-compatible arguments
}

// Escalation tells that a call waited for a human decision.
type Escalation struct {
	ID     string
	Status string // approved | denied | expired | pending
	Reason string
}

// Reply is a tool's answer.
type Reply struct {
	Text       string // text content, items joined by newlines
	Structured any    // structured content (used when the tool declares an output schema)
	IsError    bool   // the gateway refused the call or the tool failed; Text says why
	Escalation *Escalation
}

// Caller makes tool calls for scripts. Calls from one run are sequential.
type Caller interface {
	CallTool(ctx context.Context, call Call) (Reply, error)
}

// ErrStuck is returned (as Error.Kind KindStuck) once a script did not stop
// within the grace period after an interrupt; the Sandbox refuses to run
// anything after that.
var ErrStuck = errors.New("sandbox: a script did not stop after being interrupted")

// Sandbox runs scripts against one set of tool bindings.
type Sandbox struct {
	funcs    []tsdecl.Function
	caller   Caller
	limits   Limits
	poisoned atomic.Bool
}

// New returns a Sandbox exposing funcs (from tsdecl.Generate) backed by caller.
func New(funcs []tsdecl.Function, caller Caller, limits Limits) *Sandbox {
	return &Sandbox{funcs: append([]tsdecl.Function(nil), funcs...), caller: caller, limits: limits.withDefaults()}
}

// Limits returns the limits in force (defaults filled in).
func (s *Sandbox) Limits() Limits { return s.limits }

// Usable reports whether the sandbox can still run scripts (see ErrStuck).
func (s *Sandbox) Usable() bool { return !s.poisoned.Load() }

// Run transpiles and runs code. The result always describes what happened;
// failures are in Result.Err, never panics.
func (s *Sandbox) Run(ctx context.Context, code string) Result {
	if s.poisoned.Load() {
		return Result{Err: &Error{Kind: KindStuck, Message: "the sandbox is unusable: an earlier script did not stop after being interrupted"}}
	}
	prog, serr := transpile(code)
	if serr != nil {
		return Result{Err: serr}
	}
	ast, err := goja.Parse(sourceName+".js", prog.js, parser.WithSourceMapLoader(refuseSourceMap))
	if err != nil {
		return Result{Err: &Error{Kind: KindSyntax, Message: "syntax error: " + err.Error()}}
	}
	compiled, err := goja.CompileAST(ast, false)
	if err != nil {
		return Result{Err: &Error{Kind: KindSyntax, Message: "syntax error: " + err.Error()}}
	}
	r := newRun(ctx, s)
	if err := r.setup(); err != nil {
		return Result{Err: &Error{Kind: KindInternal, Message: "preparing the sandbox: " + err.Error()}}
	}
	res := r.execute(compiled)
	if res.Err != nil && res.Err.Kind == KindStuck {
		s.poisoned.Store(true)
	}
	return res
}

// refuseSourceMap keeps goja from reading source maps named by the code
// (its default loader reads files from the host).
func refuseSourceMap(string) ([]byte, error) {
	return nil, errors.New("source maps are not loaded in the sandbox")
}

// outcome is what the script goroutine hands back.
type outcome struct {
	value goja.Value
	err   error
	panic any
}

func (r *run) execute(p *goja.Program) Result {
	done := make(chan outcome, 1)
	r.clock.start()
	stopHeap := r.watchHeap()
	cancelCtx := context.AfterFunc(r.ctx, func() {
		r.stop(KindCanceled, "execution canceled: "+context.Cause(r.ctx).Error())
	})
	go func() {
		var o outcome
		defer func() {
			if x := recover(); x != nil {
				o.panic = x
			}
			done <- o
		}()
		v, err := r.vm.RunProgram(p)
		o.value, o.err = v, err
		if err == nil {
			o.value, o.err = r.settle(v)
		}
	}()
	var o outcome
	select {
	case o = <-done:
	case <-r.stuck:
		cancelCtx()
		stopHeap()
		// The script goroutine still runs and owns the run's fields: report
		// only what is safe to read.
		return Result{
			Err:        &Error{Kind: KindStuck, Message: fmt.Sprintf("%s; the script did not stop within %s of being interrupted and the sandbox is now unusable", r.stopErr().Message, r.limits.Grace)},
			ScriptTime: r.clock.used(),
		}
	}
	r.clock.pause()
	cancelCtx()
	stopHeap()
	return r.finish(o)
}

func (r *run) finish(o outcome) Result {
	if se := r.stopErr(); se != nil {
		// Interrupted: whatever the script returned does not count.
		return r.result(se)
	}
	if o.panic != nil {
		return r.result(&Error{Kind: KindInternal, Message: fmt.Sprintf("sandbox failure: %v", o.panic)})
	}
	var ie *goja.InterruptedError
	if errors.As(o.err, &ie) {
		if e, ok := ie.Value().(*Error); ok {
			return r.result(e)
		}
		return r.result(&Error{Kind: KindInternal, Message: "interrupted"})
	}
	var so *goja.StackOverflowError
	if errors.As(o.err, &so) {
		e := &Error{Kind: KindRuntime, Message: fmt.Sprintf("RangeError: maximum call stack size exceeded (%d frames; unbounded recursion?)", r.limits.MaxCallStack)}
		e.Line, e.Column = positionFromStack(so.Error())
		return r.result(e)
	}
	var ex *goja.Exception
	if errors.As(o.err, &ex) {
		return r.result(r.runtimeError(ex.Value()))
	}
	if e, ok := o.err.(*Error); ok {
		return r.result(e)
	}
	if o.err != nil {
		return r.result(&Error{Kind: KindRuntime, Message: o.err.Error()})
	}
	if o.value != nil && !goja.IsUndefined(o.value) {
		s, err := r.format(o.value, true)
		if err != nil {
			return r.result(&Error{Kind: KindRuntime, Message: "the returned value cannot be shown: " + err.Error()})
		}
		if !r.addOutput(len(s)) {
			return r.result(r.stopErr())
		}
		r.value = s
	}
	return r.result(nil)
}

// settle waits for the async wrapper's promise (goja has already run the
// job queue when RunProgram returns) and returns its value or rejection.
func (r *run) settle(v goja.Value) (goja.Value, error) {
	pr, ok := v.Export().(*goja.Promise)
	if !ok {
		return v, nil
	}
	switch pr.State() {
	case goja.PromiseStateFulfilled:
		return pr.Result(), nil
	case goja.PromiseStateRejected:
		return nil, r.runtimeError(pr.Result())
	default:
		return nil, &Error{Kind: KindUnsettled, Message: "the code awaited something that never settled (the sandbox has no timers or asynchronous I/O; tool functions are synchronous)"}
	}
}

func (r *run) result(e *Error) Result {
	return Result{
		Output:     r.out.String(),
		Value:      r.value,
		Err:        e,
		ToolCalls:  r.toolCalls,
		ScriptTime: r.clock.used(),
		ToolTime:   r.toolTime,
	}
}

// stop interrupts the script once, remembering why, and arms the grace
// timer that declares the sandbox stuck.
func (r *run) stop(kind ErrorKind, msg string) {
	r.mu.Lock()
	defer r.mu.Unlock()
	if r.stopped != nil {
		return
	}
	r.stopped = &Error{Kind: kind, Message: msg}
	r.vm.Interrupt(r.stopped)
	time.AfterFunc(r.limits.Grace, func() { close(r.stuck) })
}

func (r *run) stopErr() *Error {
	r.mu.Lock()
	defer r.mu.Unlock()
	return r.stopped
}

// clock measures script time, pausing while a tool call is in flight, and
// interrupts the script when the budget is spent.
type clock struct {
	mu        sync.Mutex
	budget    time.Duration
	spent     time.Duration
	since     time.Time
	running   bool
	timer     *time.Timer
	onExpired func()
}

func (c *clock) start() {
	c.mu.Lock()
	defer c.mu.Unlock()
	if c.running {
		return
	}
	c.running = true
	c.since = time.Now()
	c.timer = time.AfterFunc(c.budget-c.spent, c.onExpired)
}

func (c *clock) pause() {
	c.mu.Lock()
	defer c.mu.Unlock()
	if !c.running {
		return
	}
	c.running = false
	c.timer.Stop()
	c.spent += time.Since(c.since)
}

func (c *clock) used() time.Duration {
	c.mu.Lock()
	defer c.mu.Unlock()
	if c.running {
		return c.spent + time.Since(c.since)
	}
	return c.spent
}
