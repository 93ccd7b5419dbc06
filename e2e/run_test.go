package e2e_test

import (
	"archive/tar"
	"bytes"
	"context"
	"io"
	"log"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"slices"
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
	// at is when each write arrived, by the output's length after it.
	at []writeAt
}

type writeAt struct {
	end  int
	when time.Time
}

func (o *runOutput) Write(p []byte) (int, error) {
	o.mu.Lock()
	defer o.mu.Unlock()
	n, err := o.b.Write(p)
	o.at = append(o.at, writeAt{o.b.Len(), time.Now()})
	return n, err
}

// seenAt is when sub was first complete in the output (zero: not yet).
func (o *runOutput) seenAt(sub string) time.Time {
	o.mu.Lock()
	defer o.mu.Unlock()
	i := strings.Index(o.b.String(), sub)
	if i < 0 {
		return time.Time{}
	}
	for _, w := range o.at {
		if w.end >= i+len(sub) {
			return w.when
		}
	}
	return time.Time{}
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
	s, hostDir := runTopology(t)
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
	// The runs write their session tokens below runTmp (TMPDIR).
	runTmp := t.TempDir()
	command := func(args ...string) *exec.Cmd {
		base := []string{"run", "--network", s.AgentNetwork(), "--gateway", "http://" + s.AgentHost() + ":8080", "--ops-url", opsURL, "--ttl", "20m",
			"--workspaces-dir", hostDir}
		c := exec.CommandContext(ctx, bin, append(base, args...)...)
		c.Env = append(os.Environ(), "TMPDIR="+runTmp, "IRONCURTAIN_OPERATOR_TOKEN="+s.Secrets.OperatorToken,
			"IC_AGENT_IMAGE="+envOr(envAgentImage, "ironcurtain/agent:dev"), "IC_AGENT_SHELL_IMAGE="+envOr(envShellImage, "ironcurtain/agent-shell:dev"))
		return c
	}
	// afterRun: no container of the session, no token file, the session
	// revoked, the chain verified.
	afterRun := func(t *testing.T, session string, minRecords int64) {
		t.Helper()
		if left, err := os.ReadDir(runTmp); err != nil || len(left) != 0 {
			t.Errorf("token directories left: %v %v", left, err)
		}
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
		seesOnlyItsOwn(t, ctx, cli, sa, hostDir)
		if _, err := io.WriteString(tty, "a\n"); err != nil {
			t.Fatal(err)
		}
		e, err := s.WaitPending(ctx, sb, "filesystem", "move_file", 3*time.Minute)
		if err != nil {
			t.Fatal(err)
		}
		outB.waitFor(t, "escalation "+e.ID+": filesystem__move_file", time.Minute)
		seesOnlyItsOwn(t, ctx, cli, sb, hostDir)
		logShownAfter(t, ctx, s, outB, e.ID)
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
// with session workspaces on, their root a host directory (returned) as in
// the compose stack.
func runTopology(t *testing.T) (*stack.Stack, string) {
	t.Helper()
	topology(t) // skips without Docker, builds the fixtures
	hostDir := runWorkspacesHostDir(t)
	ctx, cancel := context.WithTimeout(context.Background(), 15*time.Minute)
	defer cancel()
	internet, probe := filepath.Join(fixtureDir, "internet"), filepath.Join(fixtureDir, "probe")
	gw := envOr(envGatewayImage, "ironcurtain/gateway:dev")
	s, err := stack.Start(ctx, stack.Options{
		GatewayImage:             gw,
		AgentImage:               envOr(envAgentImage, "ironcurtain/agent:dev"),
		AgentShellImage:          envOr(envShellImage, "ironcurtain/agent-shell:dev"),
		ShellSession:             shellSession,
		PostgresImage:            envOr(envPostgresImage, "ironcurtain/postgres-offline:15"),
		BaseImage:                envOr(envFixtureImage, gw),
		InternetBinary:           internet,
		ProbeBinary:              probe,
		ModelScript:              []byte(modelScript),
		Sessions:                 sessions,
		SessionWorkspaces:        runWorkspaces,
		SessionWorkspacesHostDir: hostDir,
		Logf:                     log.Printf,
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
	return s, hostDir
}

// runWorkspacesHostDir makes the host directory of the gateway's session
// workspaces, as compose/stack.sh does: owned by the gateway's uid 10001,
// mode 0711; without the right to chown, mode 0777 inside a 0700 directory
// (no other user of the host gets in either way).
func runWorkspacesHostDir(t *testing.T) string {
	t.Helper()
	parent, err := os.MkdirTemp("", "ic-e2e-run-")
	if err != nil {
		t.Fatal(err)
	}
	// The gateway's files in it are uid 10001's: removed best-effort.
	t.Cleanup(func() { _ = os.RemoveAll(parent) })
	dir := filepath.Join(parent, "workspaces")
	if err := os.Mkdir(dir, 0o711); err != nil {
		t.Fatal(err)
	}
	if err := os.Chown(dir, 10001, 10001); err != nil {
		if err := os.Chmod(dir, 0o777); err != nil {
			t.Fatal(err)
		}
	} else if err := os.Chmod(dir, 0o711); err != nil {
		t.Fatal(err)
	}
	return dir
}

// seesOnlyItsOwn checks the run container of session while it runs: its
// /workspace is its session's directory and nothing else (the mounts, and
// what the container lists there is what that directory holds), read-only;
// its token is a read-only file and in no part of its configuration.
func seesOnlyItsOwn(t *testing.T, ctx context.Context, cli *client.Client, session, hostDir string) {
	t.Helper()
	res, err := cli.ContainerList(ctx, client.ContainerListOptions{Filters: client.Filters{}.Add("label", "dev.ironcurtain.run.session="+session)})
	if err != nil || len(res.Items) != 1 {
		t.Fatalf("the run container of %s: %d %v", session, len(res.Items), err)
	}
	in, err := cli.ContainerInspect(ctx, res.Items[0].ID, client.ContainerInspectOptions{})
	if err != nil {
		t.Fatal(err)
	}
	mounts := map[string]string{}
	for _, m := range in.Container.Mounts {
		if m.RW {
			t.Errorf("%s: %s is mounted writable", session, m.Destination)
		}
		mounts[m.Destination] = m.Source
	}
	own := filepath.Join(hostDir, session)
	tokenDir := in.Container.Config.Labels["dev.ironcurtain.run.tokendir"]
	if len(mounts) != 2 || mounts["/workspace"] != own || mounts["/run/secrets/agent_token"] != filepath.Join(tokenDir, "agent-token") {
		t.Errorf("%s mounts %v, want only its workspace %s and its token file", session, mounts, own)
	}
	for _, e := range in.Container.Config.Env {
		k, v, _ := strings.Cut(e, "=")
		if k == "IRONCURTAIN_AGENT_TOKEN" || strings.Contains(v, "@") || strings.Contains(v, "icsess_") {
			t.Errorf("%s: a token in the environment (%s)", session, k)
		}
	}
	want, err := os.ReadDir(own)
	if err != nil {
		t.Fatal(err)
	}
	cp, err := cli.CopyFromContainer(ctx, res.Items[0].ID, client.CopyFromContainerOptions{SourcePath: "/workspace/."})
	if err != nil {
		t.Fatal(err)
	}
	defer cp.Content.Close()
	var seen []string
	tr := tar.NewReader(cp.Content)
	for {
		h, err := tr.Next()
		if err != nil {
			break
		}
		if name := strings.Trim(strings.TrimPrefix(h.Name, "."), "/"); name != "" && !strings.Contains(name, "/") {
			seen = append(seen, name)
		}
	}
	var names []string
	for _, d := range want {
		names = append(names, d.Name())
	}
	slices.Sort(seen)
	if !slices.Equal(seen, names) || len(names) == 0 {
		t.Errorf("%s lists %v in /workspace, its workspace holds %v", session, seen, names)
	}
}

// logShownAfter logs how long after the gateway opened escalation id the
// run's terminal showed it (the ops API's event stream; the database's
// clock is the host's).
func logShownAfter(t *testing.T, ctx context.Context, s *stack.Stack, out *runOutput, id string) {
	t.Helper()
	var row []struct {
		Created float64 `json:"created"`
	}
	if err := s.QueryJSON(ctx, `SELECT extract(epoch FROM created_at)::float8 AS created FROM escalations WHERE id = `+stack.Quote(id), &row); err != nil || len(row) != 1 {
		t.Errorf("escalation %s: %v", id, err)
		return
	}
	created := time.UnixMicro(int64(row[0].Created * 1e6))
	t.Logf("escalation %s opened → shown in the run's terminal: %s", id, out.seenAt("escalation "+id+": ").Sub(created).Round(time.Millisecond))
}
