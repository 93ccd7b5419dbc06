package runner

import (
	"context"
	"errors"
	"strings"
	"sync"
	"testing"
	"time"

	"ironcurtain.dev/agent/budget"
	"ironcurtain.dev/agent/internal/mcptest"
	"ironcurtain.dev/agent/mcpclient"
	"ironcurtain.dev/agent/model"
	"ironcurtain.dev/agent/sandbox"
)

const token = "agent-token-0123456789abcdef"

func replay(t *testing.T, src string) *model.Replay {
	t.Helper()
	r, err := model.ParseTranscript([]byte(src))
	if err != nil {
		t.Fatal(err)
	}
	return r
}

// gateway starts a fake gateway with a read tool, a write tool that policy
// denies outside /workspace, and a move tool that escalates.
func gateway(t *testing.T, approve bool) (*mcptest.Server, *mcpclient.Client, *[]mcpclient.Escalation) {
	t.Helper()
	decide := make(chan bool, 1)
	decide <- approve
	srv := mcptest.Start(token,
		mcptest.Tool{Name: "filesystem__read_text_file", Schema: `{"type":"object","properties":{"path":{"type":"string"}},"required":["path"]}`,
			Handler: func(_ context.Context, a map[string]any) (string, bool) {
				return "contents of " + a["path"].(string), false
			}},
		mcptest.Tool{Name: "filesystem__write_file", Schema: `{"type":"object","properties":{"path":{"type":"string"},"content":{"type":"string"}},"required":["path","content"]}`,
			Handler: func(_ context.Context, a map[string]any) (string, bool) {
				if p, _ := a["path"].(string); !strings.HasPrefix(p, "/workspace/") {
					return "denied by policy (rule sandbox-containment): " + p + " is outside the sandbox", true
				}
				return "wrote", false
			}},
		mcptest.Tool{Name: "filesystem__move_file", Escalation: &mcptest.Escalation{ID: "esc-1", Reason: "deletes need approval", Decision: decide}},
	)
	t.Cleanup(srv.Close)
	var mu sync.Mutex
	var seen []mcpclient.Escalation
	c, err := mcpclient.Connect(context.Background(), mcpclient.Config{URL: srv.URL, Token: token, OnEscalation: func(e mcpclient.Escalation) {
		mu.Lock()
		seen = append(seen, e)
		mu.Unlock()
	}})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = c.Close() })
	return srv, c, &seen
}

const fullTranscript = `
steps:
  - say: reading
    code: |
      return filesystem.read_text_file({path: "/workspace/README.md"})
  - expect: {status: ok, contains: ["contents of /workspace/README.md"]}
    code: |
      filesystem.write_file({path: "/workspace/out.txt", content: "x"});
      try {
        filesystem.write_file({path: "/etc/passwd", content: "x"});
      } catch (e: any) {
        console.log(e.message);
      }
      return "ok";
  - expect: {status: ok, contains: ["was not performed: denied by policy (rule sandbox-containment)"]}
    code: |
      try { filesystem.move_file({source: "/workspace/out.txt", destination: "/workspace/trash"}); return "moved" }
      catch (e: any) { return e.message }
  - expect: {status: ok, contains: ["escalation esc-1"]}
    final: all done
`

func TestRunAgainstGateway(t *testing.T) {
	tests := []struct {
		name    string
		approve bool
		want    string
	}{
		{name: "escalation approved", approve: true},
		{name: "escalation denied", approve: false, want: "needed human approval (escalation esc-1) and was"},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			srv, client, _ := gateway(t, tc.approve)
			tools, err := client.Tools(context.Background())
			if err != nil {
				t.Fatal(err)
			}
			var events []Event
			src := fullTranscript
			if tc.approve {
				src = strings.Replace(src, `contains: ["escalation esc-1"]`, `contains: ["moved"]`, 1)
			}
			out := Run(context.Background(), Config{
				Model:    replay(t, src),
				Tools:    tools,
				Caller:   MCPCaller{Client: client},
				Observer: ObserverFunc(func(e Event) { events = append(events, e) }),
			}, "demo task")
			if out.Status != Finished || out.Answer != "all done" {
				t.Fatalf("outcome = %+v", out)
			}
			if out.Usage.Steps != 4 {
				t.Errorf("steps = %d", out.Usage.Steps)
			}
			if srv.Calls.Load() != 4 {
				t.Errorf("gateway saw %d calls, want 4", srv.Calls.Load())
			}
			codes := 0
			for _, e := range events {
				if e.Kind == EventCode {
					codes++
				}
				if e.Kind == EventResult && tc.want != "" && strings.Contains(e.Result.Value, "esc-1") && !strings.Contains(e.Result.Value, tc.want) {
					t.Errorf("escalation result = %q, want %q", e.Result.Value, tc.want)
				}
			}
			if codes != 3 {
				t.Errorf("code events = %d", codes)
			}
		})
	}
}

func TestSystemPromptDeclaresTools(t *testing.T) {
	_, client, _ := gateway(t, true)
	tools, err := client.Tools(context.Background())
	if err != nil {
		t.Fatal(err)
	}
	s, err := NewSession(Config{Model: replay(t, "steps: [{final: x}]"), Tools: tools, Caller: MCPCaller{Client: client}})
	if err != nil {
		t.Fatal(err)
	}
	p := s.SystemPrompt()
	for _, want := range []string{"declare namespace filesystem", "function read_text_file(args: {", "ToolError", "10s of script time", "execute_code"} {
		if !strings.Contains(p, want) {
			t.Errorf("system prompt lacks %q", want)
		}
	}
}

// slowModel sleeps before answering with a call, forever.
type slowModel struct{ delay time.Duration }

func (m slowModel) Name() string { return "slow" }
func (m slowModel) Complete(ctx context.Context, _ model.Request) (model.Response, error) {
	select {
	case <-time.After(m.delay):
		return model.Response{Calls: []model.ToolCall{{ID: "c", Code: "return 1"}}}, nil
	case <-ctx.Done():
		return model.Response{}, context.Cause(ctx)
	}
}

type failingModel struct{}

func (failingModel) Name() string { return "failing" }
func (failingModel) Complete(context.Context, model.Request) (model.Response, error) {
	return model.Response{}, errors.New("relay said 502")
}

type okCaller struct{}

func (okCaller) CallTool(context.Context, sandbox.Call) (sandbox.Reply, error) {
	return sandbox.Reply{Text: "ok"}, nil
}

func TestBudgetsEndTheRun(t *testing.T) {
	loop := "steps:\n" + strings.Repeat("  - code: return 1\n    usage: {input: 40, output: 10}\n", 20) + "  - final: never reached\n"
	tests := []struct {
		name       string
		model      model.Model
		limits     budget.Limits
		wantStatus Status
		wantBudget string
		wantReason string
	}{
		{name: "steps", model: replay(t, loop), limits: budget.Limits{MaxSteps: 3}, wantStatus: BudgetExhausted, wantBudget: budget.Steps, wantReason: "steps budget exhausted: used 3 steps of 3"},
		{name: "tokens", model: replay(t, loop), limits: budget.Limits{MaxTokens: 120}, wantStatus: BudgetExhausted, wantBudget: budget.Tokens, wantReason: "tokens budget exhausted: used 150 tokens of 120"},
		{name: "wall-clock", model: slowModel{delay: 50 * time.Millisecond}, limits: budget.Limits{MaxWall: 300 * time.Millisecond}, wantStatus: BudgetExhausted, wantBudget: budget.WallClock, wantReason: "wall-clock budget exhausted"},
		{name: "model failure", model: failingModel{}, wantStatus: Failed, wantReason: "asking the model: relay said 502"},
		{name: "transcript runs out", model: replay(t, "steps: [{code: return 1}]"), wantStatus: Failed, wantReason: "asks for step 2"},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			start := time.Now()
			out := Run(context.Background(), Config{Model: tc.model, Caller: okCaller{}, Budget: tc.limits}, "task")
			if out.Status != tc.wantStatus {
				t.Fatalf("status = %v (%s)", out.Status, out.Reason)
			}
			if !strings.Contains(out.Reason, tc.wantReason) {
				t.Errorf("reason = %q, want %q", out.Reason, tc.wantReason)
			}
			if tc.wantBudget != "" {
				var ex *budget.Exhausted
				if !errors.As(out.Err, &ex) || ex.Budget != tc.wantBudget {
					t.Errorf("err = %v", out.Err)
				}
			}
			if time.Since(start) > 5*time.Second {
				t.Errorf("took %v", time.Since(start))
			}
		})
	}
}

func TestChatSessionKeepsHistory(t *testing.T) {
	m := replay(t, `
steps:
  - code: return "first"
  - final: one
  - expect: {status: error, contains: ["syntax error"]}
    final: two
`)
	s, err := NewSession(Config{Model: m, Caller: okCaller{}})
	if err != nil {
		t.Fatal(err)
	}
	if o := s.Send(context.Background(), "hello"); o.Status != Finished || o.Answer != "one" {
		t.Fatalf("first = %+v", o)
	}
	// The replay derives its step from the history: the second message
	// continues the same conversation. Its expectation reads the last
	// result, which here is a user text turn, so it fails clearly.
	o := s.Send(context.Background(), "again")
	if o.Status != Failed || !strings.Contains(o.Reason, "no previous tool result") {
		t.Fatalf("second = %+v", o)
	}
	if s.Budget().Usage().Steps != 3 {
		t.Errorf("steps = %d", s.Budget().Usage().Steps)
	}
}

func TestInvalidCallIsAnsweredNotRun(t *testing.T) {
	m := &scripted{responses: []model.Response{
		{Calls: []model.ToolCall{{ID: "a", Invalid: "execute_code needs an object with a `code` string"}}},
		{Text: "gave up"},
	}}
	out := Run(context.Background(), Config{Model: m, Caller: okCaller{}}, "task")
	if out.Status != Finished {
		t.Fatalf("outcome = %+v", out)
	}
	last := m.seen[len(m.seen)-1]
	r := last.Messages[len(last.Messages)-1].Results
	if len(r) != 1 || !r[0].IsError || !strings.Contains(r[0].Content, "code") {
		t.Errorf("invalid call answered with %+v", r)
	}
}

type scripted struct {
	responses []model.Response
	seen      []model.Request
}

func (s *scripted) Name() string { return "scripted" }
func (s *scripted) Complete(_ context.Context, req model.Request) (model.Response, error) {
	s.seen = append(s.seen, req)
	r := s.responses[0]
	s.responses = s.responses[1:]
	return r, nil
}
