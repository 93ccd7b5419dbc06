// Package runner is the agent's loop: it asks the model for the next step,
// runs each execute_code call in the code-mode sandbox (whose tool stubs
// call the gateway), feeds the results back, and stops when the model
// answers, a budget (steps, wall-clock, tokens) runs out, or something
// fails. A Session keeps the conversation for interactive use; Run is the
// one-shot form.
package runner

import (
	"context"
	"errors"
	"fmt"
	"time"

	"ironcurtain.dev/agent/budget"
	"ironcurtain.dev/agent/model"
	"ironcurtain.dev/agent/sandbox"
	"ironcurtain.dev/agent/tsdecl"
)

// DefaultMaxReplyTokens bounds one model reply.
const DefaultMaxReplyTokens = 8192

// Status is how a run ended.
type Status int

// Statuses.
const (
	Finished        Status = iota // the model gave its final answer
	BudgetExhausted               // a budget ended the run
	Failed                        // the model, the gateway or the sandbox failed
)

func (s Status) String() string {
	switch s {
	case Finished:
		return "finished"
	case BudgetExhausted:
		return "budget exhausted"
	default:
		return "failed"
	}
}

// Outcome is the end of one Send or Run.
type Outcome struct {
	Status Status
	Answer string // the model's final answer (Finished)
	Reason string // why the run stopped (BudgetExhausted, Failed)
	Err    error  // the underlying error, if any (*budget.Exhausted for budgets)
	Usage  budget.Usage
}

// EventKind says what an Event reports.
type EventKind int

// Event kinds, in the order they happen within a step.
const (
	EventModelText EventKind = iota // the model said something along with its calls
	EventCode                       // code about to run
	EventResult                     // what the code produced
)

// Event is progress reported to an Observer.
type Event struct {
	Kind   EventKind
	Step   int
	Text   string          // EventModelText
	Code   string          // EventCode
	Result *sandbox.Result // EventResult
}

// Observer receives progress events (on the runner's goroutine).
type Observer interface{ Observe(Event) }

// ObserverFunc adapts a function to Observer.
type ObserverFunc func(Event)

// Observe implements Observer.
func (f ObserverFunc) Observe(e Event) { f(e) }

// Config assembles a session.
type Config struct {
	Model          model.Model
	Tools          []tsdecl.Tool  // the gateway's tools/list
	Caller         sandbox.Caller // makes the tool calls (MCPCaller in production)
	Sandbox        sandbox.Limits
	Budget         budget.Limits
	MaxReplyTokens int64
	Observer       Observer
}

// Session is a conversation with the model over the gateway's tools.
type Session struct {
	model     model.Model
	decl      tsdecl.Declaration
	sb        *sandbox.Sandbox
	tracker   *budget.Tracker
	system    string
	maxReply  int64
	observer  Observer
	history   []model.Message
	exhausted error // a budget that ended the session
}

// NewSession prepares a session; the budgets' wall clock starts now.
func NewSession(cfg Config) (*Session, error) {
	if cfg.Model == nil {
		return nil, errors.New("starting a session: no model")
	}
	if cfg.Caller == nil {
		return nil, errors.New("starting a session: no tool caller")
	}
	decl := tsdecl.Generate(cfg.Tools)
	sb := sandbox.New(decl.Functions, cfg.Caller, cfg.Sandbox)
	s := &Session{
		model:    cfg.Model,
		decl:     decl,
		sb:       sb,
		tracker:  budget.NewTracker(cfg.Budget),
		system:   SystemPrompt(decl, sb.Limits()),
		maxReply: cfg.MaxReplyTokens,
		observer: cfg.Observer,
	}
	if s.maxReply <= 0 {
		s.maxReply = DefaultMaxReplyTokens
	}
	if s.observer == nil {
		s.observer = ObserverFunc(func(Event) {})
	}
	return s, nil
}

// Run is the one-shot form: a new session, one task.
func Run(ctx context.Context, cfg Config, task string) Outcome {
	s, err := NewSession(cfg)
	if err != nil {
		return Outcome{Status: Failed, Reason: err.Error(), Err: err}
	}
	return s.Send(ctx, task)
}

// Budget returns the session's budget tracker.
func (s *Session) Budget() *budget.Tracker { return s.tracker }

// Functions returns the tool bindings the sandbox exposes.
func (s *Session) Functions() []tsdecl.Function { return s.decl.Functions }

// SystemPrompt returns the prompt the model gets.
func (s *Session) SystemPrompt() string { return s.system }

// Send adds a user message and runs model steps until the model answers,
// a budget runs out or something fails.
func (s *Session) Send(ctx context.Context, text string) Outcome {
	if s.exhausted != nil {
		return s.outcome(BudgetExhausted, "", s.exhausted)
	}
	if !s.sb.Usable() {
		return s.outcome(Failed, "", sandbox.ErrStuck)
	}
	if deadline, ok := s.tracker.Deadline(); ok {
		var cancel context.CancelFunc
		ctx, cancel = context.WithDeadlineCause(ctx, deadline, s.tracker.WallExhausted())
		defer cancel()
	}
	s.history = append(s.history, model.Message{Role: model.User, Text: text})
	for {
		if err := s.tracker.BeginStep(); err != nil {
			return s.stopBudget(err)
		}
		step := s.tracker.Usage().Steps
		resp, err := s.model.Complete(ctx, model.Request{System: s.system, Messages: s.history, MaxTokens: s.maxReply})
		if err != nil {
			if s.wallClockHit(ctx) {
				return s.stopBudget(s.tracker.WallExhausted())
			}
			return s.outcome(Failed, "", fmt.Errorf("asking the model: %w", err))
		}
		tokenErr := s.tracker.AddUsage(resp.Usage.InputTokens, resp.Usage.OutputTokens)
		s.history = append(s.history, model.Message{Role: model.Assistant, Text: resp.Text, Calls: resp.Calls})
		if len(resp.Calls) == 0 {
			// The answer is complete even if it went over the token budget.
			if tokenErr != nil {
				s.exhausted = tokenErr
			}
			return s.outcome(Finished, resp.Text, nil)
		}
		if resp.Text != "" {
			s.observer.Observe(Event{Kind: EventModelText, Step: step, Text: resp.Text})
		}
		if tokenErr != nil {
			return s.stopBudget(tokenErr)
		}
		results := make([]model.ToolResult, 0, len(resp.Calls))
		for _, call := range resp.Calls {
			results = append(results, s.execute(ctx, step, call))
			if !s.sb.Usable() {
				s.history = append(s.history, model.Message{Role: model.User, Results: s.complete(resp.Calls, results, "not run: the sandbox failed")})
				return s.outcome(Failed, "", fmt.Errorf("running code: %w", sandbox.ErrStuck))
			}
		}
		s.history = append(s.history, model.Message{Role: model.User, Results: results})
		if s.wallClockHit(ctx) {
			return s.stopBudget(s.tracker.WallExhausted())
		}
		if ctx.Err() != nil {
			return s.outcome(Failed, "", fmt.Errorf("running: %w", context.Cause(ctx)))
		}
	}
}

// execute runs one execute_code call.
func (s *Session) execute(ctx context.Context, step int, call model.ToolCall) model.ToolResult {
	if call.Invalid != "" {
		return model.ToolResult{CallID: call.ID, Content: "error: " + call.Invalid, IsError: true}
	}
	s.observer.Observe(Event{Kind: EventCode, Step: step, Code: call.Code})
	res := s.sb.Run(ctx, call.Code)
	s.observer.Observe(Event{Kind: EventResult, Step: step, Result: &res})
	return model.ToolResult{CallID: call.ID, Content: res.Report(), IsError: res.Failed()}
}

// complete answers calls that got no result, keeping the conversation valid.
func (s *Session) complete(calls []model.ToolCall, done []model.ToolResult, why string) []model.ToolResult {
	for _, c := range calls[len(done):] {
		done = append(done, model.ToolResult{CallID: c.ID, Content: why, IsError: true})
	}
	return done
}

// stopBudget ends the session on a budget, answering any pending calls.
func (s *Session) stopBudget(err error) Outcome {
	s.exhausted = err
	if n := len(s.history); n > 0 && s.history[n-1].Role == model.Assistant && len(s.history[n-1].Calls) > 0 {
		s.history = append(s.history, model.Message{Role: model.User, Results: s.complete(s.history[n-1].Calls, nil, "not run: "+err.Error())})
	}
	return s.outcome(BudgetExhausted, "", err)
}

func (s *Session) wallClockHit(ctx context.Context) bool {
	var ex *budget.Exhausted
	return ctx.Err() != nil && errors.As(context.Cause(ctx), &ex) && ex.Budget == budget.WallClock
}

func (s *Session) outcome(st Status, answer string, err error) Outcome {
	o := Outcome{Status: st, Answer: answer, Err: err, Usage: s.tracker.Usage()}
	if err != nil {
		o.Reason = err.Error()
	}
	return o
}

// Elapsed is a convenience for callers printing usage.
func (o Outcome) Elapsed() time.Duration { return o.Usage.Elapsed }
