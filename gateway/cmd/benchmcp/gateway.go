package main

import (
	"context"
	"crypto/rand"
	"encoding/hex"
	"errors"
	"fmt"
	"net"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"syscall"
	"time"

	"ironcurtain.dev/gateway/internal/store/pgtest"
)

// gateway is one running `ironcurtain serve`.
type gateway struct {
	cmd     *exec.Cmd
	api     string // host:port of the agent API
	sandbox string
	tokens  []string // tokens[i] is session s<i>'s
	logPath string
	exited  chan struct{} // closed when the process has exited
}

// result is one run: one binary, n sessions.
type result struct {
	bin            string
	sessions       int
	calls          int // measured successful calls
	rate           float64
	p50, p99       time.Duration
	errors         int   // failed calls (transport or tool error), warm-up included
	peakRSS        int64 // VmHWM of the gateway, bytes
	cpuPerCall     float64
	unaudited      int // successful calls without a committed allow decision
	missingOutcome int // allow decisions of successful calls without an outcome
}

// runOne starts a binary on a fresh database, drives it and verifies the
// audit trail.
func runOne(ctx context.Context, srv *pgtest.Server, o options, b namedBin, n, rep int) (result, error) {
	label := fmt.Sprintf("bench_%s_n%d_r%d", b.name, n, rep)
	dctx, cancel := context.WithTimeout(ctx, time.Minute)
	dbName, dsn, err := srv.NewDatabase(dctx, label)
	cancel()
	if err != nil {
		return result{}, fmt.Errorf("creating database: %w", err)
	}
	if !o.keep {
		defer func() {
			dctx, cancel := context.WithTimeout(context.Background(), time.Minute)
			defer cancel()
			_ = srv.DropDatabase(dctx, dbName)
		}()
	}
	dir := filepath.Join(o.dir, label)
	if err := os.MkdirAll(dir, 0o755); err != nil {
		return result{}, fmt.Errorf("run directory: %w", err)
	}
	if out, err := migrate(ctx, b.path, dsn); err != nil {
		return result{}, fmt.Errorf("migrate up: %w\n%s", err, out)
	}
	g, err := startGateway(ctx, b.path, dir, dsn, n)
	if err != nil {
		return result{}, err
	}
	defer g.stop()
	res, calls, err := drive(ctx, g, n, o.warmup, o.duration)
	if err != nil {
		return result{}, fmt.Errorf("%w (gateway log: %s)", err, g.logPath)
	}
	res.bin, res.sessions = b.name, n
	if err := g.stop(); err != nil {
		return result{}, fmt.Errorf("stopping the gateway: %w (log: %s)", err, g.logPath)
	}
	vctx, cancel := context.WithTimeout(ctx, 5*time.Minute)
	defer cancel()
	res.unaudited, res.missingOutcome, err = verify(vctx, dsn, calls)
	if err != nil {
		return result{}, fmt.Errorf("verifying the audit trail: %w", err)
	}
	return res, nil
}

func migrate(ctx context.Context, bin, dsn string) ([]byte, error) {
	ctx, cancel := context.WithTimeout(ctx, 2*time.Minute)
	defer cancel()
	cmd := exec.CommandContext(ctx, bin, "migrate", "up")
	cmd.Env = []string{"IRONCURTAIN_DATABASE_URL=" + dsn, "PATH=" + os.Getenv("PATH"), "HOME=" + os.Getenv("HOME")}
	return cmd.CombinedOutput()
}

// startGateway writes a gateway.yaml with n static sessions (s0…), starts
// serve and waits until the agent API answers.
func startGateway(ctx context.Context, bin, dir, dsn string, n int) (*gateway, error) {
	sandbox := filepath.Join(dir, "workspace")
	tokDir := filepath.Join(dir, "tokens")
	for _, d := range []string{sandbox, tokDir} {
		if err := os.MkdirAll(d, 0o700); err != nil {
			return nil, fmt.Errorf("run directory: %w", err)
		}
	}
	g := &gateway{sandbox: sandbox, logPath: filepath.Join(dir, "gateway.log")}
	var files strings.Builder
	for i := range n {
		tok := randomToken()
		p := filepath.Join(tokDir, "s"+strconv.Itoa(i))
		if err := os.WriteFile(p, []byte(tok+"\n"), 0o600); err != nil {
			return nil, fmt.Errorf("token file: %w", err)
		}
		g.tokens = append(g.tokens, tok)
		fmt.Fprintf(&files, "    s%d: %s\n", i, strconv.Quote(p))
	}
	addrs, err := freeAddrs(3)
	if err != nil {
		return nil, err
	}
	g.api = addrs[0]
	policyDir, err := policyDir()
	if err != nil {
		return nil, err
	}
	// The shipped policy; the one benchmark-only setting is the loop
	// breaker's limits (as in the e2e suite): each session writes far
	// faster than any agent (its work per call is unchanged).
	cfg := fmt.Sprintf(`sandbox: %s
policy_dir: %s
servers:
  fetch:
    allowed_domains: [example.com]
agent:
  listen: %s
  token_files:
%segress:
  listen: %s
  allowed_hosts: [example.com]
ops:
  listen: %s
git:
  mirror_dir: %s
audit:
  spool_dir: %s
loop_breaker:
  calls_per_minute: 1000000
  identical_calls: 100000
`, strconv.Quote(sandbox), strconv.Quote(policyDir), addrs[0], files.String(), addrs[1], addrs[2],
		strconv.Quote(filepath.Join(dir, "mirror")), strconv.Quote(filepath.Join(dir, "spool")))
	cfgPath := filepath.Join(dir, "gateway.yaml")
	if err := os.WriteFile(cfgPath, []byte(cfg), 0o600); err != nil {
		return nil, fmt.Errorf("writing gateway.yaml: %w", err)
	}
	logf, err := os.Create(g.logPath)
	if err != nil {
		return nil, fmt.Errorf("gateway log: %w", err)
	}
	cmd := exec.Command(bin, "serve", "-config", cfgPath)
	cmd.Env = []string{
		"IRONCURTAIN_DATABASE_URL=" + dsn,
		"IRONCURTAIN_OPERATOR_TOKEN=" + randomToken(),
		"PATH=" + os.Getenv("PATH"), "HOME=" + os.Getenv("HOME"),
	}
	cmd.Stdout, cmd.Stderr = logf, logf
	if err := cmd.Start(); err != nil {
		logf.Close()
		return nil, fmt.Errorf("starting %s: %w", bin, err)
	}
	logf.Close()
	g.cmd = cmd
	exited := make(chan struct{})
	go func() { _ = cmd.Wait(); close(exited) }()
	g.exited = exited
	deadline := time.Now().Add(60 * time.Second)
	for {
		resp, err := http.Get("http://" + g.api + "/healthz")
		if err == nil {
			resp.Body.Close()
			if resp.StatusCode == http.StatusOK {
				break
			}
		}
		select {
		case <-exited:
			return nil, fmt.Errorf("the gateway exited at start (log: %s)", g.logPath)
		case <-ctx.Done():
			g.stop()
			return nil, ctx.Err()
		case <-time.After(100 * time.Millisecond):
		}
		if time.Now().After(deadline) {
			g.stop()
			return nil, fmt.Errorf("the gateway did not answer within 60s (log: %s)", g.logPath)
		}
	}
	return g, nil
}

// stop ends the gateway with SIGTERM (SIGKILL after 30s); a second call is
// a no-op.
func (g *gateway) stop() error {
	if g.cmd == nil || g.cmd.Process == nil {
		return nil
	}
	p := g.cmd.Process
	g.cmd = nil
	_ = p.Signal(syscall.SIGTERM)
	select {
	case <-g.exited:
		return nil
	case <-time.After(30 * time.Second):
		_ = p.Kill()
		<-g.exited
		return errors.New("did not stop within 30s of SIGTERM")
	}
}

func randomToken() string {
	b := make([]byte, 24)
	_, _ = rand.Read(b)
	return hex.EncodeToString(b)
}

func freeAddrs(n int) ([]string, error) {
	var lns []net.Listener
	defer func() {
		for _, l := range lns {
			l.Close()
		}
	}()
	var out []string
	for range n {
		ln, err := net.Listen("tcp", "127.0.0.1:0")
		for try := 0; err != nil && try < 20; try++ { // ports run short while other benchmarks hold many
			time.Sleep(500 * time.Millisecond)
			ln, err = net.Listen("tcp", "127.0.0.1:0")
		}
		if err != nil {
			return nil, fmt.Errorf("choosing a port: %w", err)
		}
		lns = append(lns, ln)
		out = append(out, ln.Addr().String())
	}
	return out, nil
}

// policyDir is the shipped base policy of the tree benchmcp runs in (both
// binaries get the same policy files).
func policyDir() (string, error) {
	if d := os.Getenv("BENCHMCP_POLICY_DIR"); d != "" {
		return filepath.Abs(d)
	}
	for _, d := range []string{"gateway/policies/base", "policies/base", "../../policies/base"} {
		if _, err := os.Stat(filepath.Join(d, "compiled-policy.json")); err == nil {
			return filepath.Abs(d)
		}
	}
	return "", errors.New("the base policy directory is not found: run from the repository root or set BENCHMCP_POLICY_DIR")
}
