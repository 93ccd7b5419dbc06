package e2e_test

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"log"
	"os"
	"os/exec"
	"path/filepath"
	"runtime"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/moby/moby/client"
	"github.com/testcontainers/testcontainers-go"
	tclog "github.com/testcontainers/testcontainers-go/log"

	"ironcurtain.dev/e2e/internal/stack"
	"ironcurtain.dev/e2e/internal/tcenv"
	"ironcurtain.dev/e2e/internal/testenv"
)

// Environment variables the suite reads. The Makefile's test-e2e sets the
// Postgres image; the others default to the images `make images` builds.
const (
	envGatewayImage  = "IC_GATEWAY_IMAGE"     // default ironcurtain/gateway:dev
	envAgentImage    = "IC_AGENT_IMAGE"       // default ironcurtain/agent:dev
	envShellImage    = "IC_AGENT_SHELL_IMAGE" // default ironcurtain/agent-shell:dev
	envPostgresImage = "IC_POSTGRES_IMAGE"    // default ironcurtain/postgres-offline:15
	envFixtureImage  = "IC_E2E_FIXTURE_IMAGE" // image the internet fixture runs in (default: the gateway image, which has git)
	envNoBuild       = "IC_E2E_NO_BUILD"      // "1": never run `make images` for missing images
	envVerbose       = "IC_E2E_VERBOSE"       // "1": show testcontainers' own progress lines
)

// sessions are the agent sessions of the scenarios (one each, so that every
// scenario's audit trail and hash chain stand alone).
var sessions = []string{"egress", "files", "git", "relay", "restart", "outage", consoleSession, shellSession, autoSession, replicaSession, replicaSession2}

// shellSession is the session of the agent-shell container (anyagent_test.go).
const shellSession = "anyagent"

// modelScript is the fake model's conversation (the relay scenario): one
// code step, then a final answer that quotes what the tool returned.
const modelScript = `{"steps": [
  {"say": "Let me look at the sandbox.", "code": "const dirs = filesystem.list_allowed_directories({});\nreturn \"relay-probe \" + dirs.replace(/\\s+/g, \" \");"},
  {"final": "relay final: {{last_result}}"}
]}`

var (
	setupOnce  sync.Once
	shared     *stack.Stack
	setupErr   error
	errNoDock  = errors.New("Docker is not available")
	fixtureDir string
)

func TestMain(m *testing.M) {
	// The reaper image cannot be pulled without a registry: the stack
	// removes what it creates, and ReapLeftovers what a killed run left
	// behind.
	tcenv.NoReaper()
	if os.Getenv(envVerbose) != "1" {
		tclog.SetDefault(tclog.NewNoopLogger())
	}
	code := m.Run()
	if shared != nil {
		ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
		if code != 0 {
			dumpLogs(ctx, shared)
		}
		shared.Close(ctx)
		cancel()
	}
	if fixtureDir != "" {
		_ = os.RemoveAll(fixtureDir)
	}
	closeConfined(code != 0)
	os.Exit(code)
}

// topology returns the shared stack, starting it on first use. Without
// Docker the test is skipped, except in CI (CI=true), where it fails.
func topology(t *testing.T) *stack.Stack {
	t.Helper()
	setupOnce.Do(func() {
		begin := time.Now()
		shared, setupErr = setup()
		log.Printf("e2e: topology setup took %s", time.Since(begin).Round(100*time.Millisecond))
	})
	if setupErr != nil {
		if errors.Is(setupErr, errNoDock) {
			testenv.Missing(t, "the e2e suite needs Docker: %v", setupErr)
		}
		t.Fatalf("e2e topology: %v", setupErr)
	}
	// A previous scenario may have left the gateway or Postgres down.
	ctx, cancel := context.WithTimeout(context.Background(), 3*time.Minute)
	defer cancel()
	if err := shared.WaitGatewayReady(ctx, 2*time.Minute); err != nil {
		t.Fatalf("gateway not ready at the start of %s: %v", t.Name(), err)
	}
	return shared
}

func setup() (*stack.Stack, error) {
	ctx, cancel := context.WithTimeout(context.Background(), 15*time.Minute)
	defer cancel()
	if err := dockerAvailable(ctx); err != nil {
		return nil, fmt.Errorf("%w: %v", errNoDock, err)
	}
	gw := envOr(envGatewayImage, "ironcurtain/gateway:dev")
	agent := envOr(envAgentImage, "ironcurtain/agent:dev")
	pg := envOr(envPostgresImage, "ironcurtain/postgres-offline:15")
	shell := envOr(envShellImage, "ironcurtain/agent-shell:dev")
	if err := ensureImages(ctx, gw, agent, pg, shell); err != nil {
		return nil, err
	}
	var err error
	if fixtureDir, err = os.MkdirTemp("", "ic-e2e-fixtures-"); err != nil {
		return nil, err
	}
	internet, err := buildFixture(ctx, "./cmd/internet", filepath.Join(fixtureDir, "internet"))
	if err != nil {
		return nil, err
	}
	probe, err := buildFixture(ctx, "./cmd/probe", filepath.Join(fixtureDir, "probe"))
	if err != nil {
		return nil, err
	}
	return stack.Start(ctx, stack.Options{
		GatewayImage:    gw,
		AgentImage:      agent,
		AgentShellImage: shell,
		ShellSession:    shellSession,
		PostgresImage:   pg,
		BaseImage:       envOr(envFixtureImage, gw),
		InternetBinary:  internet,
		ProbeBinary:     probe,
		ModelScript:     []byte(modelScript),
		Sessions:        sessions,
		Logf:            log.Printf,
	})
}

func dockerAvailable(ctx context.Context) error {
	cli, err := testcontainers.NewDockerClientWithOpts(ctx)
	if err != nil {
		return err
	}
	defer cli.Close()
	pctx, cancel := context.WithTimeout(ctx, 10*time.Second)
	defer cancel()
	_, err = cli.Ping(pctx, client.PingOptions{})
	return err
}

// ensureImages builds missing images with `make images` (the one place
// that knows how), unless IC_E2E_NO_BUILD=1.
func ensureImages(ctx context.Context, images ...string) error {
	missing := missingImages(ctx, images)
	if len(missing) == 0 {
		return nil
	}
	if os.Getenv(envNoBuild) == "1" {
		return fmt.Errorf("images %s are missing (run `make images`)", strings.Join(missing, ", "))
	}
	root, err := repoRoot()
	if err != nil {
		return err
	}
	log.Printf("e2e: images %s are missing; running `make images` in %s", strings.Join(missing, ", "), root)
	cmd := exec.CommandContext(ctx, "make", "-C", root, "images")
	cmd.Stdout, cmd.Stderr = os.Stderr, os.Stderr
	if err := cmd.Run(); err != nil {
		return fmt.Errorf("building images with make images: %w", err)
	}
	if missing = missingImages(ctx, images); len(missing) > 0 {
		return fmt.Errorf("images %s are still missing after `make images`", strings.Join(missing, ", "))
	}
	return nil
}

func missingImages(ctx context.Context, images []string) []string {
	cli, err := testcontainers.NewDockerClientWithOpts(ctx)
	if err != nil {
		return images
	}
	defer cli.Close()
	var missing []string
	for _, img := range images {
		if _, err := cli.ImageInspect(ctx, img); err != nil {
			missing = append(missing, img)
		}
	}
	return missing
}

// repoRoot is the directory holding go.work (the e2e module's parent).
func repoRoot() (string, error) {
	dir, err := os.Getwd()
	if err != nil {
		return "", err
	}
	for d := dir; ; d = filepath.Dir(d) {
		if _, err := os.Stat(filepath.Join(d, "go.work")); err == nil {
			return d, nil
		}
		if filepath.Dir(d) == d {
			return "", fmt.Errorf("no go.work above %s", dir)
		}
	}
}

// buildFixture builds a static Linux binary of a package of this module
// (containers cannot reach the Go module proxy, so nothing builds in them).
func buildFixture(ctx context.Context, pkg, out string) (string, error) {
	goBin, err := exec.LookPath("go")
	if err != nil {
		goBin = filepath.Join(runtime.GOROOT(), "bin", "go")
	}
	cmd := exec.CommandContext(ctx, goBin, "build", "-trimpath", "-o", out, pkg)
	cmd.Env = append(os.Environ(), "CGO_ENABLED=0", "GOOS=linux")
	if b, err := cmd.CombinedOutput(); err != nil {
		return "", fmt.Errorf("building %s: %w\n%s", pkg, err, b)
	}
	return out, nil
}

func envOr(name, def string) string {
	if v := os.Getenv(name); v != "" {
		return v
	}
	return def
}

// dumpLogs prints the containers' logs after a failed run.
func dumpLogs(ctx context.Context, s *stack.Stack) {
	for _, l := range []struct{ name, text string }{
		{"gateway", s.GatewayLogs(ctx)}, {"internet", s.InternetLogs(ctx)}, {"postgres", s.PostgresLogs(ctx)},
	} {
		fmt.Fprintf(os.Stderr, "===== %s logs (last 200 lines)\n%s\n", l.name, lastLines(l.text, 200))
	}
}

func lastLines(s string, n int) string {
	lines := strings.Split(strings.TrimRight(s, "\n"), "\n")
	if len(lines) > n {
		lines = lines[len(lines)-n:]
	}
	return strings.Join(lines, "\n")
}

// ctxFor is a context for one scenario.
func ctxFor(t *testing.T, d time.Duration) context.Context {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), d)
	t.Cleanup(cancel)
	return ctx
}

// verifyChain runs `ironcurtain audit verify --session s --json` in the
// gateway container and fails unless the session's chain is intact and
// holds at least minRecords records.
func verifyChain(t *testing.T, ctx context.Context, s *stack.Stack, session string, minRecords int64) {
	t.Helper()
	r, err := s.ExecGateway(ctx, "ironcurtain", "audit", "verify", "--session", session, "--json")
	if err != nil {
		t.Fatalf("audit verify: %v", err)
	}
	if r.Code != 0 {
		t.Fatalf("ironcurtain audit verify --session %s: %s", session, r)
	}
	var checks []struct {
		SessionID string
		Records   int64
		Head      string
		Break     *json.RawMessage
	}
	if err := json.Unmarshal([]byte(r.Stdout), &checks); err != nil {
		t.Fatalf("audit verify output %q: %v", r.Stdout, err)
	}
	if len(checks) != 1 || checks[0].SessionID != session || checks[0].Break != nil || checks[0].Records < minRecords {
		t.Fatalf("audit verify --session %s = %s, want one intact chain of at least %d records", session, r.Stdout, minRecords)
	}
	t.Logf("audit verify: session %q intact, %d records, head %s", session, checks[0].Records, checks[0].Head)
}

// toolCall is a tool_calls row with its outcome.
type toolCall struct {
	Seq          int64  `json:"seq"`
	Server       string `json:"server"`
	Tool         string `json:"tool"`
	Args         string `json:"args"`
	Decision     string `json:"decision"`
	Rule         string `json:"rule"`
	Reason       string `json:"reason"`
	EscalationID string `json:"escalation_id"`
	Outcome      string `json:"outcome"`
	Error        string `json:"error"`
}

func (c toolCall) String() string {
	return fmt.Sprintf("#%d %s__%s %s (%s) → %s %s", c.Seq, c.Server, c.Tool, c.Decision, c.Rule, c.Outcome, c.Args)
}

// toolCalls returns a session's tool calls in chain order with their
// outcomes ("" when none was recorded).
func toolCalls(t *testing.T, ctx context.Context, s *stack.Stack, session string) []toolCall {
	t.Helper()
	var out []toolCall
	err := s.QueryJSON(ctx, `SELECT c.seq, c.server, c.tool, c.args, c.decision, c.rule, c.reason, c.escalation_id,
	       coalesce(o.status, '') AS outcome, coalesce(o.error, '') AS error
	FROM tool_calls c LEFT JOIN tool_call_outcomes o USING (call_id)
	WHERE c.session_id = `+stack.Quote(session)+` ORDER BY c.seq`, &out)
	if err != nil {
		t.Fatalf("reading tool_calls: %v", err)
	}
	return out
}

// runApproving runs a transcript for session in the background and, for
// each server__tool in approve (in order), waits for its pending
// escalation and approves it as the operator: through the ops API, or with
// the `ironcurtain escalations` CLI for entries written "cli:server__tool".
// It returns the run's result and the approved escalations.
func runApproving(t *testing.T, ctx context.Context, s *stack.Stack, session, name, transcript string, approve ...string) (stack.ExecResult, []stack.Escalation) {
	t.Helper()
	run := startTranscript(ctx, s, session, name, transcript, "e2e scenario "+name, "-v")
	var approved []stack.Escalation
	var seen []string
	for _, st := range approve {
		st, cli := strings.CutPrefix(st, "cli:")
		server, tool, _ := strings.Cut(st, "__")
		e := run.pending(t, ctx, server, tool, 3*time.Minute, seen...)
		seen = append(seen, e.ID)
		decide := func() (stack.Escalation, error) { return s.Decide(ctx, e.ID, true, "e2e operator approves "+st, "") }
		if cli {
			decide = func() (stack.Escalation, error) {
				return s.ApproveWithCLI(ctx, e.ID, "e2e operator approves "+st+" with the CLI")
			}
		}
		d, err := decide()
		if err != nil {
			t.Fatal(err)
		}
		if d.ID != e.ID || d.Status != "approved" || d.DecidedBy == "" {
			t.Fatalf("approving %s answered %+v", e.ID, d)
		}
		t.Logf("approved escalation %s (cli %v): %s %s (%s)", d.ID, cli, st, e.Args, e.Reason)
		approved = append(approved, d)
	}
	return run.finish(t, ctx, 0), approved
}
