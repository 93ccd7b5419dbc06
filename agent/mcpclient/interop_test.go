package mcpclient

import (
	"context"
	"encoding/json"
	"net/http"
	"net/http/httptest"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/modelcontextprotocol/go-sdk/mcp"
)

// The official MCP Go SDK serves here as an independent server, so the
// client is shown to speak MCP and not only mcp-go's reading of it.

// interopSchema uses JSON Schema keywords mcp-go's tool struct does not
// keep (a top-level description, $defs, additionalProperties false): the
// tool list must carry the schema whole.
const interopSchema = `{"type":"object","description":"Where to move.","additionalProperties":false,` +
	`"$defs":{"p":{"type":"string"}},"properties":{"source":{"$ref":"#/$defs/p"},"destination":{"type":"string","enum":["a","b"]}},"required":["source"]}`

func startOfficialServer(t *testing.T, decide <-chan bool) string {
	t.Helper()
	s := mcp.NewServer(&mcp.Implementation{Name: "official-go-sdk", Version: "0"}, &mcp.ServerOptions{
		Capabilities: &mcp.ServerCapabilities{Logging: &mcp.LoggingCapabilities{}, Tools: &mcp.ToolCapabilities{}},
	})
	s.AddTool(&mcp.Tool{Name: "filesystem__move_file", Description: "Move a file.", InputSchema: json.RawMessage(interopSchema),
		OutputSchema: json.RawMessage(`{"type":"object","properties":{"moved":{"type":"boolean"}}}`)},
		func(ctx context.Context, req *mcp.CallToolRequest) (*mcp.CallToolResult, error) {
			notice := func(status string) {
				data := map[string]any{"escalation_id": "esc-7", "tool": "filesystem__move_file", "status": status, "reason": "moves need approval"}
				_ = req.Session.Log(ctx, &mcp.LoggingMessageParams{Level: "notice", Logger: EscalationLogger, Data: data})
				if tok := req.Params.GetProgressToken(); tok != nil {
					_ = req.Session.NotifyProgress(ctx, &mcp.ProgressNotificationParams{ProgressToken: tok, Message: "escalation esc-7: " + status})
				}
			}
			notice("pending")
			if !<-decide {
				notice("denied")
				return &mcp.CallToolResult{Content: []mcp.Content{&mcp.TextContent{Text: "denied by a human"}}, IsError: true}, nil
			}
			notice("approved")
			return &mcp.CallToolResult{Content: []mcp.Content{
				&mcp.TextContent{Text: "moved"},
				&mcp.ImageContent{MIMEType: "image/png", Data: []byte("12345")},
				&mcp.EmbeddedResource{Resource: &mcp.ResourceContents{URI: "file:///workspace/b", Text: "contents of b"}},
			}, StructuredContent: map[string]any{"moved": true}}, nil
		})
	h := mcp.NewStreamableHTTPHandler(func(*http.Request) *mcp.Server { return s }, nil)
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if r.Header.Get("Authorization") != "Bearer "+testToken {
			http.Error(w, "unknown agent token", http.StatusUnauthorized)
			return
		}
		h.ServeHTTP(w, r)
	}))
	t.Cleanup(func() {
		srv.CloseClientConnections()
		srv.Close()
	})
	return srv.URL + "/mcp"
}

func TestInteropOfficialServer(t *testing.T) {
	decide := make(chan bool, 2)
	url := startOfficialServer(t, decide)
	var mu sync.Mutex
	var statuses, progress []string
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	c, err := Connect(ctx, Config{URL: url, Token: testToken,
		OnEscalation: func(e Escalation) {
			mu.Lock()
			statuses = append(statuses, e.Status)
			mu.Unlock()
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
	if c.ServerName() != "official-go-sdk" {
		t.Errorf("ServerName() = %q", c.ServerName())
	}

	checkInteropTools(t, ctx, c)

	decide <- true
	res, err := c.Call(ctx, "filesystem__move_file", map[string]any{"source": "/workspace/a"})
	if err != nil {
		t.Fatal(err)
	}
	wantText := "moved\n[image image/png, 5 bytes]\ncontents of b"
	if res.IsError || res.Text != wantText || res.Structured == nil {
		t.Errorf("result = %+v, want text %q and structured content", res, wantText)
	}
	if res.Escalation == nil || res.Escalation.ID != "esc-7" || res.Escalation.Status != "approved" {
		t.Errorf("escalation = %+v", res.Escalation)
	}

	decide <- false
	res, err = c.Call(ctx, "filesystem__move_file", map[string]any{"source": "/workspace/a"})
	if err != nil {
		t.Fatal(err)
	}
	if !res.IsError || res.Escalation == nil || !res.Escalation.Final() {
		t.Errorf("refused result = %+v (escalation %+v)", res, res.Escalation)
	}
	mu.Lock()
	defer mu.Unlock()
	if !strings.HasPrefix(strings.Join(statuses, ","), "pending,approved,pending") {
		t.Errorf("escalation statuses = %v", statuses)
	}
	if len(progress) == 0 || !strings.HasPrefix(progress[0], "filesystem__move_file: escalation esc-7: pending") {
		t.Errorf("progress = %q", progress)
	}
}

// checkInteropTools checks the official server's tool list as the client
// reads it: one tool, its input schema whole, its output schema present.
func checkInteropTools(t *testing.T, ctx context.Context, c *Client) {
	t.Helper()
	tools, err := c.Tools(ctx)
	if err != nil {
		t.Fatal(err)
	}
	if len(tools) != 1 {
		t.Fatalf("got %d tools, want 1", len(tools))
	}
	var got, want any
	if err := json.Unmarshal(tools[0].InputSchema, &got); err != nil {
		t.Fatal(err)
	}
	_ = json.Unmarshal([]byte(interopSchema), &want)
	if g, w := mustJSON(t, got), mustJSON(t, want); g != w {
		t.Errorf("input schema = %s, want %s", g, w)
	}
	if !strings.Contains(string(tools[0].OutputSchema), `"moved"`) {
		t.Errorf("output schema lost: %s", tools[0].OutputSchema)
	}
}

func mustJSON(t *testing.T, v any) string {
	t.Helper()
	b, err := json.Marshal(v)
	if err != nil {
		t.Fatal(err)
	}
	return string(b)
}
