// Package mcptest runs a small in-process MCP server (official go-sdk,
// streamable HTTP on httptest) that behaves like the gateway for the
// agent's tests: bearer-token authentication, `server__tool` names, refusals
// as isError results, and escalation notifications while a call waits.
package mcptest

import (
	"context"
	"encoding/json"
	"net/http"
	"net/http/httptest"
	"sync"
	"sync/atomic"

	"github.com/modelcontextprotocol/go-sdk/mcp"
)

// Handler answers one call: text, and whether it is an error result.
type Handler func(ctx context.Context, args map[string]any) (text string, isError bool)

// Tool is a tool of the test server.
type Tool struct {
	Name        string
	Description string
	Schema      string // JSON Schema of the arguments; default: any object
	Output      string // optional output schema; Structured is then returned
	Structured  func(args map[string]any) any
	Handler     Handler
	// Escalation, when set, makes the call wait for Decide(ID) before the
	// handler runs (approved) or a refusal is returned (denied).
	Escalation *Escalation
}

// Escalation scripts a human decision.
type Escalation struct {
	ID       string
	Reason   string
	Decision <-chan bool // true approves
}

// Server is a running test server.
type Server struct {
	URL   string
	Token string
	Calls atomic.Int64

	mu        sync.Mutex
	authFails int
	lastArgs  map[string]map[string]any
	srv       *httptest.Server
}

// Start runs a server with tools, accepting only token.
func Start(token string, tools ...Tool) *Server {
	s := &Server{Token: token, lastArgs: map[string]map[string]any{}}
	server := mcp.NewServer(&mcp.Implementation{Name: "ironcurtain-test-gateway", Version: "0"}, &mcp.ServerOptions{
		Capabilities: &mcp.ServerCapabilities{Logging: &mcp.LoggingCapabilities{}, Tools: &mcp.ToolCapabilities{}},
	})
	for _, t := range tools {
		t := t
		schema := t.Schema
		if schema == "" {
			schema = `{"type":"object"}`
		}
		tool := &mcp.Tool{Name: t.Name, Description: t.Description, InputSchema: json.RawMessage(schema)}
		if t.Output != "" {
			tool.OutputSchema = json.RawMessage(t.Output)
		}
		server.AddTool(tool, func(ctx context.Context, req *mcp.CallToolRequest) (*mcp.CallToolResult, error) {
			s.Calls.Add(1)
			var args map[string]any
			if len(req.Params.Arguments) > 0 {
				if err := json.Unmarshal(req.Params.Arguments, &args); err != nil {
					return errorResult("arguments are not a JSON object"), nil
				}
			}
			s.mu.Lock()
			s.lastArgs[t.Name] = args
			s.mu.Unlock()
			if e := t.Escalation; e != nil {
				notify(ctx, req, t.Name, e.ID, "pending", e.Reason)
				approved := false
				select {
				case approved = <-e.Decision:
				case <-ctx.Done():
					return nil, ctx.Err()
				}
				status := "denied"
				if approved {
					status = "approved"
				}
				notify(ctx, req, t.Name, e.ID, status, e.Reason)
				if !approved {
					return errorResult("denied by a human: " + e.Reason), nil
				}
			}
			if t.Handler == nil {
				return &mcp.CallToolResult{Content: []mcp.Content{&mcp.TextContent{Text: "ok"}}}, nil
			}
			text, isErr := t.Handler(ctx, args)
			res := &mcp.CallToolResult{Content: []mcp.Content{&mcp.TextContent{Text: text}}, IsError: isErr}
			if t.Structured != nil && !isErr {
				res.StructuredContent = t.Structured(args)
			}
			return res, nil
		})
	}
	h := mcp.NewStreamableHTTPHandler(func(*http.Request) *mcp.Server { return server }, nil)
	s.srv = httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if r.Header.Get("Authorization") != "Bearer "+token {
			s.mu.Lock()
			s.authFails++
			s.mu.Unlock()
			http.Error(w, "unknown agent token", http.StatusUnauthorized)
			return
		}
		h.ServeHTTP(w, r)
	}))
	s.URL = s.srv.URL + "/mcp"
	return s
}

func errorResult(msg string) *mcp.CallToolResult {
	return &mcp.CallToolResult{Content: []mcp.Content{&mcp.TextContent{Text: msg}}, IsError: true}
}

func notify(ctx context.Context, req *mcp.CallToolRequest, tool, id, status, reason string) {
	data := map[string]any{"escalation_id": id, "tool": tool, "status": status, "reason": reason}
	_ = req.Session.Log(ctx, &mcp.LoggingMessageParams{Level: "notice", Logger: "ironcurtain.escalation", Data: data})
	if tok := req.Params.GetProgressToken(); tok != nil {
		_ = req.Session.NotifyProgress(ctx, &mcp.ProgressNotificationParams{ProgressToken: tok, Message: "escalation " + id + ": " + status})
	}
}

// AuthFailures returns how many requests carried a wrong token.
func (s *Server) AuthFailures() int {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.authFails
}

// LastArgs returns the arguments of the last call of tool.
func (s *Server) LastArgs(tool string) map[string]any {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.lastArgs[tool]
}

// Close stops the server.
func (s *Server) Close() { s.srv.Close() }
