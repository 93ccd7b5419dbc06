package main

import (
	"bytes"
	"context"
	"encoding/base64"
	"net/http"
	"net/http/httptest"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"ironcurtain.dev/agent/internal/mcptest"
)

const testToken = "agent-token-0123456789abcdef"

type result struct {
	code           int
	stdout, stderr string
}

func invoke(t *testing.T, vars map[string]string, stdin string, args ...string) result {
	t.Helper()
	var out, errb bytes.Buffer
	e := env{
		args:   args,
		getenv: func(k string) string { return vars[k] },
		environ: func() []string {
			var kv []string
			for k, v := range vars {
				kv = append(kv, k+"="+v)
			}
			return kv
		},
		stdin:  strings.NewReader(stdin),
		stdout: &out,
		stderr: &errb,
	}
	code := run(context.Background(), e)
	return result{code: code, stdout: out.String(), stderr: errb.String()}
}

func fakeGateway(t *testing.T) *mcptest.Server {
	t.Helper()
	srv := mcptest.Start(testToken,
		mcptest.Tool{Name: "filesystem__read_text_file", Schema: `{"type":"object","properties":{"path":{"type":"string"}},"required":["path"]}`,
			Handler: func(_ context.Context, a map[string]any) (string, bool) { return "hello", false }},
		mcptest.Tool{Name: "filesystem__write_file", Handler: func(context.Context, map[string]any) (string, bool) {
			return "denied by policy: outside the sandbox", true
		}},
	)
	t.Cleanup(srv.Close)
	return srv
}

func transcript(t *testing.T, src string) string {
	t.Helper()
	p := filepath.Join(t.TempDir(), "t.yaml")
	if err := os.WriteFile(p, []byte(src), 0o600); err != nil {
		t.Fatal(err)
	}
	return p
}

func TestCommands(t *testing.T) {
	srv := fakeGateway(t)
	good := transcript(t, `
steps:
  - code: |
      const a = filesystem.read_text_file({path: "/workspace/a"});
      try { filesystem.write_file({path: "/etc/x", content: a}) } catch (e: any) { console.log(e.message) }
      return a
  - expect: {status: ok, contains: ["hello", "denied by policy"]}
    final: the file says hello
`)
	endless := transcript(t, "steps:\n"+strings.Repeat("  - code: return 1\n", 10)+"  - final: never\n")
	broken := transcript(t, "steps:\n  - code: return 1\n  - expect: {status: error}\n    final: x\n")
	base := map[string]string{envMCPURL: srv.URL, envToken: testToken}
	with := func(extra map[string]string) map[string]string {
		m := map[string]string{}
		for k, v := range base {
			m[k] = v
		}
		for k, v := range extra {
			m[k] = v
		}
		return m
	}
	tests := []struct {
		name       string
		vars       map[string]string
		stdin      string
		args       []string
		wantCode   int
		wantStdout string
		wantStderr string
	}{
		{name: "no command", args: nil, wantCode: exitUsage, wantStderr: "missing command"},
		{name: "help", args: []string{"help"}, wantCode: exitOK, wantStdout: "exit codes: 0 finished, 1 failed, 2 usage error, 3 a budget"},
		{name: "unknown command", args: []string{"fly"}, wantCode: exitUsage, wantStderr: `unknown command "fly"`},
		{name: "run without token", vars: map[string]string{envMCPURL: srv.URL, envModel: "replay:" + good}, args: []string{"run", "x"}, wantCode: exitUsage, wantStderr: envToken},
		{name: "run without mcp url", vars: map[string]string{envToken: testToken, envModel: "replay:" + good}, args: []string{"run", "x"}, wantCode: exitUsage, wantStderr: envMCPURL},
		{name: "run without model", vars: base, args: []string{"run", "x"}, wantCode: exitUsage, wantStderr: envModel},
		{name: "run bad env number", vars: with(map[string]string{envModel: "replay:" + good, envMaxSteps: "lots"}), args: []string{"run", "x"}, wantCode: exitUsage, wantStderr: `IRONCURTAIN_MAX_STEPS="lots" is not an integer`},
		{name: "run bad env duration", vars: with(map[string]string{envModel: "replay:" + good, envMaxWall: "soon"}), args: []string{"run", "x"}, wantCode: exitUsage, wantStderr: "IRONCURTAIN_MAX_WALL"},
		{name: "run unknown provider", vars: with(map[string]string{envModel: "gemini:x"}), args: []string{"run", "x"}, wantCode: exitUsage, wantStderr: "unknown provider"},
		{name: "run without task", vars: with(map[string]string{envModel: "replay:" + good}), args: []string{"run"}, wantCode: exitUsage, wantStderr: "no task given"},
		{name: "run finishes", vars: with(map[string]string{envModel: "replay:" + good}), args: []string{"run", "read", "a"}, wantCode: exitOK, wantStdout: "the file says hello\n", wantStderr: "finished after 2 steps"},
		{name: "run flag overrides env", vars: with(map[string]string{envModel: "replay:/nonexistent"}), args: []string{"run", "--model", "replay:" + good, "x"}, wantCode: exitOK, wantStdout: "the file says hello"},
		{name: "run hits step budget", vars: with(map[string]string{envModel: "replay:" + endless}), args: []string{"run", "--max-steps", "3", "x"}, wantCode: exitBudget, wantStderr: "stopped: steps budget exhausted: used 3 steps of 3"},
		{name: "run fails", vars: with(map[string]string{envModel: "replay:" + broken}), args: []string{"run", "x"}, wantCode: exitFailed, wantStderr: "failed: asking the model: replay expectation failed"},
		{name: "run with wrong token", vars: map[string]string{envMCPURL: srv.URL, envToken: "wrong-token-0123456789", envModel: "replay:" + good}, args: []string{"run", "x"}, wantCode: exitFailed, wantStderr: "connecting to the gateway MCP endpoint"},
		{name: "chat", vars: with(map[string]string{envModel: "replay:" + good}), stdin: "/tools\n/budget\n/pending\n/nope\nread a\n/quit\n", args: []string{"chat"}, wantCode: exitOK,
			wantStdout: "filesystem.read_text_file  (filesystem__read_text_file)"},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			r := invoke(t, tc.vars, tc.stdin, tc.args...)
			if r.code != tc.wantCode {
				t.Errorf("exit %d, want %d\nstdout: %s\nstderr: %s", r.code, tc.wantCode, r.stdout, r.stderr)
			}
			if !strings.Contains(r.stdout, tc.wantStdout) {
				t.Errorf("stdout %q lacks %q", r.stdout, tc.wantStdout)
			}
			if !strings.Contains(r.stderr, tc.wantStderr) {
				t.Errorf("stderr %q lacks %q", r.stderr, tc.wantStderr)
			}
			if strings.Contains(r.stdout+r.stderr, testToken) {
				t.Errorf("output leaks the agent token")
			}
		})
	}
}

func TestChatTranscript(t *testing.T) {
	srv := fakeGateway(t)
	good := transcript(t, "steps:\n  - code: return 1\n  - final: first answer\n  - final: second answer\n")
	r := invoke(t, map[string]string{envMCPURL: srv.URL, envToken: testToken, envModel: "replay:" + good}, "", "chat")
	if r.code != exitOK {
		t.Fatalf("chat with empty stdin: %d %s", r.code, r.stderr)
	}
	r = invoke(t, map[string]string{envMCPURL: srv.URL, envToken: testToken, envModel: "replay:" + good}, "one\ntwo\n/budget\n", "chat")
	for _, want := range []string{"first answer", "second answer", "steps 3/200"} {
		if !strings.Contains(r.stdout, want) {
			t.Errorf("chat output lacks %q:\n%s", want, r.stdout)
		}
	}
}

func TestDoctorCommand(t *testing.T) {
	srv := fakeGateway(t)
	proxy := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if r.Header.Get("Proxy-Authorization") != "Basic "+base64.StdEncoding.EncodeToString([]byte("agent:"+testToken)) {
			http.Error(w, "auth", http.StatusProxyAuthRequired)
			return
		}
		http.Error(w, "not allowed", http.StatusForbidden)
	}))
	defer proxy.Close()
	vars := map[string]string{
		envMCPURL:     srv.URL,
		envToken:      testToken,
		"HOME":        t.TempDir(),
		"HTTPS_PROXY": "http://agent:" + testToken + "@" + strings.TrimPrefix(proxy.URL, "http://"),
	}
	// Only loopback is probed: a closed port stands in for the internet.
	r := invoke(t, vars, "", "doctor", "--direct", "127.0.0.1:1", "--dns-name", "localhost", "--timeout", "1s")
	lines := strings.Split(strings.TrimSpace(r.stdout), "\n")
	if len(lines) != 7 {
		t.Fatalf("want 6 check lines and a summary, got:\n%s", r.stdout)
	}
	for _, name := range []string{"direct internet", "egress proxy", "mcp endpoint", "credential env vars"} {
		found := false
		for _, l := range lines {
			if strings.HasPrefix(l, "ok   "+name) {
				found = true
			}
		}
		if !found {
			t.Errorf("check %q not ok:\n%s", name, r.stdout)
		}
	}
	failed := strings.Contains(r.stdout, "FAIL")
	if failed != (r.code == exitFailed) || (!failed && r.code != exitOK) {
		t.Errorf("exit %d does not match the checks:\n%s", r.code, r.stdout)
	}
	if strings.Contains(r.stdout, testToken) {
		t.Error("doctor output leaks the agent token")
	}
}
