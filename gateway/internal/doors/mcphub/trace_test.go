package mcphub

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"log/slog"
	"strings"
	"testing"

	sdktrace "go.opentelemetry.io/otel/sdk/trace"
	"go.opentelemetry.io/otel/sdk/trace/tracetest"

	"ironcurtain.dev/gateway/internal/escalation"
	"ironcurtain.dev/gateway/internal/gate"
	"ironcurtain.dev/gateway/internal/servers"
	"ironcurtain.dev/gateway/internal/session"
	"ironcurtain.dev/gateway/internal/tracing"
	"ironcurtain.dev/gateway/policy"
)

// tracedFixture is a hub whose spans go to an in-memory exporter.
type tracedFixture struct {
	*pipelineFixture
	exp *tracetest.InMemoryExporter
}

func newTracedFixture(t *testing.T, log ...*slog.Logger) *tracedFixture {
	t.Helper()
	f := newPipelineFixture(t, Config{}, false)
	exp := tracetest.NewInMemoryExporter()
	tp := sdktrace.NewTracerProvider(sdktrace.WithSyncer(exp), sdktrace.WithSampler(sdktrace.AlwaysSample()))
	t.Cleanup(func() { _ = tp.Shutdown(context.Background()) })
	var logger *slog.Logger
	if len(log) > 0 {
		logger = log[0]
	}
	var err error
	f.hub, err = New(Config{}, Deps{
		Servers: []servers.Server{f.srv}, Policy: f.pol, Escalator: f.esc, Audit: f.sink,
		Auth: fakeAuth{}, NewID: seqIDs(), Tracer: tp.Tracer(tracerScope), Logger: logger,
	})
	if err != nil {
		t.Fatal(err)
	}
	return &tracedFixture{pipelineFixture: f, exp: exp}
}

// tree renders the exported spans as "parent>child" edges and checks they
// all belong to one trace whose root is the tool-call span.
func (f *tracedFixture) tree(t *testing.T) (root tracetest.SpanStub, edges []string, byName map[string]tracetest.SpanStub) {
	t.Helper()
	spans := f.exp.GetSpans()
	byName = map[string]tracetest.SpanStub{}
	names := map[string]string{} // span id → name
	for _, s := range spans {
		if _, dup := byName[s.Name]; dup {
			t.Fatalf("two %q spans in one call", s.Name)
		}
		byName[s.Name] = s
		names[s.SpanContext.SpanID().String()] = s.Name
	}
	root, ok := byName[spanCall]
	if !ok {
		t.Fatalf("no %s span among %d", spanCall, len(spans))
	}
	if root.Parent.IsValid() {
		t.Fatalf("the tool-call span has a parent: %v", root.Parent)
	}
	for _, s := range spans {
		if s.SpanContext.TraceID() != root.SpanContext.TraceID() {
			t.Fatalf("span %s in another trace", s.Name)
		}
		if s.Name != spanCall {
			edges = append(edges, names[s.Parent.SpanID().String()]+">"+s.Name)
		}
	}
	return root, edges, byName
}

func attr(s tracetest.SpanStub, key string) string {
	for _, a := range s.Attributes {
		if string(a.Key) == key {
			return a.Value.Emit()
		}
	}
	return ""
}

func sameSet(t *testing.T, got, want []string) {
	t.Helper()
	g := strings.Join(sortedCopy(got), ",")
	w := strings.Join(sortedCopy(want), ",")
	if g != w {
		t.Fatalf("span edges = %s, want %s", g, w)
	}
}

func sortedCopy(s []string) []string {
	c := append([]string(nil), s...)
	for i := range c {
		for j := i + 1; j < len(c); j++ {
			if c[j] < c[i] {
				c[i], c[j] = c[j], c[i]
			}
		}
	}
	return c
}

func TestTraceSpanTrees(t *testing.T) {
	sess := session.Session{ID: "s1"}
	canonical := map[string]any{"path": "/sandbox/notes.txt"}
	tests := []struct {
		name        string
		tool        string
		eval        policy.Evaluation
		escalation  escalation.Result
		wantEdges   []string
		wantAttrs   map[string]string // on the tool-call span
		wantWait    string            // escalation status on the wait span
		wantRootErr bool
	}{
		{
			name: "allowed", tool: "files__read", eval: allow("allow-reads", canonical),
			wantEdges: []string{"tool_call>policy.evaluate", "tool_call>audit.decision", "tool_call>tool.execute", "tool_call>audit.outcome"},
			wantAttrs: map[string]string{"ironcurtain.decision": "allow", "ironcurtain.rule": "allow-reads", "ironcurtain.outcome": "ok", "ironcurtain.server": "files", "ironcurtain.tool": "read", "ironcurtain.session_id": "s1", "ironcurtain.call_id": "id-1"},
		},
		{
			name: "denied", tool: "files__write",
			eval:      policy.Evaluation{Decision: policy.Decision{Status: policy.Deny, Rule: "no-writes", Reason: "writes are refused"}},
			wantEdges: []string{"tool_call>policy.evaluate", "tool_call>audit.decision", "tool_call>audit.outcome"},
			wantAttrs: map[string]string{"ironcurtain.decision": "deny", "ironcurtain.rule": "no-writes", "ironcurtain.outcome": "denied"},
		},
		{
			name: "escalated and approved", tool: "files__delete",
			eval:       policy.Evaluation{Decision: policy.Decision{Status: policy.Escalate, Rule: "ask-deletes", Reason: "needs a human"}, Transport: canonical, Policy: canonical},
			escalation: escalation.Result{Approved: true, Status: "approved", Reason: "fine by me"},
			wantEdges:  []string{"tool_call>policy.evaluate", "tool_call>audit.decision", "tool_call>escalation.wait", "tool_call>tool.execute", "tool_call>audit.outcome"},
			wantAttrs:  map[string]string{"ironcurtain.decision": "escalate", "ironcurtain.rule": "ask-deletes", "ironcurtain.outcome": "ok"},
			wantWait:   "approved",
		},
		{
			name: "escalated and denied", tool: "files__delete",
			eval:       policy.Evaluation{Decision: policy.Decision{Status: policy.Escalate, Rule: "ask-deletes", Reason: "needs a human"}, Transport: canonical, Policy: canonical},
			escalation: escalation.Result{Approved: false, Status: "denied", Reason: "no"},
			wantEdges:  []string{"tool_call>policy.evaluate", "tool_call>audit.decision", "tool_call>escalation.wait", "tool_call>audit.outcome"},
			wantAttrs:  map[string]string{"ironcurtain.decision": "escalate", "ironcurtain.outcome": "denied"},
			wantWait:   "denied",
		},
		{
			name: "unknown tool", tool: "nope__x",
			wantEdges: []string{"tool_call>audit.decision", "tool_call>audit.outcome"},
			wantAttrs: map[string]string{"ironcurtain.decision": "deny", "ironcurtain.rule": policy.RuleUnknownTool, "ironcurtain.tool": "nope__x"},
		},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			f := newTracedFixture(t)
			f.pol.evals[tt.tool] = tt.eval
			f.esc.res = tt.escalation
			f.hub.Call(context.Background(), CallRequest{Session: sess, Tool: tt.tool, Args: map[string]any{"path": "notes.txt"}})
			root, edges, byName := f.tree(t)
			sameSet(t, edges, tt.wantEdges)
			for k, v := range tt.wantAttrs {
				if got := attr(root, k); got != v {
					t.Errorf("tool_call %s = %q, want %q", k, got, v)
				}
			}
			if tt.wantWait != "" {
				w := byName[spanEscalation]
				if attr(w, "ironcurtain.escalation_status") != tt.wantWait || attr(w, "ironcurtain.escalation_id") == "" {
					t.Errorf("wait span attributes %v", w.Attributes)
				}
			}
			if p := byName[spanPolicy]; p.Name != "" && attr(p, "ironcurtain.decision") != attr(root, "ironcurtain.decision") {
				t.Errorf("policy span decision %q", attr(p, "ironcurtain.decision"))
			}
			decs := f.sink.decisions()
			if len(decs) != 1 || decs[0].TraceID != root.SpanContext.TraceID().String() {
				t.Fatalf("decision record trace ids %+v, want %s", decs, root.SpanContext.TraceID())
			}
		})
	}
}

// The door's calls (git over HTTP, the GitHub relay) get the same tree.
func TestTraceDoor(t *testing.T) {
	f := newTracedFixture(t)
	f.pol.evals["files__read"] = allow("allow-reads", map[string]any{})
	res := f.hub.Gate().Do(context.Background(), gate.Call{
		Session: session.Session{ID: "s1"}, Tool: "files__read", Args: map[string]any{},
		Run: func(context.Context) (servers.Result, error) { return servers.Text("done"), nil },
	})
	if !res.Ran {
		t.Fatalf("door call did not run: %+v", res)
	}
	_, edges, _ := f.tree(t)
	sameSet(t, edges, []string{"tool_call>policy.evaluate", "tool_call>audit.decision", "tool_call>tool.execute", "tool_call>audit.outcome"})
}

// No argument value, no reason or result text, and no error text reaches a
// span: only names, ids and numbers. The agent picks the argument, the
// human the reason, the tool the error; all may carry secrets.
func TestTraceHostileArguments(t *testing.T) {
	const canary = "CANARY-sk-live-0123456789"
	f := newTracedFixture(t)
	f.pol.evals["files__read"] = policy.Evaluation{
		Decision:  policy.Decision{Status: policy.Allow, Rule: "allow-reads", Reason: "because " + canary, Detail: canary},
		Transport: map[string]any{"path": canary}, Policy: map[string]any{"path": canary},
	}
	f.srv.run = func(context.Context, string, map[string]any) (servers.Result, error) {
		return servers.Result{}, errors.New("cannot open " + canary)
	}
	f.pol.evals["files__delete"] = policy.Evaluation{
		Decision:  policy.Decision{Status: policy.Escalate, Rule: "ask", Reason: canary},
		Transport: map[string]any{"path": canary}, Policy: map[string]any{"path": canary},
	}
	f.esc.res = escalation.Result{Approved: false, Status: "denied " + canary, Reason: canary}
	args := map[string]any{"path": canary, "token": "Bearer " + canary}
	f.hub.Call(context.Background(), CallRequest{Session: session.Session{ID: "s1"}, Tool: "files__read", Args: args})
	f.hub.Call(context.Background(), CallRequest{Session: session.Session{ID: "s1"}, Tool: "files__delete", Args: args})
	f.hub.Call(context.Background(), CallRequest{Session: session.Session{ID: "s1"}, Tool: "files__" + canary + "\x1b[2J" + strings.Repeat("x", 500), Args: args})

	spans := f.exp.GetSpans()
	if len(spans) < 10 {
		t.Fatalf("only %d spans", len(spans))
	}
	for _, s := range spans {
		for _, a := range s.Attributes {
			v := a.Value.Emit()
			if len(v) > 200 || strings.ContainsAny(v, "\x1b\n") {
				t.Errorf("span %s attribute %s is not bounded: %q", s.Name, a.Key, v)
			}
			if strings.Contains(v, "sk-live") && a.Key != "ironcurtain.tool" {
				t.Errorf("span %s attribute %s carries an argument: %q", s.Name, a.Key, v)
			}
		}
		if strings.Contains(s.Status.Description, canary) {
			t.Errorf("span %s status carries the error text: %q", s.Name, s.Status.Description)
		}
		for _, e := range s.Events {
			if strings.Contains(fmt.Sprint(e.Attributes), canary) {
				t.Errorf("span %s event carries an argument", s.Name)
			}
		}
	}
}

// With no tracer given and traces off, calls carry no trace id.
func TestTraceOffByDefault(t *testing.T) {
	f := newPipelineFixture(t, Config{}, false)
	f.pol.evals["files__read"] = allow("allow-reads", map[string]any{})
	f.hub.Call(context.Background(), CallRequest{Session: session.Session{ID: "s1"}, Tool: "files__read", Args: map[string]any{}})
	if d := f.sink.decisions(); len(d) != 1 || d[0].TraceID != "" {
		t.Fatalf("decisions %+v", d)
	}
}

// A line the pipeline logs about a call carries the call's trace id.
func TestTraceIDInLogLines(t *testing.T) {
	var buf bytes.Buffer
	f := newTracedFixture(t, slog.New(tracing.LogHandler(slog.NewJSONHandler(&buf, nil))))
	f.pol.evals["files__read"] = allow("allow-reads", map[string]any{})
	f.srv.run = func(context.Context, string, map[string]any) (servers.Result, error) {
		return servers.Result{}, errors.New("disk on fire")
	}
	f.hub.Call(context.Background(), CallRequest{Session: session.Session{ID: "s1"}, Tool: "files__read", Args: map[string]any{}})
	root, _, _ := f.tree(t)
	want := `"trace_id":"` + root.SpanContext.TraceID().String() + `"`
	if !strings.Contains(buf.String(), "tool failed in the gateway") || !strings.Contains(buf.String(), want) {
		t.Fatalf("log %s lacks %s", buf.String(), want)
	}
}

// Arguments that are not an object are refused under a tool-call span too.
func TestTraceBadArguments(t *testing.T) {
	f := newTracedFixture(t)
	f.hub.Gate().RefuseBadArgs(context.Background(), session.Session{ID: "s1"}, "files__read", []any{"CANARY-array"})
	root, edges, _ := f.tree(t)
	sameSet(t, edges, []string{"tool_call>audit.decision", "tool_call>audit.outcome"})
	if attr(root, "ironcurtain.rule") != policy.RuleInvalidArgument || attr(root, "ironcurtain.outcome") != "denied" {
		t.Fatalf("attributes %v", root.Attributes)
	}
}

// The gate's tracer scope and span names (package gate, trace.go).
const (
	tracerScope    = "ironcurtain.dev/gateway/mcphub"
	spanCall       = "tool_call"
	spanPolicy     = "policy.evaluate"
	spanEscalation = "escalation.wait"
)
