package mcphub

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"strconv"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"ironcurtain.dev/gateway/internal/audit"
	"ironcurtain.dev/gateway/internal/escalation"
	"ironcurtain.dev/gateway/internal/gate"
	"ironcurtain.dev/gateway/internal/servers"
	"ironcurtain.dev/gateway/internal/session"
	"ironcurtain.dev/gateway/policy"
)

// fakePolicy decides from a table keyed by "server__tool".
type fakePolicy struct {
	mu        sync.Mutex
	evals     map[string]policy.Evaluation
	annotated map[string]bool
	requests  []policy.Request
}

func (p *fakePolicy) Annotation(server, tool string) (policy.ToolAnnotation, bool) {
	p.mu.Lock()
	defer p.mu.Unlock()
	if !p.annotated[server+gate.Separator+tool] {
		return policy.ToolAnnotation{}, false
	}
	return policy.ToolAnnotation{Server: server, Tool: tool}, true
}

func (p *fakePolicy) Evaluate(_ context.Context, r policy.Request) policy.Evaluation {
	p.mu.Lock()
	defer p.mu.Unlock()
	p.requests = append(p.requests, r)
	ev, ok := p.evals[r.Server+gate.Separator+r.Tool]
	if !ok {
		return policy.Evaluation{} // zero: deny
	}
	return ev
}

func (p *fakePolicy) setAnnotated(key string, v bool) {
	p.mu.Lock()
	defer p.mu.Unlock()
	p.annotated[key] = v
}

// fakeServer is a tool server whose tools do what the test says.
type fakeServer struct {
	name  string
	tools []servers.Tool
	// run handles a call; nil returns "ok".
	run   func(ctx context.Context, tool string, args map[string]any) (servers.Result, error)
	mu    sync.Mutex
	calls []fakeCall
}

type fakeCall struct {
	tool string
	args map[string]any
	info servers.CallInfo
}

func newFakeServer(name string, tools ...string) *fakeServer {
	s := &fakeServer{name: name}
	for _, t := range tools {
		s.tools = append(s.tools, servers.Tool{
			Name: t, Description: "the " + t + " tool",
			InputSchema: json.RawMessage(`{"type":"object","properties":{"path":{"type":"string"}}}`),
		})
	}
	return s
}

func (s *fakeServer) Name() string          { return s.name }
func (s *fakeServer) Tools() []servers.Tool { return s.tools }
func (s *fakeServer) Call(ctx context.Context, tool string, args map[string]any) (servers.Result, error) {
	ci, _ := servers.CallInfoFrom(ctx)
	s.mu.Lock()
	s.calls = append(s.calls, fakeCall{tool: tool, args: args, info: ci})
	run := s.run
	s.mu.Unlock()
	if run == nil {
		return servers.Text("ok"), nil
	}
	return run(ctx, tool, args)
}

func (s *fakeServer) callCount() int {
	s.mu.Lock()
	defer s.mu.Unlock()
	return len(s.calls)
}

// memSink keeps events; failWhen decides which Records fail.
type memSink struct {
	mu       sync.Mutex
	events   []audit.Event
	failWhen func(audit.Event) bool
}

func (s *memSink) Record(_ context.Context, e audit.Event) error {
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.failWhen != nil && s.failWhen(e) {
		return errors.New("audit store unreachable")
	}
	s.events = append(s.events, e)
	return nil
}

func (s *memSink) all() []audit.Event {
	s.mu.Lock()
	defer s.mu.Unlock()
	return append([]audit.Event(nil), s.events...)
}

// trail renders the recorded events compactly: "decision:allow",
// "decision:escalate", "outcome:ok", ...
func (s *memSink) trail() []string {
	var out []string
	for _, e := range s.all() {
		switch v := e.(type) {
		case *audit.ToolCallDecision:
			out = append(out, "decision:"+v.Decision)
		case *audit.ToolCallOutcome:
			out = append(out, "outcome:"+v.Status)
		default:
			out = append(out, fmt.Sprintf("%T", e))
		}
	}
	return out
}

func (s *memSink) decisions() []*audit.ToolCallDecision {
	var out []*audit.ToolCallDecision
	for _, e := range s.all() {
		if d, ok := e.(*audit.ToolCallDecision); ok {
			out = append(out, d)
		}
	}
	return out
}

func (s *memSink) outcomes() []*audit.ToolCallOutcome {
	var out []*audit.ToolCallOutcome
	for _, e := range s.all() {
		if o, ok := e.(*audit.ToolCallOutcome); ok {
			out = append(out, o)
		}
	}
	return out
}

// fakeEscalator answers with res/err. Before answering it checks that the
// call's escalate decision is already recorded (write-ahead).
type fakeEscalator struct {
	t       *testing.T
	sink    *memSink
	res     escalation.Result
	err     error
	wait    chan struct{} // when set, Escalate blocks until it is closed
	closing chan struct{} // when closed, a blocked Escalate returns ErrShuttingDown (as PG.Close does)
	mu      sync.Mutex
	reqs    []escalation.Request
	durable bool // the escalate decision was recorded before Escalate
}

func (e *fakeEscalator) Escalate(ctx context.Context, req escalation.Request) (escalation.Result, error) {
	e.mu.Lock()
	e.reqs = append(e.reqs, req)
	for _, d := range e.sink.decisions() {
		if d.CallID == req.CallID && d.Decision == "escalate" && d.EscalationID == req.ID && req.ID != "" {
			e.durable = true
		}
	}
	e.mu.Unlock()
	if e.wait != nil {
		select {
		case <-e.wait:
		case <-e.closing: // nil: never
			return escalation.Result{}, escalation.ErrShuttingDown
		case <-ctx.Done():
			return escalation.Result{}, ctx.Err()
		}
	}
	res := e.res
	if res.ID == "" {
		res.ID = req.ID
	}
	return res, e.err
}

func (e *fakeEscalator) requests() []escalation.Request {
	e.mu.Lock()
	defer e.mu.Unlock()
	return append([]escalation.Request(nil), e.reqs...)
}

// fakeReuser is a fakeEscalator that also finds identical calls'
// escalations: Reusable answers id, err.
type fakeReuser struct {
	*fakeEscalator
	id    string
	err   error
	asked []escalation.Request
}

func (r *fakeReuser) Reusable(_ context.Context, req escalation.Request) (string, error) {
	r.mu.Lock()
	defer r.mu.Unlock()
	r.asked = append(r.asked, req)
	return r.id, r.err
}

// fakeNotifier records notices.
type fakeNotifier struct {
	mu      sync.Mutex
	notices []gate.EscalationNotice
	waits   atomic.Int64
}

func (n *fakeNotifier) Escalation(_ context.Context, e gate.EscalationNotice) {
	n.mu.Lock()
	defer n.mu.Unlock()
	n.notices = append(n.notices, e)
}

func (n *fakeNotifier) Waiting(context.Context, gate.EscalationNotice, time.Duration) { n.waits.Add(1) }

func (n *fakeNotifier) statuses() []string {
	n.mu.Lock()
	defer n.mu.Unlock()
	var out []string
	for _, e := range n.notices {
		out = append(out, e.Status)
	}
	return out
}

// fakeAuth accepts the tokens it holds.
type fakeAuth map[string]session.Session

func (a fakeAuth) Authenticate(_ context.Context, tok string) (session.Session, error) {
	s, ok := a[tok]
	if !ok {
		return session.Session{}, session.ErrUnknownToken
	}
	return s, nil
}

// seqIDs returns deterministic ids: id-1, id-2, ...
func seqIDs() func() string {
	var n atomic.Int64
	return func() string { return "id-" + strconv.FormatInt(n.Add(1), 10) }
}

func allow(rule string, transport map[string]any) policy.Evaluation {
	return policy.Evaluation{Decision: policy.Decision{Status: policy.Allow, Rule: rule, Reason: "allowed"}, Transport: transport, Policy: transport}
}

// firstText is the first text of r, cut to n bytes.
func firstText(r servers.Result, n int) string {
	for _, c := range r.Content {
		if c.Type == "text" {
			return gate.CutText(c.Text, n)
		}
	}
	return ""
}
