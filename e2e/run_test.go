package e2e_test

import (
	"bytes"
	"context"
	"io"
	"log"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"

	"github.com/creack/pty"
	"github.com/moby/moby/client"

	"ironcurtain.dev/e2e/internal/stack"
)

// runWorkspaces is session_workspaces.root in the gateway of TestRun.
const runWorkspaces = "/tmp/ic-session-workspaces"

// runOutput collects a run's terminal and finds lines in it.
type runOutput struct {
	mu sync.Mutex
	b  bytes.Buffer
}

func (o *runOutput) Write(p []byte) (int, error) {
	o.mu.Lock()
	defer o.mu.Unlock()
	return o.b.Write(p)
}

func (o *runOutput) String() string {
	o.mu.Lock()
	defer o.mu.Unlock()
	return o.b.String()
}

var runSessionRE = regexp.MustCompile(`session (sess_[a-z0-9]+), container`)

// waitFor waits until the output holds want.
func (o *runOutput) waitFor(t *testing.T, want string, within time.Duration) {
	t.Helper()
	deadline := time.Now().Add(within)
	for !strings.Contains(o.String(), want) {
		if time.Now().After(deadline) {
			t.Fatalf("the run never printed %q:\n%s", want, o.String())
		}
		time.Sleep(50 * time.Millisecond)
	}
}

func (o *runOutput) session(t *testing.T) string {
	t.Helper()
	o.waitFor(t, ", container ", 2*time.Minute)
	m := runSessionRE.FindStringSubmatch(o.String())
	if m == nil {
		t.Fatalf("no session in:\n%s", o.String())
	}
	return m[1]
}

// TestRun drives the host binary `ironcurtain run` against a stack of the
// real images whose gateway gives each minted session its own workspace:
// two runs of the offline demo at once, one answered in its terminal (a
// pseudo-terminal) and one through the ops API; a run stopped with Ctrl-C
// while its escalation waits; and `--agent shell` whose git clone and
// push escalate and are approved in the terminal. Every run leaves no
// container, a revoked session and a verified audit chain.
func TestRun(t *testing.T) {
	s := runTopology(t)
	ctx := ctxFor(t, 15*time.Minute)
	bin, err := buildFixture(ctx, "ironcurtain.dev/gateway/cmd/ironcurtain", filepath.Join(t.TempDir(), "ironcurtain"))
	if err != nil {
		t.Fatal(err)
	}
	opsURL, err := s.OpsURL(ctx)
	if err != nil {
		t.Fatal(err)
	}
	cli, err := client.New(client.FromEnv)
	if err != nil {
		t.Fatal(err)
	}
	defer cli.Close()
	command := func(args ...string) *exec.Cmd {
		base := []string{"run", "--network", s.AgentNetwork(), "--gateway", "http://" + s.AgentHost() + ":8080", "--ops-url", opsURL, "--ttl", "20m"}
		c := exec.CommandContext(ctx, bin, append(base, args...)...)
		c.Env = append(os.Environ(), "IRONCURTAIN_OPERATOR_TOKEN="+s.Secrets.OperatorToken,
			"IC_AGENT_IMAGE="+envOr(envAgentImage, "ironcurtain/agent:dev"), "IC_AGENT_SHELL_IMAGE="+envOr(envShellImage, "ironcurtain/agent-shell:dev"))
		return c
	}
	// afterRun: no container of the session, the session revoked, the
	// chain verified.
	afterRun := func(t *testing.T, session string, minRecords int64) {
		t.Helper()
		res, err := cli.ContainerList(ctx, client.ContainerListOptions{All: true, Filters: client.Filters{}.Add("label", "dev.ironcurtain.run.session="+session)})
		if err != nil || len(res.Items) != 0 {
			t.Errorf("containers of %s left: %d %v", session, len(res.Items), err)
		}
		var st []struct {
			Revoked bool `json:"revoked"`
		}
		if err := s.QueryJSON(ctx, `SELECT revoked_at IS NOT NULL AS revoked FROM agent_sessions WHERE id = `+stack.Quote(session), &st); err != nil || len(st) != 1 || !st[0].Revoked {
			t.Errorf("session %s not revoked: %+v %v", session, st, err)
		}
		verifyChain(t, ctx, s, session, minRecords)
	}

	t.Run("two runs at once, answered in the terminal and through the ops API", func(t *testing.T) {
		task := "Run the IronCurtain offline demo"
		// A: in a pseudo-terminal, answered there.
		a := command(task)
		tty, err := pty.Start(a)
		if err != nil {
			t.Fatal(err)
		}
		defer tty.Close()
		outA := &runOutput{}
		go func() { _, _ = io.Copy(outA, tty) }()
		// B: plain pipes, answered through the ops API.
		b := command(task)
		outB := &runOutput{}
		b.Stdout, b.Stderr = outB, outB
		stdinB, err := b.StdinPipe()
		if err != nil {
			t.Fatal(err)
		}
		defer stdinB.Close()
		began := time.Now()
		if err := b.Start(); err != nil {
			t.Fatal(err)
		}
		sa, sb := outA.session(t), outB.session(t)
		if sa == sb {
			t.Fatalf("both runs got session %s", sa)
		}
		// The time to the first tool call, as the gateway records it.
		for {
			var n []struct {
				N int `json:"n"`
			}
			if err := s.QueryJSON(ctx, `SELECT count(*) AS n FROM tool_calls WHERE session_id = `+stack.Quote(sb), &n); err == nil && len(n) == 1 && n[0].N > 0 {
				t.Logf("ironcurtain run → first tool call: %s (cold: two runs at once)", time.Since(began).Round(10*time.Millisecond))
				break
			}
			if time.Since(began) > 2*time.Minute {
				t.Fatal("no tool call of run B")
			}
			time.Sleep(50 * time.Millisecond)
		}
		outA.waitFor(t, " waits: a = approve", 3*time.Minute)
		if _, err := io.WriteString(tty, "a\n"); err != nil {
			t.Fatal(err)
		}
		e, err := s.WaitPending(ctx, sb, "filesystem", "move_file", 3*time.Minute)
		if err != nil {
			t.Fatal(err)
		}
		outB.waitFor(t, "escalation "+e.ID+": filesystem__move_file", time.Minute)
		if _, err := s.Decide(ctx, e.ID, true, "e2e: approved through the ops API", ""); err != nil {
			t.Fatal(err)
		}
		if err := a.Wait(); err != nil {
			t.Fatalf("run A: %v\n%s", err, outA.String())
		}
		if err := b.Wait(); err != nil {
			t.Fatalf("run B: %v\n%s", err, outB.String())
		}
		for _, c := range []struct {
			out   *runOutput
			where string
		}{{outA, "(here)"}, {outB, "(elsewhere)"}} {
			o := c.out.String()
			for _, want := range []string{"approved by ", c.where, "the agent finished (exit code 0)", "session:     revoked"} {
				if !strings.Contains(o, want) {
					t.Errorf("run output lacks %q:\n%s", want, o)
				}
			}
		}
		// Each run worked in its own workspace: the demo's note was moved
		// there and only there.
		for _, own := range []string{sa, sb} {
			if _, err := s.GatewayFile(ctx, runWorkspaces+"/"+own+"/ironcurtain-demo.deleted"); err != nil {
				t.Errorf("session %s: the moved note is not in its workspace: %v", own, err)
			}
		}
		if ok, _ := s.WorkspaceExists(ctx, "ironcurtain-demo.txt"); ok {
			t.Error("a run wrote into the shared sandbox")
		}
		afterRun(t, sa, 4)
		afterRun(t, sb, 4)
	})

	t.Run("Ctrl-C while an escalation waits", func(t *testing.T) {
		c := command("Run the IronCurtain offline demo")
		out := &runOutput{}
		c.Stdout, c.Stderr = out, out
		in, err := c.StdinPipe()
		if err != nil {
			t.Fatal(err)
		}
		defer in.Close()
		if err := c.Start(); err != nil {
			t.Fatal(err)
		}
		sess := out.session(t)
		out.waitFor(t, " waits: a = approve", 3*time.Minute)
		if err := c.Process.Signal(syscall.SIGINT); err != nil {
			t.Fatal(err)
		}
		if err := c.Wait(); err != nil {
			t.Fatalf("run: %v\n%s", err, out.String())
		}
		if o := out.String(); !strings.Contains(o, "interrupted (Ctrl-C)") || !strings.Contains(o, "session:     revoked") {
			t.Errorf("output:\n%s", o)
		}
		afterRun(t, sess, 3)
	})

	t.Run("--agent shell: git push approved in the terminal", func(t *testing.T) {
		script := `set -e
cd /tmp
git clone http://` + s.AgentHost() + `:8080/git/` + stack.HostGit + "/" + stack.OwnerRepo + `.git app
cd app
git checkout -q -b run-feature
echo "from ironcurtain run" > run.txt
git add run.txt
git -c user.name=run -c user.email=run@e2e.test commit -q -m "From ironcurtain run"
git push origin run-feature
echo PUSHED`
		c := command("--agent", "shell", script)
		tty, err := pty.Start(c)
		if err != nil {
			t.Fatal(err)
		}
		defer tty.Close()
		out := &runOutput{}
		go func() { _, _ = io.Copy(out, tty) }()
		sess := out.session(t)
		// The clone (git fetch) and then the push escalate: approve each.
		answered := 0
		sc := time.NewTicker(200 * time.Millisecond)
		defer sc.Stop()
		deadline := time.Now().Add(5 * time.Minute)
		for answered < 2 && time.Now().Before(deadline) {
			<-sc.C
			if n := strings.Count(out.String(), " waits: a = approve"); n > answered {
				if _, err := io.WriteString(tty, "a\n"); err != nil {
					t.Fatal(err)
				}
				answered++
			}
		}
		if err := c.Wait(); err != nil {
			t.Fatalf("run: %v\n%s", err, out.String())
		}
		o := out.String()
		for _, want := range []string{"git__push", "PUSHED", "approved by ", "(here)", "the agent finished (exit code 0)"} {
			if !strings.Contains(o, want) {
				t.Errorf("output lacks %q:\n%s", want, o)
			}
		}
		if ref, err := s.RemoteRepoGit(ctx, stack.OwnerRepo, "rev-parse", "--verify", "refs/heads/run-feature"); err != nil || strings.TrimSpace(ref) == "" {
			t.Errorf("the pushed branch is not on the remote: %q %v", ref, err)
		}
		afterRun(t, sess, 2)
	})
}

// runTopology starts a stack of its own for TestRun: like the shared one,
// with session workspaces on.
func runTopology(t *testing.T) *stack.Stack {
	t.Helper()
	topology(t) // skips without Docker, builds the fixtures
	ctx, cancel := context.WithTimeout(context.Background(), 15*time.Minute)
	defer cancel()
	internet, probe := filepath.Join(fixtureDir, "internet"), filepath.Join(fixtureDir, "probe")
	gw := envOr(envGatewayImage, "ironcurtain/gateway:dev")
	s, err := stack.Start(ctx, stack.Options{
		GatewayImage:      gw,
		AgentImage:        envOr(envAgentImage, "ironcurtain/agent:dev"),
		AgentShellImage:   envOr(envShellImage, "ironcurtain/agent-shell:dev"),
		ShellSession:      shellSession,
		PostgresImage:     envOr(envPostgresImage, "ironcurtain/postgres-offline:15"),
		BaseImage:         envOr(envFixtureImage, gw),
		InternetBinary:    internet,
		ProbeBinary:       probe,
		ModelScript:       []byte(modelScript),
		Sessions:          sessions,
		SessionWorkspaces: runWorkspaces,
		Logf:              log.Printf,
	})
	if err != nil {
		t.Fatalf("the run topology: %v", err)
	}
	t.Cleanup(func() {
		ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
		defer cancel()
		if t.Failed() {
			dumpLogs(ctx, s)
		}
		s.Close(ctx)
	})
	return s
}
