package mcphub

import (
	"context"
	"errors"
	"strings"
	"testing"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/client_golang/prometheus/testutil"

	"ironcurtain.dev/gateway/internal/audit"
	"ironcurtain.dev/gateway/internal/escalation"
	"ironcurtain.dev/gateway/internal/metrics"
	"ironcurtain.dev/gateway/internal/servers"
	"ironcurtain.dev/gateway/internal/session"
	"ironcurtain.dev/gateway/policy"
)

type pipelineFixture struct {
	hub      *Hub
	pol      *fakePolicy
	srv      *fakeServer
	sink     *memSink
	esc      *fakeEscalator
	reg      *prometheus.Registry
	notifier *fakeNotifier
	cfg      Config
	deps     Deps
}

func newPipelineFixture(t *testing.T, cfg Config, useDenyEscalator bool) *pipelineFixture {
	t.Helper()
	f := &pipelineFixture{
		pol: &fakePolicy{evals: map[string]policy.Evaluation{}, annotated: map[string]bool{
			"files__read": true, "files__write": true, "files__delete": true,
		}},
		srv:      newFakeServer("files", "read", "write", "delete", "secret_unannotated"),
		sink:     &memSink{},
		reg:      prometheus.NewRegistry(),
		notifier: &fakeNotifier{},
	}
	f.esc = &fakeEscalator{t: t, sink: f.sink}
	m, err := metrics.NewToolCalls(f.reg)
	if err != nil {
		t.Fatal(err)
	}
	var esc escalation.Escalator = f.esc
	if useDenyEscalator {
		esc = nil // the hub's default: escalation.Deny{}
	}
	f.cfg = cfg
	f.deps = Deps{
		Servers: []servers.Server{f.srv}, Policy: f.pol, Escalator: esc, Audit: f.sink,
		Auth: fakeAuth{}, Metrics: m, NewID: seqIDs(),
	}
	f.hub, err = New(cfg, f.deps)
	if err != nil {
		t.Fatal(err)
	}
	return f
}

// rebuild builds the fixture's hub again with changed collaborators (a
// loop guard, a clock, another escalator).
func (f *pipelineFixture) rebuild(t *testing.T, change func(d *Deps)) {
	t.Helper()
	change(&f.deps)
	h, err := New(f.cfg, f.deps)
	if err != nil {
		t.Fatal(err)
	}
	f.hub = h
}

func TestPipeline(t *testing.T) {
	sess := session.Session{ID: "s1", Name: "s1"}
	readArgs := map[string]any{"path": "notes.txt"}
	canonical := map[string]any{"path": "/sandbox/notes.txt"}
	escalate := policy.Evaluation{
		Decision:  policy.Decision{Status: policy.Escalate, Rule: "escalate-deletes", Reason: "deleting files needs a human"},
		Transport: canonical, Policy: canonical,
	}

	tests := []struct {
		name         string
		tool         string
		cfg          Config
		denyEscal    bool
		setup        func(f *pipelineFixture)
		wantError    bool
		wantText     []string // substrings of the result text
		wantAbsent   []string
		wantCalls    int
		wantTrail    []string
		wantNotices  []string
		wantApproved bool
		check        func(t *testing.T, f *pipelineFixture)
	}{
		{
			name: "allowed call reaches the server with transport args and call info",
			tool: "files__read",
			setup: func(f *pipelineFixture) {
				ev := allow("allow-reads", canonical)
				ev.Policy = map[string]any{"path": "/sandbox/notes.txt", "remote": "https://github.com/acme/app"}
				ev.Push = &policy.PushPlan{Remote: "origin"}
				f.pol.evals["files__read"] = ev
			},
			wantText:  []string{"ok"},
			wantCalls: 1,
			wantTrail: []string{"decision:allow", "outcome:ok"},
			check: func(t *testing.T, f *pipelineFixture) {
				c := f.srv.calls[0]
				if c.args["path"] != "/sandbox/notes.txt" || c.args["remote"] != nil {
					t.Errorf("server got args %v, want the transport args", c.args)
				}
				if c.info.PolicyArgs["remote"] != "https://github.com/acme/app" || c.info.Push == nil || c.info.Push.Remote != "origin" {
					t.Errorf("call info lacks what the policy judged: %+v", c.info)
				}
				d := f.sink.decisions()[0]
				if c.info.CallID == "" || c.info.CallID != d.CallID || c.info.SessionID != "s1" {
					t.Errorf("call info %+v does not match decision %+v", c.info, d)
				}
				if string(d.Args) != `{"path":"/sandbox/notes.txt","remote":"https://github.com/acme/app"}` || d.Rule != "allow-reads" {
					t.Errorf("decision record = %+v (args %s)", d, d.Args)
				}
			},
		},
		{
			name: "denied call never reaches the server",
			tool: "files__write",
			setup: func(f *pipelineFixture) {
				f.pol.evals["files__write"] = policy.Evaluation{Decision: policy.Decision{
					Status: policy.Deny, Rule: "structural-protected-path", Reason: "the path is protected",
					Detail: "/etc/ironcurtain/policy/compiled-policy.json"}}
			},
			wantError:  true,
			wantText:   []string{"refused files__write: the path is protected"},
			wantAbsent: []string{"/etc/ironcurtain"},
			wantTrail:  []string{"decision:deny", "outcome:denied"},
			check: func(t *testing.T, f *pipelineFixture) {
				if d := f.sink.decisions()[0]; d.Detail == "" {
					t.Error("the decision detail did not reach the audit record")
				}
			},
		},
		{
			name:      "zero evaluation denies",
			tool:      "files__delete",
			wantError: true,
			wantText:  []string{"refused files__delete: policy does not allow it"},
			wantTrail: []string{"decision:deny", "outcome:denied"},
		},
		{
			name: "audit failure on the decision: the call does not run",
			tool: "files__read",
			setup: func(f *pipelineFixture) {
				f.pol.evals["files__read"] = allow("allow-reads", canonical)
				f.sink.failWhen = func(e audit.Event) bool { _, ok := e.(*audit.ToolCallDecision); return ok }
			},
			wantError: true,
			wantText:  []string{"could not record the call in its audit log, so it did not run"},
			wantTrail: []string{"outcome:refused"},
		},
		{
			name: "escalation approved: recorded before and after, then runs",
			tool: "files__delete",
			setup: func(f *pipelineFixture) {
				f.pol.evals["files__delete"] = escalate
				f.esc.res = escalation.Result{Approved: true, Status: "approved", DecidedBy: "alice", Reason: "fine"}
			},
			wantText:     []string{"ok"},
			wantCalls:    1,
			wantTrail:    []string{"decision:escalate", "outcome:ok"},
			wantNotices:  []string{"pending", "approved"},
			wantApproved: true,
			check: func(t *testing.T, f *pipelineFixture) {
				if !f.esc.durable {
					t.Error("the escalate decision was not durable when the escalation was created")
				}
				d := f.sink.decisions()[0]
				req := f.esc.reqs[0]
				if d.EscalationID == "" || d.EscalationID != req.ID || d.CallID != req.CallID || d.Rule != "escalate-deletes" {
					t.Errorf("decision %+v does not name escalation %+v", d, req)
				}
				if req.Kind != "tool_call" || req.Server != "files" || req.Tool != "delete" || req.Rule != "escalate-deletes" || req.SessionID != "s1" {
					t.Errorf("escalation request = %+v", req)
				}
			},
		},
		{
			name: "escalation denied by a human",
			tool: "files__delete",
			setup: func(f *pipelineFixture) {
				f.pol.evals["files__delete"] = escalate
				f.esc.res = escalation.Result{Status: "denied", DecidedBy: "bob", Reason: "not today"}
			},
			wantError:   true,
			wantText:    []string{"refused files__delete: it needed a human's approval and a human denied it: not today (escalation id-"},
			wantTrail:   []string{"decision:escalate", "outcome:denied"},
			wantNotices: []string{"pending", "denied"},
			check: func(t *testing.T, f *pipelineFixture) {
				if o := f.sink.outcomes()[0]; !strings.Contains(o.Error, "denied (decided by bob)") {
					t.Errorf("outcome detail = %q", o.Error)
				}
			},
		},
		{
			name: "escalation expired",
			tool: "files__delete",
			setup: func(f *pipelineFixture) {
				f.pol.evals["files__delete"] = escalate
				f.esc.res = escalation.Result{Status: "expired"}
			},
			wantError:   true,
			wantText:    []string{"no one answered in time"},
			wantTrail:   []string{"decision:escalate", "outcome:denied"},
			wantNotices: []string{"pending", "expired"},
		},
		{
			name: "escalator error refuses",
			tool: "files__delete",
			setup: func(f *pipelineFixture) {
				f.pol.evals["files__delete"] = escalate
				f.esc.err = errors.New("postgres: connection refused")
			},
			wantError:   true,
			wantText:    []string{"no decision could be obtained"},
			wantAbsent:  []string{"postgres"},
			wantTrail:   []string{"decision:escalate", "outcome:refused"},
			wantNotices: []string{"pending", "denied"},
		},
		{
			name: "approved flag with a refusing status denies",
			tool: "files__delete",
			setup: func(f *pipelineFixture) {
				f.pol.evals["files__delete"] = escalate
				f.esc.res = escalation.Result{Approved: true, Status: "expired"}
			},
			wantError:   true,
			wantTrail:   []string{"decision:escalate", "outcome:denied"},
			wantNotices: []string{"pending", "expired"},
		},
		{
			name: "escalation not durable: no escalation is created",
			tool: "files__delete",
			setup: func(f *pipelineFixture) {
				f.pol.evals["files__delete"] = escalate
				f.esc.res = escalation.Result{Approved: true, Status: "approved"}
				f.sink.failWhen = func(e audit.Event) bool { _, ok := e.(*audit.ToolCallDecision); return ok }
			},
			wantError: true,
			wantText:  []string{"could not record the call"},
			wantTrail: []string{"outcome:refused"},
			check: func(t *testing.T, f *pipelineFixture) {
				if len(f.esc.reqs) != 0 {
					t.Error("an escalation was created although its decision was not recorded")
				}
			},
		},
		{
			name:      "no approver configured: escalations are denied",
			tool:      "files__delete",
			denyEscal: true,
			setup: func(f *pipelineFixture) {
				f.pol.evals["files__delete"] = escalate
			},
			wantError:   true,
			wantText:    []string{"no approver is configured"},
			wantTrail:   []string{"decision:escalate", "outcome:denied"},
			wantNotices: []string{"pending", "denied"},
		},
		{
			name: "server error: short message, detail in audit only",
			tool: "files__read",
			setup: func(f *pipelineFixture) {
				f.pol.evals["files__read"] = allow("allow-reads", canonical)
				f.srv.run = func(context.Context, string, map[string]any) (servers.Result, error) {
					return servers.Result{}, errors.New("open /var/lib/ironcurtain/secrets/token: permission denied")
				}
			},
			wantError:  true,
			wantText:   []string{"files__read failed inside the gateway (call id-"},
			wantAbsent: []string{"/var/lib", "secrets"},
			wantCalls:  1,
			wantTrail:  []string{"decision:allow", "outcome:error"},
			check: func(t *testing.T, f *pipelineFixture) {
				if o := f.sink.outcomes()[0]; !strings.Contains(o.Error, "permission denied") {
					t.Errorf("outcome error = %q, want the detail", o.Error)
				}
			},
		},
		{
			name: "server panic is contained",
			tool: "files__read",
			setup: func(f *pipelineFixture) {
				f.pol.evals["files__read"] = allow("allow-reads", canonical)
				f.srv.run = func(context.Context, string, map[string]any) (servers.Result, error) { panic("boom") }
			},
			wantError: true,
			wantText:  []string{"failed inside the gateway"},
			wantCalls: 1,
			wantTrail: []string{"decision:allow", "outcome:error"},
		},
		{
			name: "server timeout",
			tool: "files__read",
			cfg:  Config{CallTimeout: 50 * time.Millisecond},
			setup: func(f *pipelineFixture) {
				f.pol.evals["files__read"] = allow("allow-reads", canonical)
				f.srv.run = func(ctx context.Context, _ string, _ map[string]any) (servers.Result, error) {
					time.Sleep(time.Second) // ignores ctx on purpose
					return servers.Text("late"), nil
				}
			},
			wantError: true,
			wantText:  []string{"did not finish within 50ms"},
			wantCalls: 1,
			wantTrail: []string{"decision:allow", "outcome:timed_out"},
		},
		{
			name: "oversized result is cut and marked",
			tool: "files__read",
			cfg:  Config{MaxResultBytes: 100},
			setup: func(f *pipelineFixture) {
				f.pol.evals["files__read"] = allow("allow-reads", canonical)
				f.srv.run = func(context.Context, string, map[string]any) (servers.Result, error) {
					return servers.Result{Content: []servers.Content{
						{Type: "text", Text: strings.Repeat("é", 80)},
						{Type: "image", Data: strings.Repeat("A", 500), MIMEType: "image/png"},
					}}, nil
				}
			},
			wantText:  []string{"[result cut by the gateway: 660 bytes, the limit is 100; 1 item(s) left out]"},
			wantCalls: 1,
			wantTrail: []string{"decision:allow", "outcome:ok"},
			check: func(t *testing.T, f *pipelineFixture) {
				o := f.sink.outcomes()[0]
				if !o.Truncated || o.ResultBytes != 660 {
					t.Errorf("outcome = %+v, want truncated with the original size", o)
				}
			},
		},
		{
			name: "tool-level error result passes through as an error outcome",
			tool: "files__read",
			setup: func(f *pipelineFixture) {
				f.pol.evals["files__read"] = allow("allow-reads", canonical)
				f.srv.run = func(context.Context, string, map[string]any) (servers.Result, error) {
					return servers.ToolError("no such file"), nil
				}
			},
			wantError: true,
			wantText:  []string{"no such file"},
			wantCalls: 1,
			wantTrail: []string{"decision:allow", "outcome:error"},
		},
		{
			name:      "unknown tool is refused and recorded",
			tool:      "files__format_disk",
			wantError: true,
			wantText:  []string{"refused files__format_disk: there is no such tool"},
			wantTrail: []string{"decision:deny", "outcome:denied"},
			check: func(t *testing.T, f *pipelineFixture) {
				if d := f.sink.decisions()[0]; d.Rule != policy.RuleUnknownTool || d.Server != "files" || d.Tool != "format_disk" {
					t.Errorf("decision = %+v", d)
				}
			},
		},
		{
			name:      "a tool without annotation is not exposed",
			tool:      "files__secret_unannotated",
			wantError: true,
			wantText:  []string{"there is no such tool"},
			wantTrail: []string{"decision:deny", "outcome:denied"},
		},
		{
			name: "an annotation that disappears denies",
			tool: "files__read",
			setup: func(f *pipelineFixture) {
				f.pol.evals["files__read"] = allow("allow-reads", canonical)
				f.pol.setAnnotated("files__read", false)
			},
			wantError: true,
			wantText:  []string{"the tool has no policy annotation"},
			wantTrail: []string{"decision:deny", "outcome:denied"},
		},
		{
			name: "shadow decision is recorded",
			tool: "files__read",
			setup: func(f *pipelineFixture) {
				ev := allow("allow-reads", canonical)
				ev.Shadow = &policy.Decision{Status: policy.Deny, Rule: "stricter"}
				f.pol.evals["files__read"] = ev
			},
			wantText:  []string{"ok"},
			wantCalls: 1,
			wantTrail: []string{"decision:allow", "outcome:ok"},
			check: func(t *testing.T, f *pipelineFixture) {
				if d := f.sink.decisions()[0]; d.ShadowDecision != "deny" || d.ShadowRule != "stricter" {
					t.Errorf("decision = %+v", d)
				}
			},
		},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			f := newPipelineFixture(t, tt.cfg, tt.denyEscal)
			if tt.setup != nil {
				tt.setup(f)
			}
			res := f.hub.Call(context.Background(), CallRequest{Session: sess, Tool: tt.tool, Args: readArgs, Notify: f.notifier})
			text := ""
			for _, c := range res.Content {
				text += c.Text
			}
			if res.IsError != tt.wantError {
				t.Errorf("IsError = %v, want %v (%q)", res.IsError, tt.wantError, text)
			}
			for _, s := range tt.wantText {
				if !strings.Contains(text, s) {
					t.Errorf("result %q lacks %q", text, s)
				}
			}
			for _, s := range tt.wantAbsent {
				if strings.Contains(text, s) {
					t.Errorf("result %q contains %q", text, s)
				}
			}
			if got := f.srv.callCount(); got != tt.wantCalls {
				t.Errorf("server calls = %d, want %d", got, tt.wantCalls)
			}
			if got := strings.Join(f.sink.trail(), " "); got != strings.Join(tt.wantTrail, " ") {
				t.Errorf("audit trail = %q, want %q", got, strings.Join(tt.wantTrail, " "))
			}
			if got := strings.Join(f.notifier.statuses(), " "); got != strings.Join(tt.wantNotices, " ") {
				t.Errorf("notices = %q, want %q", got, strings.Join(tt.wantNotices, " "))
			}
			if tt.wantCalls > 0 && f.srv.calls[0].info.Approved != tt.wantApproved {
				t.Errorf("CallInfo.Approved = %v, want %v", f.srv.calls[0].info.Approved, tt.wantApproved)
			}
			// Every call has exactly one outcome, and decisions and outcome
			// share the call id.
			outs := f.sink.outcomes()
			if len(outs) != 1 {
				t.Fatalf("%d outcomes, want 1", len(outs))
			}
			for _, d := range f.sink.decisions() {
				if d.CallID != outs[0].CallID || d.SessionID != "s1" {
					t.Errorf("decision %+v does not belong to outcome %+v", d, outs[0])
				}
			}
			if tt.check != nil {
				tt.check(t, f)
			}
		})
	}
}

func TestPipelineMetrics(t *testing.T) {
	f := newPipelineFixture(t, Config{}, false)
	f.pol.evals["files__read"] = allow("r", nil)
	sess := session.Session{ID: "s"}
	for range 3 {
		f.hub.Call(context.Background(), CallRequest{Session: sess, Tool: "files__read"})
	}
	f.hub.Call(context.Background(), CallRequest{Session: sess, Tool: "files__write"})
	f.hub.Call(context.Background(), CallRequest{Session: sess, Tool: "nope__x"})
	tests := []struct {
		name string
		c    prometheus.Collector
		want float64
	}{
		{name: "allowed reads", c: counter(t, f.reg, "ironcurtain_tool_calls_total", map[string]string{"server": "files", "tool": "read", "decision": "allow"}), want: 3},
		{name: "denied write", c: counter(t, f.reg, "ironcurtain_tool_calls_total", map[string]string{"server": "files", "tool": "write", "decision": "deny"}), want: 1},
		{name: "unknown tool", c: counter(t, f.reg, "ironcurtain_tool_calls_total", map[string]string{"server": "unknown", "tool": "unknown", "decision": "deny"}), want: 1},
		{name: "ok outcomes", c: counter(t, f.reg, "ironcurtain_tool_call_outcomes_total", map[string]string{"server": "files", "tool": "read", "outcome": "ok"}), want: 3},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			if got := testutil.ToFloat64(tt.c); got != tt.want {
				t.Errorf("= %v, want %v", got, tt.want)
			}
		})
	}
}

// counter finds one series in reg by name and labels.
func counter(t *testing.T, reg *prometheus.Registry, name string, labels map[string]string) prometheus.Collector {
	t.Helper()
	mfs, err := reg.Gather()
	if err != nil {
		t.Fatal(err)
	}
	for _, mf := range mfs {
		if mf.GetName() != name {
			continue
		}
		for _, m := range mf.GetMetric() {
			match := len(m.GetLabel()) == len(labels)
			for _, l := range m.GetLabel() {
				if labels[l.GetName()] != l.GetValue() {
					match = false
				}
			}
			if match {
				v := m.GetCounter().GetValue()
				return prometheus.NewGaugeFunc(prometheus.GaugeOpts{Name: "x"}, func() float64 { return v })
			}
		}
	}
	return prometheus.NewGaugeFunc(prometheus.GaugeOpts{Name: "x"}, func() float64 { return 0 })
}

func TestEscalationProgressWhileWaiting(t *testing.T) {
	f := newPipelineFixture(t, Config{ProgressEvery: 10 * time.Millisecond}, false)
	f.pol.evals["files__delete"] = policy.Evaluation{Decision: policy.Decision{Status: policy.Escalate, Rule: "r", Reason: "why"}}
	f.esc.wait = make(chan struct{})
	f.esc.res = escalation.Result{Approved: true, Status: "approved"}
	done := make(chan servers.Result, 1)
	go func() {
		done <- f.hub.Call(context.Background(), CallRequest{Session: session.Session{ID: "s"}, Tool: "files__delete", Notify: f.notifier})
	}()
	deadline := time.Now().Add(5 * time.Second)
	for f.notifier.waits.Load() < 2 {
		if time.Now().After(deadline) {
			t.Fatal("no progress while waiting for a human")
		}
		time.Sleep(5 * time.Millisecond)
	}
	close(f.esc.wait)
	if res := <-done; res.IsError {
		t.Fatalf("result = %+v", res)
	}
	// The wait for a human does not count as gateway time.
	if o := f.sink.outcomes()[0]; o.Duration > 15*time.Millisecond {
		t.Errorf("outcome duration %v includes the wait for a human", o.Duration)
	}
}

func TestConcurrentCalls(t *testing.T) {
	f := newPipelineFixture(t, Config{}, false)
	f.pol.evals["files__read"] = allow("r", nil)
	const n = 64
	errs := make(chan string, n)
	for i := range n {
		go func() {
			res := f.hub.Call(context.Background(), CallRequest{Session: session.Session{ID: "s"}, Tool: "files__read"})
			if res.IsError {
				errs <- res.Content[0].Text
				return
			}
			_ = i
			errs <- ""
		}()
	}
	for range n {
		if e := <-errs; e != "" {
			t.Fatal(e)
		}
	}
	if got := f.srv.callCount(); got != n {
		t.Fatalf("server calls = %d", got)
	}
	ids := map[string]bool{}
	for _, o := range f.sink.outcomes() {
		if ids[o.CallID] {
			t.Fatalf("call id %s used twice", o.CallID)
		}
		ids[o.CallID] = true
	}
}

func TestNewValidates(t *testing.T) {
	pol := &fakePolicy{annotated: map[string]bool{"a__t": true}}
	good := Deps{Policy: pol, Audit: &memSink{}, Auth: fakeAuth{}}
	tests := []struct {
		name string
		cfg  Config
		deps func() Deps
		want string
	}{
		{name: "no policy", deps: func() Deps { d := good; d.Policy = nil; return d }, want: "policy engine is required"},
		{name: "no audit", deps: func() Deps { d := good; d.Audit = nil; return d }, want: "audit sink is required"},
		{name: "no auth", deps: func() Deps { d := good; d.Auth = nil; return d }, want: "authenticator is required"},
		{name: "negative limit", cfg: Config{MaxResultBytes: -1}, deps: func() Deps { return good }, want: "must not be negative"},
		{name: "server name with separator", deps: func() Deps {
			d := good
			d.Servers = []servers.Server{newFakeServer("a__b", "t")}
			return d
		}, want: "invalid"},
		{name: "upper-case server name", deps: func() Deps {
			d := good
			d.Servers = []servers.Server{newFakeServer("Files", "t")}
			return d
		}, want: "invalid"},
		{name: "duplicate server", deps: func() Deps {
			d := good
			d.Servers = []servers.Server{newFakeServer("a", "t"), newFakeServer("a", "u")}
			return d
		}, want: "configured twice"},
		{name: "duplicate tool", deps: func() Deps {
			d := good
			d.Servers = []servers.Server{newFakeServer("a", "t", "t")}
			return d
		}, want: "twice"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			_, err := New(tt.cfg, tt.deps())
			if err == nil || !strings.Contains(err.Error(), tt.want) {
				t.Fatalf("err = %v, want %q", err, tt.want)
			}
		})
	}
}
