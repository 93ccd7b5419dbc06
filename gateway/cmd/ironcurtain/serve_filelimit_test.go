package main

import (
	"bufio"
	"context"
	"fmt"
	"net"
	"net/http"
	"os"
	"os/exec"
	"os/signal"
	"path/filepath"
	"strconv"
	"strings"
	"syscall"
	"testing"
	"time"

	"ironcurtain.dev/gateway/internal/store/pgtest"
)

// The file-limit test runs the gateway in a child process (this test binary, re-run) whose
// RLIMIT_NOFILE is lowered, soft and hard, before serve starts: the flood's client ends stay
// in the parent, so only the gateway's own descriptors count against its limit.
const (
	fileLimitChildEnv = "IRONCURTAIN_TEST_FILE_LIMIT_CHILD" // the limit to run serve under
	fileLimitConfig   = "IRONCURTAIN_TEST_FILE_LIMIT_CONFIG"
	childFileLimit    = 512
)

func init() {
	if os.Getenv(fileLimitChildEnv) == "" {
		return
	}
	os.Exit(fileLimitChild())
}

func fileLimitChild() int {
	n, err := strconv.ParseUint(os.Getenv(fileLimitChildEnv), 10, 64)
	if err != nil {
		fmt.Fprintln(os.Stderr, "file-limit child:", err)
		return 2
	}
	if err := syscall.Setrlimit(syscall.RLIMIT_NOFILE, &syscall.Rlimit{Cur: n, Max: n}); err != nil {
		fmt.Fprintln(os.Stderr, "file-limit child: lowering RLIMIT_NOFILE:", err)
		return 2
	}
	ctx, stop := signal.NotifyContext(context.Background(), syscall.SIGTERM)
	defer stop()
	return run(ctx, env{args: []string{"serve", "--config", os.Getenv(fileLimitConfig)}, getenv: os.Getenv,
		stdin: os.Stdin, stdout: os.Stdout, stderr: os.Stderr})
}

// fileLog is the child's log file.
type fileLog struct{ path string }

func (f fileLog) String() string {
	b, _ := os.ReadFile(f.path)
	return string(b)
}

// floodIdle opens n connections to addr that never send a byte and keeps them open until the
// test ends. The gateway may close some (they give way to newer ones): that is the point.
func floodIdle(t *testing.T, addr string, n int) {
	t.Helper()
	var conns []net.Conn
	t.Cleanup(func() {
		for _, c := range conns {
			_ = c.Close()
		}
	})
	failed := 0
	for i := 0; i < n; i++ {
		c, err := net.DialTimeout("tcp", addr, 2*time.Second)
		if err != nil {
			failed++
			continue
		}
		conns = append(conns, c)
	}
	t.Logf("flood of %s: %d connections open, %d dials failed", addr, len(conns), failed)
}

// TestServeFileLimitKeepsOpsAndAgent: a gateway whose open-file limit is 512 (soft and hard,
// so raising it does nothing) takes 1,100 unauthenticated idle connections on the agent port
// and 1,100 on the proxy port, more than its whole limit, and still answers the operator on
// the ops port, an authenticated agent's tool call and an authenticated CONNECT within
// seconds: its connection caps were derived from the limit, with a reserve for the ops
// listener and Postgres, and idle strangers give way first.
func TestServeFileLimitKeepsOpsAndAgent(t *testing.T) {
	db := pgtest.New(t, pgtest.Migrated())
	sandbox := t.TempDir()
	policyDir := sandboxPolicy(t, sandbox)
	if err := os.WriteFile(filepath.Join(sandbox, "a.txt"), []byte("note\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	dir := t.TempDir()
	g := servedGateway{api: freeAddr(t), proxy: freeAddr(t), ops: freeAddr(t)}
	cfg := fmt.Sprintf("sandbox: %s\npolicy_dir: %s\nservers:\n  fetch:\n    allowed_domains: [example.com]\nagent:\n  listen: %s\negress:\n  listen: %s\nops:\n  listen: %s\ngit:\n  mirror_dir: %s\naudit:\n  spool_dir: %s\n",
		sandbox, policyDir, g.api, g.proxy, g.ops, filepath.Join(dir, "mirror"), filepath.Join(dir, "spool"))
	cfgPath := filepath.Join(dir, "gateway.yaml")
	if err := os.WriteFile(cfgPath, []byte(cfg), 0o600); err != nil {
		t.Fatal(err)
	}
	self, err := os.Executable()
	if err != nil {
		t.Fatal(err)
	}
	cmd := exec.Command(self, "-test.run=^$")
	cmd.Env = []string{
		fileLimitChildEnv + "=" + strconv.Itoa(childFileLimit),
		fileLimitConfig + "=" + cfgPath,
		"IRONCURTAIN_DATABASE_URL=" + db.DSN,
		"IRONCURTAIN_AGENT_TOKEN=" + testAgentToken,
		"IRONCURTAIN_OPERATOR_TOKEN=" + testOperatorToken,
		"PATH=" + os.Getenv("PATH"),
	}
	// The log goes to a file: a pipe would keep Wait waiting for any grandchild holding it.
	logs := fileLog{path: filepath.Join(dir, "gateway.log")}
	lf, err := os.Create(logs.path)
	if err != nil {
		t.Fatal(err)
	}
	defer lf.Close()
	cmd.Stdout, cmd.Stderr = lf, lf
	cmd.SysProcAttr = &syscall.SysProcAttr{Setpgid: true} // its children are stopped with it
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	exited := make(chan struct{}) // closed when the child has exited
	var waitErr error
	go func() { waitErr = cmd.Wait(); close(exited) }()
	t.Cleanup(func() {
		_ = cmd.Process.Signal(syscall.SIGTERM)
		select {
		case <-exited:
		case <-time.After(20 * time.Second):
			_ = syscall.Kill(-cmd.Process.Pid, syscall.SIGKILL)
			<-exited
		}
		if t.Failed() {
			t.Logf("gateway log:\n%s", logs.String())
		}
	})
	if err := waitHealthy(g.api, exited); err != nil {
		select {
		case <-exited:
			err = fmt.Errorf("%w (%v)", err, waitErr)
		default:
		}
		t.Fatal(err)
	}
	if !strings.Contains(logs.String(), `"msg":"open-file plan"`) {
		t.Fatalf("serve did not log its open-file plan:\n%s", logs.String())
	}

	floodIdle(t, g.api, 1100)
	floodIdle(t, g.proxy, 1100)
	time.Sleep(200 * time.Millisecond) // let the listeners accept and evict

	client := &http.Client{Timeout: 5 * time.Second, Transport: &http.Transport{Proxy: nil}}
	// The operator: /readyz (Postgres reachable) and /metrics.
	start := time.Now()
	resp, err := client.Get("http://" + g.ops + "/readyz")
	if err != nil {
		t.Fatalf("ops /readyz during the flood: %v", err)
	}
	resp.Body.Close()
	if resp.StatusCode != http.StatusOK {
		t.Fatalf("ops /readyz during the flood: %s", resp.Status)
	}
	t.Logf("ops /readyz during the flood: %v", time.Since(start))

	// An authenticated agent on a fresh connection: a tool call that is recorded in Postgres.
	start = time.Now()
	agent := connectAgent(t, g.api)
	r := <-callAsync(agent, "filesystem__read_file", map[string]any{"path": filepath.Join(sandbox, "a.txt")})
	if r.err != nil || r.isError || !strings.Contains(r.text, "note") {
		t.Fatalf("tool call during the flood: %+v", r)
	}
	t.Logf("agent connect and tool call during the flood: %v", time.Since(start))

	// An authenticated CONNECT on a fresh proxy connection is decided (example.com is not
	// in this gateway's allowlist: a 403 from the policy, not a hang or a reset).
	start = time.Now()
	c, err := net.DialTimeout("tcp", g.proxy, 5*time.Second)
	if err != nil {
		t.Fatalf("proxy dial during the flood: %v", err)
	}
	defer c.Close()
	_ = c.SetDeadline(time.Now().Add(5 * time.Second))
	fmt.Fprintf(c, "CONNECT example.com:443 HTTP/1.1\r\nHost: example.com:443\r\nProxy-Authorization: Bearer %s\r\n\r\n", testAgentToken)
	presp, err := http.ReadResponse(bufio.NewReader(c), &http.Request{Method: http.MethodConnect})
	if err != nil {
		t.Fatalf("CONNECT during the flood: %v", err)
	}
	presp.Body.Close()
	if presp.StatusCode != http.StatusForbidden || presp.Header.Get("X-Ironcurtain-Rule") == "" {
		t.Fatalf("CONNECT during the flood: %s (rule %q); want a policy refusal", presp.Status, presp.Header.Get("X-Ironcurtain-Rule"))
	}
	t.Logf("authenticated CONNECT during the flood: %v", time.Since(start))
	if n := strings.Count(logs.String(), "too many open files"); n > 0 {
		t.Errorf("the gateway ran out of descriptors %d times", n)
	}
}

// waitHealthy waits for the agent API's /healthz; it fails when the gateway exits first.
func waitHealthy(api string, exited <-chan struct{}) error {
	deadline := time.Now().Add(30 * time.Second)
	for {
		select {
		case <-exited:
			return fmt.Errorf("the gateway exited before answering")
		default:
		}
		resp, err := http.Get("http://" + api + "/healthz")
		if err == nil {
			resp.Body.Close()
			if resp.StatusCode == http.StatusOK {
				return nil
			}
		}
		if time.Now().After(deadline) {
			return fmt.Errorf("the gateway did not answer /healthz: %w", err)
		}
		time.Sleep(100 * time.Millisecond)
	}
}
