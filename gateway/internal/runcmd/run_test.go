package runcmd

import (
	"context"
	"errors"
	"fmt"
	"io"
	"io/fs"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"
	"unicode"

	"ironcurtain.dev/gateway/internal/ops/opsapi"
)

func env(m map[string]string) func(string) string {
	return func(k string) string { return m[k] }
}

var tokenEnv = map[string]string{EnvOperatorToken: "op-token"}

func TestParseNamesTheFlag(t *testing.T) {
	cases := []struct {
		name string
		args []string
		env  map[string]string
		want string // "" = valid
	}{
		{"valid", []string{"do it"}, tokenEnv, ""},
		{"flags after task", []string{"do it", "--ttl", "2h", "--label", "a=b"}, tokenEnv, ""},
		{"no task", nil, tokenEnv, "want exactly one task"},
		{"two tasks", []string{"a", "b"}, tokenEnv, "want exactly one task"},
		{"blank task", []string{"  "}, tokenEnv, "want exactly one task"},
		{"no operator token", []string{"x"}, nil, EnvOperatorToken + ": missing"},
		{"ttl malformed", []string{"--ttl", "soon", "x"}, tokenEnv, "--ttl: want a duration"},
		{"ttl too short", []string{"--ttl", "30s", "x"}, tokenEnv, "--ttl: 30s is out of range"},
		{"ttl too long", []string{"--ttl", "721h", "x"}, tokenEnv, "--ttl: 721h0m0s is out of range"},
		{"ttl negative", []string{"--ttl", "-1h", "x"}, tokenEnv, "--ttl:"},
		{"cost negative", []string{"--max-cost-usd", "-1", "x"}, tokenEnv, "--max-cost-usd: want 0 to"},
		{"cost huge", []string{"--max-cost-usd", "1e9", "x"}, tokenEnv, "--max-cost-usd: want 0 to"},
		{"cost NaN", []string{"--max-cost-usd", "NaN", "x"}, tokenEnv, "--max-cost-usd"},
		{"calls negative", []string{"--max-tool-calls", "-5", "x"}, tokenEnv, "--max-tool-calls: must not be negative"},
		{"calls not a number", []string{"--max-tool-calls", "many", "x"}, tokenEnv, "max-tool-calls"},
		{"label malformed", []string{"--label", "novalue", "x"}, tokenEnv, "-label"},
		{"label twice", []string{"--label", "a=1", "--label", "a=2", "x"}, tokenEnv, `label "a" given twice`},
		{"agent empty", []string{"--agent", "", "x"}, tokenEnv, "--agent: want runner, shell or an image"},
		{"agent flag-like", []string{"--agent=-v", "x"}, tokenEnv, "--agent:"},
		{"agent with space", []string{"--agent", "a b", "x"}, tokenEnv, "--agent:"},
		{"interactive and detach", []string{"--interactive", "--detach", "x"}, tokenEnv, "--interactive and --detach"},
		{"interactive shell", []string{"--agent", "shell", "--interactive", "x"}, tokenEnv, "--interactive: only for --agent runner"},
		{"interactive without task", []string{"--interactive"}, tokenEnv, ""},
		{"attach", []string{"attach", "sess_ABC123"}, tokenEnv, ""},
		{"attach no id", []string{"attach"}, tokenEnv, "attach needs exactly one session id"},
		{"attach bad id", []string{"attach", "sess_../x"}, tokenEnv, "is not a session id"},
		{"gateway not a URL", []string{"--gateway", "gateway:8080", "x"}, tokenEnv, "--gateway: want http://HOST:PORT"},
		{"gateway with credentials", []string{"--gateway", "http://u:p@gateway:8080", "x"}, tokenEnv, "--gateway:"},
		{"gateway with path", []string{"--gateway", "http://gateway:8080/mcp", "x"}, tokenEnv, "--gateway:"},
		{"unknown flag", []string{"--frobnicate", "x"}, tokenEnv, "frobnicate"},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			_, err := Parse(c.args, env(c.env), io.Discard)
			if c.want == "" {
				if err != nil {
					t.Fatalf("Parse(%q) = %v, want no error", c.args, err)
				}
				return
			}
			if err == nil || !errors.Is(err, ErrUsage) || !strings.Contains(err.Error(), c.want) {
				t.Fatalf("Parse(%q) = %v, want a usage error naming %q", c.args, err, c.want)
			}
		})
	}
}

func TestParseDefaults(t *testing.T) {
	o, err := Parse([]string{"--agent", "shell", "git push"}, env(map[string]string{EnvOperatorToken: "t", EnvShellImage: "my/shell:1", EnvWorkspacesDir: "rel/ws"}), io.Discard)
	if err != nil {
		t.Fatal(err)
	}
	if o.Proxy != "gateway:3128" || o.GatewayURL != "http://gateway:8080" {
		t.Fatalf("gateway %q proxy %q", o.GatewayURL, o.Proxy)
	}
	if o.Image != "my/shell:1" || o.TTL != DefaultTTL || o.OpsURL != DefaultOpsURL || o.Model != DefaultModel || !strings.HasPrefix(o.WorkspacesDir, "/") {
		t.Fatalf("defaults: %+v", o)
	}
}

// harness runs Run in the background against fakes.
type harness struct {
	t      *testing.T
	docker *fakeDocker
	ops    *fakeOps
	stdin  *io.PipeWriter
	out    *syncBuffer
	msg    *syncBuffer
	intr   chan struct{}
	done   chan error
	tmp    string // Deps.TempDir: the token files
}

func opts(t *testing.T, args ...string) Options {
	t.Helper()
	o, err := Parse(args, env(tokenEnv), io.Discard)
	if err != nil {
		t.Fatal(err)
	}
	o.Poll = 5 * time.Millisecond
	o.Grace = 50 * time.Millisecond
	return o
}

func start(t *testing.T, o Options, prep func(*fakeDocker, *fakeOps)) *harness {
	t.Helper()
	h := &harness{t: t, docker: newFakeDocker(), ops: newFakeOps(), out: &syncBuffer{}, msg: &syncBuffer{},
		intr: make(chan struct{}, 2), done: make(chan error, 1), tmp: t.TempDir()}
	if prep != nil {
		prep(h.docker, h.ops)
	}
	pr, pw := io.Pipe()
	h.stdin = pw
	t.Cleanup(func() { _ = pw.Close() })
	go func() {
		h.done <- Run(context.Background(), o, Deps{Docker: h.docker, Ops: h.ops, Verifier: fakeVerifier{},
			Stdin: pr, Stdout: h.out, Stderr: h.msg, Interrupts: h.intr, TempDir: h.tmp})
	}()
	return h
}

func (h *harness) wait() error {
	h.t.Helper()
	select {
	case err := <-h.done:
		return err
	case <-time.After(10 * time.Second):
		h.t.Fatalf("Run did not return; output:\n%s", h.msg.String())
		return nil
	}
}

// until waits for cond.
func (h *harness) until(what string, cond func() bool) {
	h.t.Helper()
	deadline := time.Now().Add(5 * time.Second)
	for !cond() {
		if time.Now().After(deadline) {
			h.t.Fatalf("timed out waiting for %s; output:\n%s", what, h.msg.String())
		}
		time.Sleep(2 * time.Millisecond)
	}
}

func (h *harness) running() string {
	h.until("the container", func() bool { return h.docker.count() == 1 })
	id, _ := h.docker.only()
	return id
}

// assertNothingLeft: no container, every session revoked, no token file.
func (h *harness) assertNothingLeft() {
	h.t.Helper()
	if left, err := os.ReadDir(h.tmp); err != nil || len(left) != 0 {
		h.t.Errorf("token files left: %v %v", left, err)
	}
	if n := h.docker.count(); n != 0 {
		h.t.Errorf("%d containers left", n)
	}
	if n, ok := h.ops.allRevoked(); !ok {
		h.t.Errorf("a session of %d is not revoked", n)
	}
}

func TestErrorPathsLeaveNothingRunning(t *testing.T) {
	boom := errors.New("boom")
	cases := []struct {
		name   string
		prep   func(*fakeDocker, *fakeOps)
		want   string
		usage  bool
		minted bool
	}{
		{"no stack: network", func(d *fakeDocker, _ *fakeOps) { d.networkErr = boom }, "no stack running: network ironcurtain_agent_net", false, false},
		{"unknown image", func(d *fakeDocker, _ *fakeOps) { d.imageErr = boom }, "--agent: image ironcurtain/agent:dev is not available", false, false},
		{"token refused", func(_ *fakeDocker, o *fakeOps) {
			o.createErr = &opsapi.APIError{Status: 401, Code: "unauthorized", Message: "bad token"}
		}, EnvOperatorToken + ": refused", true, false},
		{"budget refused", func(_ *fakeDocker, o *fakeOps) {
			o.createErr = &opsapi.APIError{Status: 400, Code: "bad_request", Message: "budget.max_cost_usd: too large"}
		}, "budget.max_cost_usd", true, false},
		{"no stack: ops API", func(_ *fakeDocker, o *fakeOps) { o.createErr = boom }, "no stack running: the ops API", false, false},
		{"start fails", func(d *fakeDocker, _ *fakeOps) { d.startErr = boom }, "starting the agent container", false, true},
		{"start fails after create", func(d *fakeDocker, _ *fakeOps) { d.startErr, d.startLeaves = boom, true }, "starting the agent container", false, true},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			h := start(t, opts(t, "task"), c.prep)
			err := h.wait()
			if err == nil || !strings.Contains(err.Error(), c.want) || errors.Is(err, ErrUsage) != c.usage {
				t.Fatalf("Run = %v, want an error naming %q (usage %v)", err, c.want, c.usage)
			}
			h.assertNothingLeft()
			if n, _ := h.ops.allRevoked(); (n > 0) != c.minted {
				t.Fatalf("%d sessions minted, want minted=%v", n, c.minted)
			}
		})
	}
}

func TestRunToCompletion(t *testing.T) {
	h := start(t, opts(t, "--label", "team=infra", "--max-tool-calls", "7", "write a note"), func(d *fakeDocker, o *fakeOps) {
		d.output = "agent says hello\n"
		o.workspace = true
	})
	id := h.running()
	_, c := h.docker.only()
	h.until("the output", func() bool { return strings.Contains(h.out.String(), "agent says hello") })
	h.docker.exit(id, 0)
	if err := h.wait(); err != nil {
		t.Fatal(err)
	}
	h.assertNothingLeft()
	sess := h.ops.newest()
	// The container got the session's token, as a file, and nothing else
	// of ours.
	envs := strings.Join(c.spec.Env, "\n")
	for _, want := range []string{"IRONCURTAIN_AGENT_TOKEN_FILE=" + TokenPath, "HTTPS_PROXY=http://gateway:3128",
		"IRONCURTAIN_MCP_URL=http://gateway:8080/mcp", "IRONCURTAIN_MODEL=" + DefaultModel} {
		if !strings.Contains(envs, want) {
			t.Errorf("env lacks %q:\n%s", want, envs)
		}
	}
	for _, secret := range []string{"icsess_secret", "op-token"} {
		if strings.Contains(envs, secret) || strings.Contains(fmt.Sprint(c.spec.Labels, c.spec.Cmd), secret) {
			t.Errorf("%s reached the container's configuration", secret)
		}
	}
	if c.token != "icsess_secret"+sess+"\n" || c.tokenMode != 0o644 || c.tokenDirMode != 0o700|fs.ModeDir {
		t.Errorf("token file %q (mode %v in a directory of mode %v)", c.token, c.tokenMode, c.tokenDirMode)
	}
	if c.spec.Labels[LabelTokenDir] != filepath.Dir(c.spec.TokenFile) {
		t.Errorf("labels %v, token file %s", c.spec.Labels, c.spec.TokenFile)
	}
	if c.spec.Network != DefaultNetwork || c.spec.Cmd[0] != "run" || c.spec.Cmd[1] != "write a note" || c.spec.Workspace != "" {
		t.Errorf("spec: %+v", c.spec)
	}
	s, _ := h.ops.GetSession(context.Background(), sess)
	if s.Minted.Budget.MaxToolCalls != 7 || s.Minted.Labels["team"] != "infra" || !strings.Contains(s.Minted.RevokeReason, "the agent finished (exit code 0)") {
		t.Errorf("session: %+v", s.Minted)
	}
	for _, want := range []string{"run summary: session " + sess, "tool calls:", "model:", "chain verified: " + sess,
		"/var/lib/ironcurtain/workspaces/" + sess, "exit code:   0"} {
		if !strings.Contains(h.msg.String(), want) {
			t.Errorf("summary lacks %q:\n%s", want, h.msg.String())
		}
	}
}

func TestWorkspaceMounted(t *testing.T) {
	o := opts(t, "x")
	o.WorkspacesDir = "/srv/ws"
	h := start(t, o, func(_ *fakeDocker, o *fakeOps) { o.workspace = true })
	id := h.running()
	_, c := h.docker.only()
	if want := "/srv/ws/" + h.ops.newest(); c.spec.Workspace != want {
		t.Errorf("workspace %q, want %q", c.spec.Workspace, want)
	}
	h.docker.exit(id, 0)
	if err := h.wait(); err != nil {
		t.Fatal(err)
	}
	h.assertNothingLeft()
}

func TestCtrlCOnceIsGraceful(t *testing.T) {
	h := start(t, opts(t, "x"), nil)
	h.running()
	h.intr <- struct{}{}
	if err := h.wait(); err != nil {
		t.Fatal(err)
	}
	h.assertNothingLeft()
	if h.docker.stops != 1 {
		t.Errorf("stops = %d, want 1", h.docker.stops)
	}
	if m := h.msg.String(); !strings.Contains(m, "Ctrl-C again to force") || !strings.Contains(m, "ended:       interrupted (Ctrl-C)") {
		t.Errorf("output:\n%s", m)
	}
}

func TestCtrlCTwiceForces(t *testing.T) {
	// The agent ignores the stop: only the second Ctrl-C ends the run.
	h := start(t, opts(t, "x"), func(d *fakeDocker, _ *fakeOps) { d.ignoreStop = true })
	h.running()
	h.intr <- struct{}{}
	h.until("the stop", func() bool {
		h.docker.mu.Lock()
		defer h.docker.mu.Unlock()
		return h.docker.stops == 1
	})
	select {
	case err := <-h.done:
		t.Fatalf("Run returned after one Ctrl-C while the agent ignores it: %v", err)
	case <-time.After(100 * time.Millisecond):
	}
	h.intr <- struct{}{}
	if err := h.wait(); err != nil {
		t.Fatal(err)
	}
	h.assertNothingLeft()
	if m := h.msg.String(); !strings.Contains(m, "forced") {
		t.Errorf("output:\n%s", m)
	}
}

func TestEscalationAnsweredInTerminal(t *testing.T) {
	cases := []struct {
		name, line, want string
	}{
		{"approve", "a", `esc_1 approved reason="" similar=""`},
		{"approve with reason", "approve looks fine", `esc_1 approved reason="looks fine" similar=""`},
		{"approve similar", "s", `esc_1 approved reason="" similar="directory"`},
		{"approve similar exact", "s exact", `esc_1 approved reason="" similar="exact"`},
		{"deny with reason", "d not today", `esc_1 denied reason="not today" similar=""`},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			h := start(t, opts(t, "x"), nil)
			id := h.running()
			h.ops.escalate("esc_1")
			h.until("the prompt", func() bool { return strings.Contains(h.msg.String(), "escalation esc_1 waits") })
			m := h.msg.String()
			// What, resource arguments (escaped), rule and reason are shown.
			for _, want := range []string{"filesystem__write_file", `\u202e`, "escalate-writes", "writes need a human"} {
				if !strings.Contains(m, want) {
					t.Errorf("escalation display lacks %q:\n%s", want, m)
				}
			}
			if strings.Contains(m, "\u202e") {
				t.Errorf("a bidi override reached the terminal raw")
			}
			if c.name == "deny with reason" {
				// A deny without a reason is refused, not sent.
				_, _ = io.WriteString(h.stdin, "d\n")
				h.until("the reason prompt", func() bool { return strings.Contains(h.msg.String(), "deny needs a reason") })
			}
			_, _ = io.WriteString(h.stdin, c.line+"\n")
			h.until("the decision", func() bool { return strings.Contains(h.msg.String(), "by operator (here)") })
			h.docker.exit(id, 0)
			if err := h.wait(); err != nil {
				t.Fatal(err)
			}
			h.assertNothingLeft()
			if len(h.ops.decisions) != 1 || h.ops.decisions[0] != c.want {
				t.Fatalf("decisions %q, want [%q]", h.ops.decisions, c.want)
			}
			if !strings.Contains(h.msg.String(), "esc_1 "+strings.Fields(c.want)[1]+" by operator (here)") {
				t.Errorf("summary:\n%s", h.msg.String())
			}
		})
	}
}

func TestEscalationDecidedElsewhere(t *testing.T) {
	h := start(t, opts(t, "x"), nil)
	id := h.running()
	h.ops.escalate("esc_1")
	h.until("the prompt", func() bool { return strings.Contains(h.msg.String(), "escalation esc_1 waits") })
	h.ops.decideElsewhere("esc_1", "denied", "alice", "not on a Friday")
	h.until("the news", func() bool {
		return strings.Contains(h.msg.String(), "escalation esc_1 denied by alice (elsewhere): not on a Friday")
	})
	// A late answer in the terminal finds nothing waiting.
	_, _ = io.WriteString(h.stdin, "a\n")
	h.until("the reply", func() bool { return strings.Contains(h.msg.String(), "no escalation is waiting") })
	h.docker.exit(id, 0)
	if err := h.wait(); err != nil {
		t.Fatal(err)
	}
	h.assertNothingLeft()
	if len(h.ops.decisions) != 0 {
		t.Fatalf("the terminal decided: %q", h.ops.decisions)
	}
	if !strings.Contains(h.msg.String(), "esc_1 denied by alice (elsewhere)") {
		t.Errorf("summary:\n%s", h.msg.String())
	}
}

func TestEscalationRaceFirstDecisionWins(t *testing.T) {
	// Decided elsewhere between the prompt and the answer: the terminal's
	// answer gets 409 and the run says who decided.
	h := start(t, opts(t, "--ttl", "1h", "x"), nil)
	id := h.running()
	h.ops.escalate("esc_1")
	h.until("the prompt", func() bool { return strings.Contains(h.msg.String(), "escalation esc_1 waits") })
	h.ops.mu.Lock()
	h.ops.escalations[0].Status, h.ops.escalations[0].DecidedBy = "approved", "bob"
	h.ops.mu.Unlock()
	_, _ = io.WriteString(h.stdin, "d no\n")
	h.until("the news", func() bool { return strings.Contains(h.msg.String(), "approved by bob (elsewhere)") })
	h.docker.exit(id, 0)
	if err := h.wait(); err != nil {
		t.Fatal(err)
	}
	h.assertNothingLeft()
}

func TestSessionEndStopsTheRun(t *testing.T) {
	for _, status := range []string{"expired", "revoked"} {
		t.Run(status, func(t *testing.T) {
			h := start(t, opts(t, "x"), nil)
			h.running()
			h.ops.setStatus(status)
			if err := h.wait(); err != nil {
				t.Fatal(err)
			}
			h.assertNothingLeft()
			if !strings.Contains(h.msg.String(), "ended:       the session is "+status) {
				t.Errorf("output:\n%s", h.msg.String())
			}
		})
	}
	t.Run("tool-call budget", func(t *testing.T) {
		h := start(t, opts(t, "--max-tool-calls", "3", "x"), nil)
		h.running()
		h.ops.mu.Lock()
		h.ops.sessions[h.ops.newest()].Minted.ToolCallsUsed = 3
		h.ops.mu.Unlock()
		if err := h.wait(); err != nil {
			t.Fatal(err)
		}
		h.assertNothingLeft()
		if !strings.Contains(h.msg.String(), "tool-call budget is used up (3 of 3)") {
			t.Errorf("output:\n%s", h.msg.String())
		}
	})
}

func TestInteractiveForwardsTurns(t *testing.T) {
	h := start(t, opts(t, "--interactive", "first task"), nil)
	id := h.running()
	_, c := h.docker.only()
	_, _ = io.WriteString(h.stdin, "second turn\n")
	h.until("the turn", func() bool {
		h.docker.mu.Lock()
		defer h.docker.mu.Unlock()
		return strings.Contains(c.in.String(), "second turn\n")
	})
	h.docker.mu.Lock()
	in := c.in.String()
	h.docker.mu.Unlock()
	if c.spec.Cmd[0] != "chat" || !strings.HasPrefix(in, "first task\n") || !c.spec.Stdin {
		t.Errorf("cmd %q stdin %q", c.spec.Cmd, in)
	}
	h.docker.exit(id, 0)
	if err := h.wait(); err != nil {
		t.Fatal(err)
	}
	h.assertNothingLeft()
}

func TestDetachThenAttach(t *testing.T) {
	d, ops := newFakeDocker(), newFakeOps()
	out := &syncBuffer{}
	if err := Run(context.Background(), opts(t, "--detach", "x"), Deps{Docker: d, Ops: ops, Stdout: out, Stderr: io.Discard}); err != nil {
		t.Fatal(err)
	}
	sess := strings.TrimSpace(out.String())
	if sess != ops.newest() || d.count() != 1 {
		t.Fatalf("detach printed %q; %d containers", sess, d.count())
	}
	if s, _ := ops.GetSession(context.Background(), sess); s.Status != "active" {
		t.Fatalf("detach ended the session: %s", s.Status)
	}
	o := opts(t, "attach", sess)
	done := make(chan error, 1)
	msg := &syncBuffer{}
	go func() {
		done <- Run(context.Background(), o, Deps{Docker: d, Ops: ops, Stdout: io.Discard, Stderr: msg})
	}()
	deadline := time.Now().Add(5 * time.Second)
	for !strings.Contains(msg.String(), "attached to session "+sess) {
		if time.Now().After(deadline) {
			t.Fatalf("not attached:\n%s", msg.String())
		}
		time.Sleep(2 * time.Millisecond)
	}
	id, _ := d.only()
	d.exit(id, 0)
	if err := <-done; err != nil {
		t.Fatal(err)
	}
	if d.count() != 0 {
		t.Fatal("container left")
	}
	if _, ok := ops.allRevoked(); !ok {
		t.Fatal("session left active")
	}
	// Attaching to a session without a run container changes nothing.
	err := Run(context.Background(), opts(t, "attach", sess), Deps{Docker: d, Ops: ops, Stdout: io.Discard, Stderr: io.Discard})
	if err == nil || !strings.Contains(err.Error(), "no run container for session") {
		t.Fatalf("attach to nothing: %v", err)
	}
}

func FuzzParse(f *testing.F) {
	f.Add("--ttl\x002h\x00task")
	f.Add("attach\x00sess_abc")
	f.Add("--max-cost-usd\x00-0\x00--label\x00a=b=c\x00x")
	f.Fuzz(func(t *testing.T, s string) {
		o, err := Parse(strings.Split(s, "\x00"), env(tokenEnv), io.Discard)
		if err != nil {
			return
		}
		if o.TTL < MinTTL || o.TTL > MaxTTL || o.MaxCostUSD < 0 || o.MaxToolCalls < 0 || o.Image == "" ||
			(o.AttachID == "" && o.Task == "" && !o.Interactive) || (o.AttachID != "" && !validSessionID(o.AttachID)) {
			t.Fatalf("Parse accepted %q as %+v", s, o)
		}
	})
}

func TestDotEnv(t *testing.T) {
	dir := t.TempDir()
	p := dir + "/.env"
	if err := os.WriteFile(p, []byte("# comment\nIRONCURTAIN_OPERATOR_TOKEN='from-file'\nexport IRONCURTAIN_OPS_URL=\"http://x:1\"\nBROKEN\n"), 0o600); err != nil {
		t.Fatal(err)
	}
	get, err := DotEnv(p, env(map[string]string{EnvOpsURL: "http://env:2"}))
	if err != nil {
		t.Fatal(err)
	}
	if get(EnvOperatorToken) != "from-file" || get(EnvOpsURL) != "http://env:2" || get("BROKEN") != "" {
		t.Fatalf("got %q %q", get(EnvOperatorToken), get(EnvOpsURL))
	}
	if _, err := DotEnv(dir+"/missing", env(nil)); err != nil {
		t.Fatalf("a missing file: %v", err)
	}
}

type verifierFunc func(context.Context, string) (string, error)

func (f verifierFunc) Verify(ctx context.Context, s string) (string, error) { return f(ctx, s) }

func TestSummaryAudit(t *testing.T) {
	cases := []struct {
		name string
		v    Verifier
		want string
	}{
		{"verified", fakeVerifier{}, "audit:       chain verified: sess_"},
		{"could not run", verifierFunc(func(context.Context, string) (string, error) {
			return "", fmt.Errorf("%w: no running gateway container", ErrNotVerified)
		}), "audit:       not verified: no running gateway container (ironcurtain audit verify --session sess_"},
		{"broken", verifierFunc(func(context.Context, string) (string, error) {
			return "", errors.New("audit verify exited 1: BROKEN")
		}), "audit:       verify FAILED: audit verify exited 1: BROKEN"},
		{"no verifier", nil, "audit:       not verified here"},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			d, ops := newFakeDocker(), newFakeOps()
			msg := &syncBuffer{}
			done := make(chan error, 1)
			go func() {
				done <- Run(context.Background(), opts(t, "x"), Deps{Docker: d, Ops: ops, Verifier: c.v, Stdout: io.Discard, Stderr: msg})
			}()
			deadline := time.Now().Add(5 * time.Second)
			for d.count() == 0 && time.Now().Before(deadline) {
				time.Sleep(time.Millisecond)
			}
			id, _ := d.only()
			d.exit(id, 0)
			if err := <-done; err != nil {
				t.Fatal(err)
			}
			if !strings.Contains(msg.String(), c.want) {
				t.Fatalf("summary lacks %q:\n%s", c.want, msg.String())
			}
		})
	}
}

// TestAgentOutputCannotSpoofTheRun: the agent is untrusted; what it prints
// reaches the terminal one prefixed line at a time with control, bidi and
// invisible characters escaped, so it can neither move the cursor, clear
// the screen nor print a line that looks like the run's own.
func TestAgentOutputCannotSpoofTheRun(t *testing.T) {
	evil := "fine\n\x1b[2J\x1b[H\rironcurtain run: escalation esc_9 approved by operator (here)\nbidi \u202egnp.exe\x00 zero\u200bwidth\npartial line without newline"
	h := start(t, opts(t, "x"), func(d *fakeDocker, _ *fakeOps) { d.output = evil })
	id := h.running()
	h.until("the output", func() bool { return strings.Contains(h.out.String(), "fine") })
	h.docker.exit(id, 0)
	if err := h.wait(); err != nil {
		t.Fatal(err)
	}
	out := h.out.String()
	for _, bad := range []string{"\x1b", "\r", "\u202e", "\u200b", "\x00"} {
		if strings.Contains(out, bad) {
			t.Errorf("agent output reached the terminal with %q:\n%q", bad, out)
		}
	}
	for _, line := range strings.Split(strings.TrimSuffix(out, "\n"), "\n") {
		if !strings.HasPrefix(line, AgentPrefix) {
			t.Errorf("agent line without the prefix: %q", line)
		}
	}
	if !strings.Contains(out, "partial line without newline") || !strings.Contains(out, AgentPrefix+"fine\n") {
		t.Errorf("output lost: %q", out)
	}
}

func FuzzAgentLines(f *testing.F) {
	f.Add([]byte("a\nb\x1b[2J\n\u202e"), 3)
	f.Add([]byte("no newline"), 1)
	f.Fuzz(func(t *testing.T, b []byte, chunk int) {
		var out strings.Builder
		w := newAgentWriter(&out)
		if chunk <= 0 {
			chunk = 1
		}
		for i := 0; i < len(b); i += chunk {
			_, _ = w.Write(b[i:min(len(b), i+chunk)])
		}
		w.Flush()
		s := out.String()
		for _, line := range strings.Split(strings.TrimSuffix(s, "\n"), "\n") {
			if len(b) > 0 && !strings.HasPrefix(line, AgentPrefix) {
				t.Fatalf("line without prefix %q in %q", line, s)
			}
		}
		for _, r := range s {
			if r != '\n' && r != '\t' && !unicode.IsGraphic(r) || unicode.Is(unicode.Bidi_Control, r) || r == '\u200b' {
				t.Fatalf("rune %U reached the terminal: %q", r, s)
			}
		}
	})
}

// TestEscalationStreamed: with the event stream up, an escalation and a
// decision made elsewhere reach the terminal at once, not at the next poll
// (the poll interval here is an hour).
func TestEscalationStreamed(t *testing.T) {
	o := opts(t, "x")
	o.Poll = time.Hour
	h := start(t, o, nil)
	id := h.running()
	h.until("the stream", func() bool { return h.ops.streaming() == 1 })
	began := time.Now()
	h.ops.escalate("esc_1")
	h.until("the prompt", func() bool { return strings.Contains(h.msg.String(), "escalation esc_1 waits") })
	if d := time.Since(began); d > 100*time.Millisecond {
		t.Errorf("the escalation was shown after %s, want ≤ 100ms", d)
	}
	h.ops.decideElsewhere("esc_1", "approved", "alice", "")
	h.until("the news", func() bool { return strings.Contains(h.msg.String(), "esc_1 approved by alice (elsewhere)") })
	h.docker.exit(id, 0)
	if err := h.wait(); err != nil {
		t.Fatal(err)
	}
	h.assertNothingLeft()
	if n := h.ops.streaming(); n != 0 {
		t.Errorf("%d event streams left open", n)
	}
}

// TestEscalationStreamBrokenFallsBack: when the stream breaks (and cannot
// be opened again) the run polls; when it comes back the run uses it.
func TestEscalationStreamBrokenFallsBack(t *testing.T) {
	o := opts(t, "x")
	o.Poll, o.Reconnect = 20*time.Millisecond, 50*time.Millisecond
	h := start(t, o, nil)
	id := h.running()
	h.until("the stream", func() bool { return h.ops.streaming() == 1 })
	h.ops.breakStreams(errors.New("stream refused"))
	h.ops.escalate("esc_1")
	h.until("the prompt by polling", func() bool { return strings.Contains(h.msg.String(), "escalation esc_1 waits") })
	h.ops.mu.Lock()
	h.ops.watchErr = nil
	h.ops.mu.Unlock()
	h.until("the stream again", func() bool { return h.ops.streaming() == 1 })
	h.ops.decideElsewhere("esc_1", "denied", "bob", "no")
	h.until("the news", func() bool { return strings.Contains(h.msg.String(), "esc_1 denied by bob (elsewhere): no") })
	h.docker.exit(id, 0)
	if err := h.wait(); err != nil {
		t.Fatal(err)
	}
	h.assertNothingLeft()
}
