package external

import (
	"context"
	"log/slog"
	"net/http/httptest"
	"slices"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"github.com/mark3labs/mcp-go/client"
	"github.com/mark3labs/mcp-go/client/transport"
	"github.com/mark3labs/mcp-go/mcp"
	"github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/client_golang/prometheus/testutil"

	"ironcurtain.dev/gateway/internal/audit"
	"ironcurtain.dev/gateway/internal/doors/mcphub"
	"ironcurtain.dev/gateway/internal/metrics"
	"ironcurtain.dev/gateway/internal/servers"
	"ironcurtain.dev/gateway/internal/session"
	"ironcurtain.dev/gateway/policy"
)

// swapPolicy is a reloadable policy (mcphub.Snapshotter), as livepolicy.
type swapPolicy struct {
	cur atomic.Pointer[policy.Engine]
}

func (p *swapPolicy) Snapshot() *policy.Engine { return p.cur.Load() }
func (p *swapPolicy) Annotation(server, tool string) (policy.ToolAnnotation, bool) {
	return p.cur.Load().Annotation(server, tool)
}
func (p *swapPolicy) Evaluate(ctx context.Context, r policy.Request) policy.Evaluation {
	return p.cur.Load().Evaluate(ctx, r)
}

type tokenAuth struct{}

func (tokenAuth) Authenticate(_ context.Context, tok string) (session.Session, error) {
	if tok == "agent-token" {
		return session.Session{ID: "s1", Name: "s1"}, nil
	}
	return session.Session{}, session.ErrUnknownToken
}

type recSink struct {
	ch chan *audit.ToolCallDecision
}

func (r recSink) Record(_ context.Context, e audit.Event) error {
	if d, ok := e.(*audit.ToolCallDecision); ok {
		select {
		case r.ch <- d:
		default:
		}
	}
	return nil
}

// pinnedAnnotation is the annotation of tool t with the pin of its listed
// definition, as `ironcurtain tools pin` writes it.
func pinnedAnnotation(t *testing.T, server string, tool servers.Tool, args ...string) policy.ToolAnnotation {
	t.Helper()
	def := policy.ToolDefinition{Name: tool.Name, Description: tool.Description, InputSchema: tool.InputSchema}
	pin, err := def.Pin()
	if err != nil {
		t.Fatal(err)
	}
	schema, err := policy.CanonicalSchema(tool.InputSchema)
	if err != nil {
		t.Fatal(err)
	}
	a := policy.ToolAnnotation{Tool: tool.Name, Server: server, InputSchema: schema, Pin: &pin}
	for _, n := range args {
		a.Args = append(a.Args, policy.ArgAnnotation{Name: n, Spec: policy.Static(policy.RoleNone)})
	}
	return a
}

func listMCP(t *testing.T, url string) []string {
	t.Helper()
	c, err := client.NewStreamableHttpClient(url, transport.WithHTTPHeaders(map[string]string{"Authorization": "Bearer agent-token"}))
	if err != nil {
		t.Fatal(err)
	}
	defer c.Close()
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	if err := c.Start(ctx); err != nil {
		t.Fatal(err)
	}
	init := mcp.InitializeRequest{}
	init.Params.ProtocolVersion = mcp.LATEST_PROTOCOL_VERSION
	if _, err := c.Initialize(ctx, init); err != nil {
		t.Fatal(err)
	}
	res, err := c.ListTools(ctx, mcp.ListToolsRequest{})
	if err != nil {
		t.Fatal(err)
	}
	var names []string
	for _, tool := range res.Tools {
		names = append(names, tool.Name)
	}
	slices.Sort(names)
	return names
}

// TestHubHidesARugPulledTool is the rug-pull defence end to end with a real
// stdio MCP server: echo is pinned and works; the server changes echo's
// description and sends notifications/tools/list_changed; the hub hides
// echo from tools/list, denies its calls with structural-tool-changed, logs
// the change naming the field and counts it. env (never pinned) is hidden
// from the start.
func TestHubHidesARugPulledTool(t *testing.T) {
	s, _, _ := startTest(t, nil)
	ann := &policy.Annotations{}
	for _, tool := range s.Tools() {
		switch tool.Name {
		case "echo":
			ann.Add(pinnedAnnotation(t, "notes", tool, "text"))
		case "rugpull":
			ann.Add(pinnedAnnotation(t, "notes", tool))
		case "env":
			a := pinnedAnnotation(t, "notes", tool, "name")
			a.Pin = nil // annotated, never pinned
			ann.Add(a)
		}
	}
	cp := &policy.CompiledPolicy{Rules: []policy.CompiledRule{{
		Name: "allow-notes", If: policy.RuleCondition{Server: []string{"notes"}},
		Then: policy.Allow, Reason: "notes tools are harmless",
	}}}
	sandbox := t.TempDir()
	eng, err := policy.New(cp, ann, nil, policy.Settings{Sandbox: sandbox})
	if err != nil {
		t.Fatal(err)
	}
	live := &swapPolicy{}
	live.cur.Store(eng)
	logs := &syncBuf{}
	reg := prometheus.NewRegistry()
	m, err := metrics.NewToolCalls(reg)
	if err != nil {
		t.Fatal(err)
	}
	sink := recSink{ch: make(chan *audit.ToolCallDecision, 16)}
	hub, err := mcphub.New(mcphub.Config{}, mcphub.Deps{Servers: []servers.Server{s}, Policy: live, Audit: sink, Auth: tokenAuth{},
		Metrics: m, Logger: slog.New(slog.NewJSONHandler(logs, nil))})
	if err != nil {
		t.Fatal(err)
	}
	srv := httptest.NewServer(hub.Handler())
	defer srv.Close()
	sess := session.Session{ID: "s1"}

	if got := strings.Join(hub.Tools(), ","); got != "notes__echo,notes__rugpull" {
		t.Fatalf("exposed tools = %s (the unpinned env must be hidden)", got)
	}
	if got := strings.Join(listMCP(t, srv.URL), ","); got != "notes__echo,notes__rugpull" {
		t.Fatalf("tools/list = %s", got)
	}
	res := hub.Call(context.Background(), mcphub.CallRequest{Session: sess, Tool: "notes__env", Args: map[string]any{"name": "HOME"}})
	if !res.IsError || !strings.Contains(text(res), "definition changed") {
		t.Fatalf("unpinned env call = %+v", res)
	}
	if d := <-sink.ch; d.Rule != policy.RuleToolChanged || d.Decision != "deny" || !strings.Contains(d.Detail, "unpinned") {
		t.Fatalf("decision record = %+v", d)
	}
	res = hub.Call(context.Background(), mcphub.CallRequest{Session: sess, Tool: "notes__echo", Args: map[string]any{"text": "before"}})
	if res.IsError || text(res) != "before" {
		t.Fatalf("pinned echo before the change = %+v", res)
	}
	<-sink.ch

	// The server changes echo's description and sends list_changed.
	res = hub.Call(context.Background(), mcphub.CallRequest{Session: sess, Tool: "notes__rugpull", Args: map[string]any{}})
	if res.IsError {
		t.Fatalf("rugpull = %+v", res)
	}
	<-sink.ch
	deadline := time.Now().Add(20 * time.Second)
	for slices.Contains(hub.Tools(), "notes__echo") {
		if time.Now().After(deadline) {
			t.Fatalf("echo still exposed after its description changed\n%s", logs.String())
		}
		time.Sleep(10 * time.Millisecond)
	}
	if got := strings.Join(listMCP(t, srv.URL), ","); got != "notes__rugpull" {
		t.Fatalf("tools/list after the change = %s", got)
	}
	res = hub.Call(context.Background(), mcphub.CallRequest{Session: sess, Tool: "notes__echo", Args: map[string]any{"text": "after"}})
	if !res.IsError || strings.Contains(text(res), "after") || !strings.Contains(text(res), "refused notes__echo") {
		t.Fatalf("changed echo call = %+v", res)
	}
	if d := <-sink.ch; d.Rule != policy.RuleToolChanged || d.Detail != "changed: description" {
		t.Fatalf("decision record = %+v", d)
	}
	l := logs.String()
	if !strings.Contains(l, "tool definition differs from its pin") || !strings.Contains(l, `"tool":"echo","changed":"description"`) {
		t.Fatalf("log does not name the change:\n%s", l)
	}
	want := `
# HELP ironcurtain_tool_pin_mismatches_total External tools hidden because their definition differs from its pin, by what changed (name, description, schema, unpinned, removed, …).
# TYPE ironcurtain_tool_pin_mismatches_total counter
ironcurtain_tool_pin_mismatches_total{change="description",server="notes",tool="echo"} 1
ironcurtain_tool_pin_mismatches_total{change="unpinned",server="notes",tool="env"} 1
`
	if err := testutil.GatherAndCompare(reg, strings.NewReader(want), "ironcurtain_tool_pin_mismatches_total"); err != nil {
		t.Fatal(err)
	}

	// The operator reviews and pins the new definition (what `ironcurtain
	// tools pin` writes) and reloads: the next call shows echo again.
	for _, tool := range s.Tools() {
		if tool.Name == "echo" {
			ann2 := &policy.Annotations{}
			for _, a := range ann.Servers["notes"].Tools {
				if a.Tool == "echo" {
					a = pinnedAnnotation(t, "notes", tool, "text")
				}
				ann2.Add(a)
			}
			eng2, err := policy.New(cp, ann2, nil, policy.Settings{Sandbox: sandbox})
			if err != nil {
				t.Fatal(err)
			}
			if eng2.Version() == eng.Version() {
				t.Fatal("new pins did not change the policy version")
			}
			live.cur.Store(eng2)
		}
	}
	res = hub.Call(context.Background(), mcphub.CallRequest{Session: sess, Tool: "notes__echo", Args: map[string]any{"text": "re-pinned"}})
	if res.IsError || text(res) != "re-pinned" {
		t.Fatalf("echo after re-pinning and reload = %+v", res)
	}
	if got := strings.Join(listMCP(t, srv.URL), ","); got != "notes__echo,notes__rugpull" {
		t.Fatalf("tools/list after re-pinning = %s", got)
	}
}
