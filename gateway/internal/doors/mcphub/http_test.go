package mcphub

import (
	"bytes"
	"context"
	"encoding/json"
	"io"
	"log/slog"
	"net/http"
	"net/http/httptest"
	"strings"
	"sync"
	"testing"
	"time"

	sdk "github.com/modelcontextprotocol/go-sdk/mcp"
	"github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/client_golang/prometheus/testutil"

	"ironcurtain.dev/gateway/internal/audit"
	"ironcurtain.dev/gateway/internal/escalation"
	"ironcurtain.dev/gateway/internal/gate"
	"ironcurtain.dev/gateway/internal/metrics"
	"ironcurtain.dev/gateway/internal/servers"
	"ironcurtain.dev/gateway/internal/session"
	"ironcurtain.dev/gateway/policy"
)

const (
	tokenA = "agent-token-A-0123456789"
	tokenB = "agent-token-B-0123456789"
)

type httpFixture struct {
	*pipelineFixture
	url  string
	ts   *httptest.Server
	logs *syncBuffer
	m    *metrics.ToolCalls
}

type syncBuffer struct {
	mu sync.Mutex
	b  bytes.Buffer
}

func (s *syncBuffer) Write(p []byte) (int, error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.b.Write(p)
}

func (s *syncBuffer) String() string {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.b.String()
}

func newHTTPFixture(t *testing.T, cfg Config) *httpFixture {
	t.Helper()
	f := &httpFixture{pipelineFixture: &pipelineFixture{
		pol: &fakePolicy{evals: map[string]policy.Evaluation{}, annotated: map[string]bool{
			"files__read": true, "files__delete": true,
		}},
		srv:  newFakeServer("files", "read", "delete", "secret_unannotated"),
		sink: &memSink{},
		reg:  prometheus.NewRegistry(),
	}, logs: &syncBuffer{}}
	f.esc = &fakeEscalator{t: t, sink: f.sink}
	var err error
	f.m, err = metrics.NewToolCalls(f.reg)
	if err != nil {
		t.Fatal(err)
	}
	f.hub, err = New(cfg, Deps{
		Servers: []servers.Server{f.srv}, Policy: f.pol, Escalator: f.esc, Audit: f.sink,
		Auth: fakeAuth{
			tokenA: session.Session{ID: "agent-a", Name: "agent-a"},
			tokenB: session.Session{ID: "agent-b", Name: "agent-b"},
		},
		Metrics: f.m, Logger: slog.New(slog.NewJSONHandler(f.logs, nil)), NewID: seqIDs(),
	})
	if err != nil {
		t.Fatal(err)
	}
	mux := http.NewServeMux()
	mux.Handle("/mcp", f.hub.Handler())
	f.ts = httptest.NewServer(mux)
	t.Cleanup(f.ts.Close)
	f.url = f.ts.URL + "/mcp"
	return f
}

type bearer struct {
	token string
	base  http.RoundTripper
}

func (b bearer) RoundTrip(r *http.Request) (*http.Response, error) {
	r = r.Clone(r.Context())
	if b.token != "" {
		r.Header.Set("Authorization", "Bearer "+b.token)
	}
	return b.base.RoundTrip(r)
}

// connectSDK opens a session with the official go-sdk client.
func connectSDK(t *testing.T, url, token string, opts *sdk.ClientOptions) (*sdk.ClientSession, error) {
	t.Helper()
	c := sdk.NewClient(&sdk.Implementation{Name: "test-agent", Version: "1"}, opts)
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	return c.Connect(ctx, &sdk.StreamableClientTransport{
		Endpoint:   url,
		HTTPClient: &http.Client{Transport: bearer{token: token, base: http.DefaultTransport}},
		MaxRetries: -1,
	}, nil)
}

func TestSDKClientListsAndCalls(t *testing.T) {
	f := newHTTPFixture(t, Config{})
	f.pol.evals["files__read"] = allow("allow-reads", map[string]any{"path": "/sandbox/a.txt"})
	f.srv.run = func(_ context.Context, _ string, args map[string]any) (servers.Result, error) {
		return servers.Text("contents of " + args["path"].(string)), nil
	}
	cs, err := connectSDK(t, f.url, tokenA, nil)
	if err != nil {
		t.Fatal(err)
	}
	defer cs.Close()
	ctx := context.Background()
	lt, err := cs.ListTools(ctx, &sdk.ListToolsParams{})
	if err != nil {
		t.Fatal(err)
	}
	var names []string
	for _, tool := range lt.Tools {
		names = append(names, tool.Name)
		schema, _ := json.Marshal(tool.InputSchema)
		if !strings.Contains(string(schema), `"path"`) {
			t.Errorf("tool %s has schema %s", tool.Name, schema)
		}
	}
	if got := strings.Join(names, ","); got != "files__delete,files__read" {
		t.Fatalf("tools = %s (unannotated tools must not be listed)", got)
	}
	res, err := cs.CallTool(ctx, &sdk.CallToolParams{Name: "files__read", Arguments: map[string]any{"path": "a.txt"}})
	if err != nil {
		t.Fatal(err)
	}
	if res.IsError || len(res.Content) != 1 || res.Content[0].(*sdk.TextContent).Text != "contents of /sandbox/a.txt" {
		t.Fatalf("result = %+v", res)
	}
	ds := f.sink.decisions()
	if len(ds) != 1 || ds[0].SessionID != "agent-a" || ds[0].Server != "files" || ds[0].Tool != "read" {
		t.Fatalf("decisions = %+v", ds)
	}
	if got := f.pol.requests[0].Args["path"]; got != "a.txt" {
		t.Fatalf("policy saw %v, want the agent's own argument", got)
	}

	// A tool that is not exposed is a protocol error and is recorded.
	if _, err := cs.CallTool(ctx, &sdk.CallToolParams{Name: "files__secret_unannotated", Arguments: map[string]any{}}); err == nil {
		t.Fatal("calling an unexposed tool succeeded")
	}
	ds = f.sink.decisions()
	if last := ds[len(ds)-1]; last.Rule != policy.RuleUnknownTool || last.SessionID != "agent-a" || last.Decision != "deny" {
		t.Fatalf("unknown tool call recorded as %+v", last)
	}
	if f.srv.callCount() != 1 {
		t.Fatalf("server calls = %d", f.srv.callCount())
	}
}

func TestSDKClientEscalationNotices(t *testing.T) {
	tests := []struct {
		name      string
		approve   bool
		wantError bool
		want      []string
	}{
		{name: "approved", approve: true, want: []string{"pending", "approved"}},
		{name: "denied", approve: false, wantError: true, want: []string{"pending", "denied"}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			f := newHTTPFixture(t, Config{ProgressEvery: 20 * time.Millisecond})
			f.pol.evals["files__delete"] = policy.Evaluation{Decision: policy.Decision{Status: policy.Escalate, Rule: "r", Reason: "deleting needs a human"}}
			f.esc.wait = make(chan struct{})
			if tt.approve {
				f.esc.res = escalation.Result{Approved: true, Status: "approved", DecidedBy: "op"}
			} else {
				f.esc.res = escalation.Result{Status: "denied", Reason: "no"}
			}
			var mu sync.Mutex
			var notices []gate.EscalationNotice
			var loggers []string
			var progress []string
			pending := make(chan struct{}, 1)
			cs, err := connectSDK(t, f.url, tokenA, &sdk.ClientOptions{
				LoggingMessageHandler: func(_ context.Context, r *sdk.LoggingMessageRequest) {
					b, _ := json.Marshal(r.Params.Data)
					var n gate.EscalationNotice
					_ = json.Unmarshal(b, &n)
					mu.Lock()
					notices = append(notices, n)
					loggers = append(loggers, r.Params.Logger+"/"+string(r.Params.Level))
					mu.Unlock()
					if n.Status == gate.StatusPending {
						select {
						case pending <- struct{}{}:
						default:
						}
					}
				},
				ProgressNotificationHandler: func(_ context.Context, r *sdk.ProgressNotificationClientRequest) {
					mu.Lock()
					progress = append(progress, r.Params.Message)
					mu.Unlock()
				},
			})
			if err != nil {
				t.Fatal(err)
			}
			defer cs.Close()
			done := make(chan *sdk.CallToolResult, 1)
			go func() {
				p := &sdk.CallToolParams{Name: "files__delete", Arguments: map[string]any{"path": "x"}}
				p.SetProgressToken("tok-1")
				res, err := cs.CallTool(context.Background(), p)
				if err != nil {
					t.Error(err)
				}
				done <- res
			}()
			select {
			case <-pending:
			case <-time.After(10 * time.Second):
				t.Fatal("no pending notice while the call waits")
			}
			time.Sleep(60 * time.Millisecond) // a few progress ticks
			close(f.esc.wait)
			res := <-done
			if res == nil || res.IsError != tt.wantError {
				t.Fatalf("result = %+v", res)
			}
			// Notification handlers run asynchronously in the client: wait
			// for the final notice.
			deadline := time.Now().Add(5 * time.Second)
			for {
				mu.Lock()
				n, p := len(notices), len(progress)
				last := ""
				if p > 0 {
					last = progress[p-1]
				}
				mu.Unlock()
				if n >= len(tt.want) && strings.Contains(last, ": "+tt.want[1]) {
					break
				}
				if time.Now().After(deadline) {
					break
				}
				time.Sleep(5 * time.Millisecond)
			}
			mu.Lock()
			defer mu.Unlock()
			var statuses []string
			for i, n := range notices {
				statuses = append(statuses, n.Status)
				if n.EscalationID == "" || n.Tool != "files__delete" {
					t.Errorf("notice %+v", n)
				}
				if loggers[i] != EscalationLogger+"/notice" {
					t.Errorf("logger/level = %s", loggers[i])
				}
			}
			if strings.Join(statuses, ",") != strings.Join(tt.want, ",") {
				t.Errorf("statuses = %v, want %v", statuses, tt.want)
			}
			if len(progress) < 2 || !strings.HasPrefix(progress[0], "escalation "+notices[0].EscalationID+": pending") ||
				!strings.HasPrefix(progress[len(progress)-1], "escalation "+notices[0].EscalationID+": "+tt.want[1]) {
				t.Errorf("progress = %q", progress)
			}
			if d := f.sink.decisions()[0]; d.EscalationID != notices[0].EscalationID {
				t.Errorf("notice names escalation %s, the audit record %s", notices[0].EscalationID, d.EscalationID)
			}
		})
	}
}

// rawPost sends one JSON-RPC message to the endpoint.
func rawPost(t *testing.T, url, auth, sid, body string) (*http.Response, string) {
	t.Helper()
	req, err := http.NewRequest(http.MethodPost, url, strings.NewReader(body))
	if err != nil {
		t.Fatal(err)
	}
	req.Header.Set("Content-Type", "application/json")
	req.Header.Set("Accept", "application/json, text/event-stream")
	if auth != "" {
		req.Header.Set("Authorization", auth)
	}
	if sid != "" {
		req.Header.Set("Mcp-Session-Id", sid)
		req.Header.Set("Mcp-Protocol-Version", "2025-06-18")
	}
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	b, _ := io.ReadAll(resp.Body)
	return resp, string(b)
}

const initBody = `{"jsonrpc":"2.0","id":1,"method":"initialize","params":{"protocolVersion":"2025-06-18","capabilities":{},"clientInfo":{"name":"raw","version":"1"}}}`

func TestAuthRefusals(t *testing.T) {
	tests := []struct {
		name   string
		auth   string
		reason string
	}{
		{name: "no header", auth: "", reason: authMissing},
		{name: "empty bearer", auth: "Bearer ", reason: authMissing},
		{name: "basic scheme", auth: "Basic " + tokenA, reason: authMissing},
		{name: "token without scheme", auth: tokenA, reason: authMissing},
		{name: "trailing junk", auth: "Bearer " + tokenA + " x", reason: authMissing},
		{name: "tab separator", auth: "Bearer\t" + tokenA, reason: authMissing},
		{name: "unknown token", auth: "Bearer operator-token-0123456789", reason: authUnknown},
		{name: "token prefix", auth: "Bearer " + tokenA[:10], reason: authUnknown},
	}
	f := newHTTPFixture(t, Config{})
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			resp, body := rawPost(t, f.url, tt.auth, "", initBody)
			if resp.StatusCode != http.StatusUnauthorized {
				t.Fatalf("status = %d, body %s", resp.StatusCode, body)
			}
			if !strings.HasPrefix(resp.Header.Get("WWW-Authenticate"), "Bearer") {
				t.Errorf("WWW-Authenticate = %q", resp.Header.Get("WWW-Authenticate"))
			}
			if resp.Header.Get("Mcp-Session-Id") != "" {
				t.Error("a session was created for an unauthenticated request")
			}
		})
	}
	// Every refusal is counted and logged, and no log line carries a token.
	var total float64
	for _, r := range []string{authMissing, authUnknown} {
		total += testutil.ToFloat64(counter(t, f.reg, "ironcurtain_mcp_auth_failures_total", map[string]string{"reason": r}))
	}
	if total != float64(len(tests)) {
		t.Errorf("auth failures counted = %v, want %d", total, len(tests))
	}
	logs := f.logs.String()
	if strings.Count(logs, "agent token missing or unknown") != len(tests) {
		t.Errorf("refusals logged %d times, want %d:\n%s", strings.Count(logs, "agent token missing or unknown"), len(tests), logs)
	}
	if strings.Contains(logs, "operator-token") || strings.Contains(logs, tokenA) {
		t.Error("a token reached the log")
	}
	if !strings.Contains(logs, `"token_fingerprint":"`+session.Fingerprint("operator-token-0123456789")+`"`) {
		t.Error("the unknown token's fingerprint is not logged")
	}
	if len(f.sink.all()) != 0 || f.srv.callCount() != 0 {
		t.Error("an unauthenticated request reached the pipeline")
	}
	// The official client cannot connect with a wrong token either.
	if _, err := connectSDK(t, f.url, "wrong-token-0123456789", nil); err == nil {
		t.Fatal("go-sdk client connected with an unknown token")
	}
}

func TestForeignMCPSessionRefused(t *testing.T) {
	f := newHTTPFixture(t, Config{})
	f.pol.evals["files__read"] = allow("r", nil)
	resp, body := rawPost(t, f.url, "Bearer "+tokenA, "", initBody)
	sid := resp.Header.Get("Mcp-Session-Id")
	if resp.StatusCode != http.StatusOK || sid == "" {
		t.Fatalf("initialize: %d %q %s", resp.StatusCode, sid, body)
	}
	call := `{"jsonrpc":"2.0","id":2,"method":"tools/call","params":{"name":"files__read","arguments":{}}}`
	tests := []struct {
		name   string
		token  string
		sid    string
		status int
	}{
		{name: "another agent's session", token: tokenB, sid: sid, status: http.StatusNotFound},
		{name: "made-up session", token: tokenA, sid: "not-a-session", status: http.StatusNotFound},
		{name: "own session", token: tokenA, sid: sid, status: http.StatusOK},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			resp, body := rawPost(t, f.url, "Bearer "+tt.token, tt.sid, call)
			if resp.StatusCode != tt.status {
				t.Fatalf("status = %d, want %d (%s)", resp.StatusCode, tt.status, body)
			}
		})
	}
	if n := f.srv.callCount(); n != 1 {
		t.Fatalf("server calls = %d, want 1 (only the owner's)", n)
	}
	if got := testutil.ToFloat64(counter(t, f.reg, "ironcurtain_mcp_auth_failures_total", map[string]string{"reason": authForeign})); got != 2 {
		t.Errorf("foreign session refusals = %v", got)
	}
}

func TestRawProtocolEdges(t *testing.T) {
	f := newHTTPFixture(t, Config{MaxRequestBytes: 2048})
	f.pol.evals["files__read"] = allow("r", nil)
	resp, _ := rawPost(t, f.url, "Bearer "+tokenA, "", initBody)
	sid := resp.Header.Get("Mcp-Session-Id")
	tests := []struct {
		name     string
		body     string
		wantBody string
	}{
		{name: "arguments not an object", body: `{"jsonrpc":"2.0","id":3,"method":"tools/call","params":{"name":"files__read","arguments":[1,2]}}`, wantBody: "the arguments must be a JSON object"},
		{name: "oversized request", body: `{"jsonrpc":"2.0","id":4,"method":"tools/call","params":{"name":"files__read","arguments":{"path":"` + strings.Repeat("a", 4096) + `"}}}`, wantBody: "error"},
		{name: "unknown tool", body: `{"jsonrpc":"2.0","id":5,"method":"tools/call","params":{"name":"shell__exec","arguments":{}}}`, wantBody: "not found"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			_, body := rawPost(t, f.url, "Bearer "+tokenA, sid, tt.body)
			if !strings.Contains(body, tt.wantBody) {
				t.Fatalf("body = %s, want %q", body, tt.wantBody)
			}
		})
	}
	if n := f.srv.callCount(); n != 0 {
		t.Fatalf("server calls = %d, want 0", n)
	}
	var rules []string
	for _, d := range f.sink.decisions() {
		rules = append(rules, d.Rule)
	}
	if got := strings.Join(rules, ","); got != policy.RuleInvalidArgument+","+policy.RuleUnknownTool {
		t.Fatalf("recorded rules = %s", got)
	}
	// What was sent is what is recorded: the array, not null.
	if got := string(f.sink.decisions()[0].Args); got != "[1,2]" {
		t.Errorf("arguments recorded as %s, want [1,2]", got)
	}
	for _, e := range f.sink.all() {
		if d, ok := e.(*audit.ToolCallDecision); ok && d.SessionID != "agent-a" {
			t.Errorf("decision without the session: %+v", d)
		}
	}
}
