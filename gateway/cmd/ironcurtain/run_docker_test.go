package main

import (
	"archive/tar"
	"bytes"
	"cmp"
	"context"
	"crypto/rand"
	"encoding/hex"
	"fmt"
	"io"
	"net/http"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/moby/moby/api/types/build"
	"github.com/moby/moby/client"

	"ironcurtain.dev/gateway/internal/ops/opsapi"
	"ironcurtain.dev/gateway/internal/runcmd"
	"ironcurtain.dev/gateway/internal/testenv"
)

// runTestAgentEnv makes this test binary the stand-in agent of
// TestRunDocker when it runs in the container (set by the image).
const runTestAgentEnv = "IC_RUN_TEST_AGENT"

// runTestAgent is the stand-in agent: os.Args = [bin, "run", task] where
// task is "work SANDBOX" (write a note, check it in the read-only
// /workspace mount, move it: the move escalates) or "sleep".
func runTestAgent() int {
	if len(os.Args) < 3 {
		fmt.Fprintln(os.Stderr, "test agent: want run TASK")
		return 2
	}
	verb, sandbox, _ := strings.Cut(os.Args[2], " ")
	if verb == "sleep" {
		fmt.Println("test agent: sleeping")
		time.Sleep(5 * time.Minute)
		return 0
	}
	// The token is a file (IRONCURTAIN_AGENT_TOKEN_FILE), never in the
	// environment.
	if os.Getenv("IRONCURTAIN_AGENT_TOKEN") != "" || os.Getenv("IRONCURTAIN_AGENT_TOKEN_FILE") != runcmd.TokenPath {
		fmt.Fprintln(os.Stderr, "test agent: the token is not (only) a file")
		return 1
	}
	token, err := os.ReadFile(runcmd.TokenPath)
	if err != nil {
		fmt.Fprintln(os.Stderr, "test agent:", err)
		return 1
	}
	c := &agentMCP{url: os.Getenv("IRONCURTAIN_MCP_URL"), token: strings.TrimSpace(string(token))}
	if err := c.init(); err != nil {
		fmt.Fprintln(os.Stderr, "test agent:", err)
		return 1
	}
	fmt.Println("test agent: writing")
	if out, err := c.call("filesystem__write_file", fmt.Sprintf(`{"path":%q,"content":"hello from the run"}`, sandbox+"/note.txt")); err != nil {
		fmt.Fprintln(os.Stderr, "test agent: write:", err, out)
		return 1
	}
	b, err := os.ReadFile("/workspace/note.txt")
	fmt.Printf("test agent: /workspace/note.txt reads %q (%v)\n", b, err)
	if err := os.WriteFile("/workspace/direct.txt", []byte("x"), 0o644); err == nil {
		fmt.Println("test agent: /workspace is WRITABLE")
	}
	out, err := c.call("filesystem__move_file", fmt.Sprintf(`{"source":%q,"destination":%q}`, sandbox+"/note.txt", sandbox+"/moved.txt"))
	fmt.Printf("test agent: move: %v %s\n", err, out)
	if err != nil {
		return 1
	}
	return 0
}

type agentMCP struct{ url, token, sid string }

func (c *agentMCP) post(body string) (string, error) {
	req, err := http.NewRequest("POST", c.url, strings.NewReader(body))
	if err != nil {
		return "", err
	}
	req.Header.Set("Authorization", "Bearer "+c.token)
	req.Header.Set("Content-Type", "application/json")
	req.Header.Set("Accept", "application/json, text/event-stream")
	if c.sid != "" {
		req.Header.Set("Mcp-Session-Id", c.sid)
	}
	resp, err := (&http.Client{Timeout: 2 * time.Minute}).Do(req)
	if err != nil {
		return "", err
	}
	defer resp.Body.Close()
	b, _ := io.ReadAll(resp.Body)
	if c.sid == "" {
		c.sid = resp.Header.Get("Mcp-Session-Id")
	}
	if resp.StatusCode >= 300 {
		return string(b), fmt.Errorf("status %d", resp.StatusCode)
	}
	return string(b), nil
}

func (c *agentMCP) init() error {
	if _, err := c.post(`{"jsonrpc":"2.0","id":1,"method":"initialize","params":{"protocolVersion":"2025-06-18","capabilities":{},"clientInfo":{"name":"t","version":"1"}}}`); err != nil {
		return err
	}
	_, err := c.post(`{"jsonrpc":"2.0","method":"notifications/initialized"}`)
	return err
}

func (c *agentMCP) call(tool, args string) (string, error) {
	out, err := c.post(fmt.Sprintf(`{"jsonrpc":"2.0","id":2,"method":"tools/call","params":{"name":%q,"arguments":%s}}`, tool, args))
	if err == nil && strings.Contains(out, `"isError":true`) {
		err = fmt.Errorf("tool error")
	}
	return out, err
}

var runBaseImage = cmp.Or(os.Getenv("IC_BASE_IMAGE"), "ironcurtain/base-offline:bookworm")

// runDockerOrSkip returns a Docker client; without Docker or the base image
// the test skips, except under CI=true, where it fails.
func runDockerOrSkip(t *testing.T) *client.Client {
	t.Helper()
	fail := func(format string, args ...any) { t.Helper(); testenv.Missing(t, format, args...) }
	cli, err := client.New(client.FromEnv)
	if err != nil {
		fail("no Docker client: %v", err)
		return nil
	}
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	if _, err := cli.ImageInspect(ctx, runBaseImage); err != nil {
		cli.Close()
		fail("%s is missing or Docker does not answer: %v", runBaseImage, err)
		return nil
	}
	t.Cleanup(func() { cli.Close() })
	return cli
}

// buildRunAgentImage builds the base image + this test binary as the agent.
func buildRunAgentImage(t *testing.T, cli *client.Client, tag string) {
	t.Helper()
	exe, err := os.Executable()
	if err != nil {
		t.Fatal(err)
	}
	bin, err := os.ReadFile(exe)
	if err != nil {
		t.Fatal(err)
	}
	var buf bytes.Buffer
	tw := tar.NewWriter(&buf)
	for _, f := range []struct {
		name string
		mode int64
		data []byte
	}{
		{"Dockerfile", 0o644, []byte("FROM " + runBaseImage + "\nCOPY agent /ic-run-agent\nENV " + runTestAgentEnv + "=1\nENTRYPOINT [\"/ic-run-agent\"]\n")},
		{"agent", 0o755, bin},
	} {
		if err := tw.WriteHeader(&tar.Header{Name: f.name, Mode: f.mode, Size: int64(len(f.data))}); err != nil {
			t.Fatal(err)
		}
		if _, err := tw.Write(f.data); err != nil {
			t.Fatal(err)
		}
	}
	if err := tw.Close(); err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithTimeout(context.Background(), 3*time.Minute)
	defer cancel()
	res, err := cli.ImageBuild(ctx, &buf, client.ImageBuildOptions{Tags: []string{tag}, Version: build.BuilderV1, Remove: true, ForceRemove: true})
	if err != nil {
		t.Fatalf("building the agent image: %v", err)
	}
	out, err := io.ReadAll(res.Body)
	res.Body.Close()
	if err != nil || bytes.Contains(out, []byte(`"errorDetail"`)) {
		t.Fatalf("building the agent image: %v\n%s", err, out)
	}
	t.Cleanup(func() {
		_, _ = cli.ImageRemove(context.Background(), tag, client.ImageRemoveOptions{Force: true, PruneChildren: true})
	})
}

type lockedBuf struct {
	mu sync.Mutex
	b  bytes.Buffer
}

func (l *lockedBuf) Write(p []byte) (int, error) {
	l.mu.Lock()
	defer l.mu.Unlock()
	return l.b.Write(p)
}

func (l *lockedBuf) String() string {
	l.mu.Lock()
	defer l.mu.Unlock()
	return l.b.String()
}

// TestRunDocker runs `ironcurtain run`'s core with real Docker against the
// real serve (in process, session workspaces on): the agent container (the
// base image with this binary as a stand-in agent, on the host network to
// reach the in-process gateway) writes through the gateway, sees the note
// in its read-only /workspace (its session's directory), and its move
// escalates and is approved from the terminal; then a second run is
// stopped with Ctrl-C. Each leaves no container and a revoked session.
func TestRunDocker(t *testing.T) {
	cli := runDockerOrSkip(t)
	suffix := make([]byte, 4)
	_, _ = rand.Read(suffix)
	tag := "ironcurtain/run-test-agent:" + hex.EncodeToString(suffix)
	buildRunAgentImage(t, cli, tag)
	root := filepath.Join(t.TempDir(), "workspaces")
	g := startGatewayYAML(t, fmt.Sprintf("session_workspaces:\n  root: %s\n  keep: true\n", root))
	ops, err := opsapi.NewClient("http://"+g.ops, testOperatorToken)
	if err != nil {
		t.Fatal(err)
	}
	eng := runcmd.Engine{C: cli}
	options := func(task string) runcmd.Options {
		o, err := runcmd.Parse([]string{"--agent", tag, "--network", "host", "--ttl", "10m", task},
			func(k string) string { return map[string]string{"IRONCURTAIN_OPERATOR_TOKEN": testOperatorToken}[k] }, io.Discard)
		if err != nil {
			t.Fatal(err)
		}
		o.OpsURL, o.GatewayURL, o.Proxy, o.WorkspacesDir = "http://"+g.ops, "http://"+g.api, g.proxy, root
		o.Poll, o.Grace = 100*time.Millisecond, 2*time.Second
		return o
	}
	// noneLeft: no container of the session, and the session revoked.
	noneLeft := func(t *testing.T, session string) {
		t.Helper()
		ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
		defer cancel()
		if id, _, err := eng.Find(ctx, session); err != nil || id != "" {
			t.Errorf("container of %s left: %q %v", session, id, err)
		}
		if s, err := ops.GetSession(ctx, session); err != nil || s.Status != "revoked" {
			t.Errorf("session %s: %q %v, want revoked", session, s.Status, err)
		}
	}
	sessionOf := func(msg string) string {
		_, rest, ok := strings.Cut(msg, "session sess_")
		if !ok {
			return ""
		}
		return "sess_" + strings.Fields(rest)[0][:len(strings.Fields(rest)[0])-1]
	}

	t.Run("escalation approved in the terminal", func(t *testing.T) {
		inR, inW := io.Pipe()
		defer inW.Close()
		out, msg := &lockedBuf{}, &lockedBuf{}
		start := time.Now()
		done := make(chan error, 1)
		go func() {
			done <- runcmd.Run(context.Background(), options("work "+g.sandbox), runcmd.Deps{Docker: eng, Ops: ops,
				Stdin: inR, Stdout: out, Stderr: msg, Interrupts: make(chan struct{})})
		}()
		// The first tool call, as the gateway counts it.
		var first time.Duration
		deadline := time.Now().Add(90 * time.Second)
		for first == 0 && time.Now().Before(deadline) {
			if s := sessionOf(msg.String()); s != "" {
				if sum, err := ops.GetSession(context.Background(), s); err == nil && sum.ToolCalls > 0 {
					first = time.Since(start)
				}
			}
			time.Sleep(20 * time.Millisecond)
		}
		t.Logf("ironcurtain run → the agent's first tool call: %s", first)
		tokenDir := tokenNotInConfig(t, cli, eng, sessionOf(msg.String()))
		for !strings.Contains(msg.String(), " waits: a = approve") {
			if time.Now().After(deadline) {
				t.Fatalf("no escalation prompt:\n%s\n%s", msg.String(), out.String())
			}
			time.Sleep(20 * time.Millisecond)
		}
		_, _ = io.WriteString(inW, "a\n")
		select {
		case err := <-done:
			if err != nil {
				t.Fatal(err)
			}
		case <-time.After(2 * time.Minute):
			t.Fatalf("run did not end:\n%s\n%s", msg.String(), out.String())
		}
		session := sessionOf(msg.String())
		m, o := msg.String(), out.String()
		t.Logf("the run's terminal:\n%s%s", o, m)
		for _, want := range []string{"approved by ", "(here)", "the agent finished (exit code 0)", "tool calls:  2 (allowed 1, denied 0, escalated 1)"} {
			if !strings.Contains(m, want) {
				t.Errorf("run output lacks %q:\n%s", want, m)
			}
		}
		if !strings.Contains(o, `/workspace/note.txt reads "hello from the run"`) || strings.Contains(o, "WRITABLE") {
			t.Errorf("the agent's view of /workspace:\n%s", o)
		}
		if b, err := os.ReadFile(filepath.Join(root, session, "moved.txt")); err != nil || string(b) != "hello from the run" {
			t.Errorf("the approved move in the session's workspace: %q %v", b, err)
		}
		noneLeft(t, session)
		if _, err := os.Stat(tokenDir); !os.IsNotExist(err) {
			t.Errorf("the token directory %s is left: %v", tokenDir, err)
		}
	})

	t.Run("Ctrl-C", func(t *testing.T) {
		out, msg := &lockedBuf{}, &lockedBuf{}
		intr := make(chan struct{}, 2)
		done := make(chan error, 1)
		go func() {
			done <- runcmd.Run(context.Background(), options("sleep"), runcmd.Deps{Docker: eng, Ops: ops,
				Stdout: out, Stderr: msg, Interrupts: intr})
		}()
		deadline := time.Now().Add(60 * time.Second)
		for !strings.Contains(out.String(), "sleeping") {
			if time.Now().After(deadline) {
				t.Fatalf("the agent did not start:\n%s", msg.String())
			}
			time.Sleep(20 * time.Millisecond)
		}
		intr <- struct{}{}
		select {
		case err := <-done:
			if err != nil {
				t.Fatal(err)
			}
		case <-time.After(time.Minute):
			t.Fatalf("run did not end:\n%s", msg.String())
		}
		if !strings.Contains(msg.String(), "ended:       interrupted (Ctrl-C)") {
			t.Errorf("output:\n%s", msg.String())
		}
		noneLeft(t, sessionOf(msg.String()))
	})
}

// tokenNotInConfig checks that the run container of session has its token
// only as a file: docker inspect shows no token in the environment, the
// command or the labels. It returns the token's host directory.
func tokenNotInConfig(t *testing.T, cli *client.Client, eng runcmd.Engine, session string) string {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	id, labels, err := eng.Find(ctx, session)
	if err != nil || id == "" {
		t.Fatalf("the run container of %s: %q %v", session, id, err)
	}
	dir := labels[runcmd.LabelTokenDir]
	token, err := os.ReadFile(filepath.Join(dir, "agent-token"))
	if err != nil || len(strings.TrimSpace(string(token))) < 16 {
		t.Fatalf("the token file in %q: %v", dir, err)
	}
	if fi, err := os.Stat(dir); err != nil || fi.Mode().Perm() != 0o700 {
		t.Errorf("the token directory: %v %v, want mode 0700", fi.Mode(), err)
	}
	in, err := cli.ContainerInspect(ctx, id, client.ContainerInspectOptions{})
	if err != nil {
		t.Fatal(err)
	}
	cfg := fmt.Sprint(in.Container.Config.Env, in.Container.Config.Cmd, in.Container.Config.Labels, in.Container.Config.Entrypoint)
	if strings.Contains(cfg, strings.TrimSpace(string(token))) {
		t.Errorf("the session token is in the container's configuration")
	}
	if !strings.Contains(cfg, "IRONCURTAIN_AGENT_TOKEN_FILE="+runcmd.TokenPath) {
		t.Errorf("no IRONCURTAIN_AGENT_TOKEN_FILE in %s", cfg)
	}
	return dir
}
