package mcpclient

import (
	"context"
	"io"
	"net/http"
	"net/http/httptest"
	"strings"
	"sync"
	"testing"
	"time"

	"ironcurtain.dev/agent/internal/mcptest"
)

const testToken = "agent-token-0123456789abcdef"

func echo(ctx context.Context, args map[string]any) (string, bool) {
	p, _ := args["path"].(string)
	return "read " + p, false
}

func TestConnectListCall(t *testing.T) {
	srv := mcptest.Start(testToken,
		mcptest.Tool{Name: "filesystem__read_text_file", Description: "Read a file.", Schema: `{"type":"object","properties":{"path":{"type":"string"}},"required":["path"]}`, Handler: echo},
		mcptest.Tool{Name: "filesystem__write_file", Handler: func(context.Context, map[string]any) (string, bool) {
			return "denied by policy: writes outside the sandbox are not allowed", true
		}},
		mcptest.Tool{Name: "git__log", Output: `{"type":"object","properties":{"n":{"type":"number"}}}`, Structured: func(map[string]any) any { return map[string]any{"n": 3} }, Handler: func(context.Context, map[string]any) (string, bool) { return `{"n":3}`, false }},
	)
	defer srv.Close()
	ctx := context.Background()
	c, err := Connect(ctx, Config{URL: srv.URL, Token: testToken})
	if err != nil {
		t.Fatal(err)
	}
	defer c.Close()

	tools, err := c.Tools(ctx)
	if err != nil {
		t.Fatal(err)
	}
	if len(tools) != 3 {
		t.Fatalf("got %d tools, want 3", len(tools))
	}
	for _, tool := range tools {
		if tool.Name == "filesystem__read_text_file" && !strings.Contains(string(tool.InputSchema), `"required":["path"]`) {
			t.Errorf("input schema lost: %s", tool.InputSchema)
		}
		if tool.Name == "git__log" && len(tool.OutputSchema) == 0 {
			t.Errorf("output schema lost")
		}
	}

	tests := []struct {
		name       string
		tool       string
		args       map[string]any
		wantText   string
		wantErr    bool
		structured bool
	}{
		{name: "allowed call", tool: "filesystem__read_text_file", args: map[string]any{"path": "/workspace/a"}, wantText: "read /workspace/a"},
		{name: "refused call is an error result", tool: "filesystem__write_file", args: map[string]any{"path": "/etc/x"}, wantText: "denied by policy", wantErr: true},
		{name: "structured result", tool: "git__log", args: map[string]any{}, wantText: `{"n":3}`, structured: true},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			res, err := c.Call(ctx, tc.tool, tc.args)
			if err != nil {
				t.Fatal(err)
			}
			if !strings.Contains(res.Text, tc.wantText) || res.IsError != tc.wantErr {
				t.Errorf("result = %+v, want text %q error %v", res, tc.wantText, tc.wantErr)
			}
			if tc.structured && res.Structured == nil {
				t.Errorf("structured content missing")
			}
		})
	}
}

func TestWrongTokenIsRefused(t *testing.T) {
	srv := mcptest.Start(testToken)
	defer srv.Close()
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	_, err := Connect(ctx, Config{URL: srv.URL, Token: "not-the-token-at-all"})
	if err == nil {
		t.Fatal("connect with a wrong token succeeded")
	}
	if strings.Contains(err.Error(), "not-the-token-at-all") {
		t.Errorf("error leaks the token: %v", err)
	}
	if srv.AuthFailures() == 0 {
		t.Errorf("server saw no refused request")
	}
}

func TestDirectTransportIgnoresProxyEnvironment(t *testing.T) {
	// The proxy URL carries the agent token; MCP traffic must go direct.
	t.Setenv("HTTP_PROXY", "http://agent:secret@proxy.invalid:3128")
	t.Setenv("HTTPS_PROXY", "http://agent:secret@proxy.invalid:3128")
	tr := DirectTransport()
	if tr.Proxy != nil {
		req, _ := http.NewRequest(http.MethodGet, "http://gateway.invalid:8080/mcp", nil)
		u, _ := tr.Proxy(req)
		t.Fatalf("transport uses a proxy: %v", u)
	}
}

func TestEscalationNotifications(t *testing.T) {
	tests := []struct {
		name       string
		approve    bool
		wantError  bool
		wantStatus []string
	}{
		{name: "approved", approve: true, wantStatus: []string{"pending", "approved"}},
		{name: "denied", approve: false, wantError: true, wantStatus: []string{"pending", "denied"}},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			decide := make(chan bool)
			srv := mcptest.Start(testToken, mcptest.Tool{
				Name:       "filesystem__move_file",
				Escalation: &mcptest.Escalation{ID: "esc-42", Reason: "deletes need approval", Decision: decide},
			})
			defer srv.Close()
			var mu sync.Mutex
			var seen []string
			pending := make(chan struct{}, 1)
			var progress []string
			c, err := Connect(context.Background(), Config{URL: srv.URL, Token: testToken,
				OnEscalation: func(e Escalation) {
					mu.Lock()
					seen = append(seen, e.Status)
					mu.Unlock()
					if e.Status == "pending" && e.ID == "esc-42" && e.Tool == "filesystem__move_file" {
						pending <- struct{}{}
					}
				},
				OnProgress: func(tool, msg string) {
					mu.Lock()
					progress = append(progress, tool+": "+msg)
					mu.Unlock()
				},
			})
			if err != nil {
				t.Fatal(err)
			}
			defer c.Close()
			type callResult struct {
				res Result
				err error
			}
			done := make(chan callResult, 1)
			go func() {
				res, err := c.Call(context.Background(), "filesystem__move_file", map[string]any{"source": "/workspace/a"})
				done <- callResult{res, err}
			}()
			select {
			case <-pending:
			case <-time.After(10 * time.Second):
				t.Fatal("no pending escalation notice while the call waits")
			}
			decide <- tc.approve
			cr := <-done
			if cr.err != nil {
				t.Fatal(cr.err)
			}
			if cr.res.IsError != tc.wantError {
				t.Errorf("IsError = %v, want %v (%q)", cr.res.IsError, tc.wantError, cr.res.Text)
			}
			if cr.res.Escalation == nil || cr.res.Escalation.ID != "esc-42" {
				t.Fatalf("result does not name the escalation: %+v", cr.res)
			}
			deadline := time.Now().Add(5 * time.Second)
			for {
				mu.Lock()
				got := strings.Join(seen, ",")
				mu.Unlock()
				if got == strings.Join(tc.wantStatus, ",") {
					break
				}
				if time.Now().After(deadline) {
					t.Fatalf("escalation statuses = %q, want %q", got, strings.Join(tc.wantStatus, ","))
				}
				time.Sleep(10 * time.Millisecond)
			}
			for {
				mu.Lock()
				got := strings.Join(progress, "|")
				mu.Unlock()
				if strings.Contains(got, "filesystem__move_file: escalation esc-42: pending") && strings.Contains(got, "esc-42: "+tc.wantStatus[1]) {
					break
				}
				if time.Now().After(deadline) {
					t.Fatalf("progress messages = %q", got)
				}
				time.Sleep(10 * time.Millisecond)
			}
		})
	}
}

func TestParseEscalation(t *testing.T) {
	tests := []struct {
		name string
		data any
		ok   bool
	}{
		{name: "object", data: map[string]any{"escalation_id": "e1", "tool": "a__b", "status": "pending"}, ok: true},
		{name: "json string", data: `{"escalation_id":"e1","status":"denied"}`, ok: true},
		{name: "no id", data: map[string]any{"status": "pending"}, ok: false},
		{name: "garbage", data: 42, ok: false},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			if _, ok := parseEscalation(tc.data); ok != tc.ok {
				t.Errorf("ok = %v, want %v", ok, tc.ok)
			}
		})
	}
}

// TestSessionKeepsEventStream: the client holds the standalone event
// stream open, which marks its MCP session in use at the gateway (an idle
// session is ended; an agent waiting on its model is not idle).
func TestSessionKeepsEventStream(t *testing.T) {
	srv := mcptest.Start(testToken)
	defer srv.Close()
	c, err := Connect(context.Background(), Config{URL: srv.URL, Token: testToken})
	if err != nil {
		t.Fatal(err)
	}
	defer c.Close()
	deadline := time.Now().Add(5 * time.Second)
	for srv.Streams() == 0 {
		if time.Now().After(deadline) {
			t.Fatal("the client opened no event stream")
		}
		time.Sleep(10 * time.Millisecond)
	}
	if c.ServerName() != "ironcurtain-test-gateway" {
		t.Errorf("ServerName() = %q", c.ServerName())
	}
	if err := c.Ping(context.Background(), 5*time.Second); err != nil {
		t.Errorf("ping: %v", err)
	}
}

// TestRefusedInitializeSaysWhy: a gateway that refuses the session (its
// cap reached) is named with its answer, not as "a legacy SSE server".
func TestRefusedInitializeSaysWhy(t *testing.T) {
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		w.Header().Set("Content-Type", "application/json")
		w.WriteHeader(http.StatusTooManyRequests)
		_, _ = io.WriteString(w, `{"jsonrpc":"2.0","id":null,"error":{"code":-32000,"message":"refused: too many MCP sessions"}}`)
	}))
	defer srv.Close()
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	_, err := Connect(ctx, Config{URL: srv.URL + "/mcp", Token: testToken})
	if err == nil || !strings.Contains(err.Error(), "429 Too Many Requests: refused: too many MCP sessions") {
		t.Fatalf("err = %v, want the gateway's refusal", err)
	}
}
