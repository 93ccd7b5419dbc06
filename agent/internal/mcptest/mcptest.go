// Package mcptest runs a small in-process MCP server (mcp-go, streamable
// HTTP on httptest, as the gateway serves it) that behaves like the
// gateway for the agent's tests: bearer-token authentication,
// `server__tool` names, refusals as isError results, and escalation
// notifications while a call waits.
package mcptest

import (
	"context"
	"encoding/json"
	"net/http"
	"net/http/httptest"
	"sync"
	"sync/atomic"
	"time"

	"github.com/mark3labs/mcp-go/mcp"
	"github.com/mark3labs/mcp-go/server"
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
	streams   int
	lastArgs  map[string]map[string]any
	srv       *httptest.Server
}

// Start runs a server with tools, accepting only token.
func Start(token string, tools ...Tool) *Server {
	s := &Server{Token: token, lastArgs: map[string]map[string]any{}}
	mcpServer := server.NewMCPServer("ironcurtain-test-gateway", "0",
		server.WithToolCapabilities(false), server.WithLogging())
	for _, t := range tools {
		schema := t.Schema
		if schema == "" {
			schema = `{"type":"object"}`
		}
		tool := mcp.NewToolWithRawSchema(t.Name, t.Description, json.RawMessage(schema))
		if t.Output != "" {
			tool.RawOutputSchema = json.RawMessage(t.Output)
		}
		mcpServer.AddTool(tool, s.handler(mcpServer, t))
	}
	h := server.NewStreamableHTTPServer(mcpServer)
	s.srv = httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if r.Header.Get("Authorization") != "Bearer "+token {
			s.mu.Lock()
			s.authFails++
			s.mu.Unlock()
			http.Error(w, "unknown agent token", http.StatusUnauthorized)
			return
		}
		if r.Method == http.MethodGet {
			s.mu.Lock()
			s.streams++
			s.mu.Unlock()
		}
		h.ServeHTTP(w, r)
	}))
	s.URL = s.srv.URL + "/mcp"
	return s
}

// handler answers the calls of t.
func (s *Server) handler(srv *server.MCPServer, t Tool) server.ToolHandlerFunc {
	return func(ctx context.Context, req mcp.CallToolRequest) (*mcp.CallToolResult, error) {
		s.Calls.Add(1)
		var args map[string]any
		if len(req.Params.RawArguments) > 0 {
			if err := json.Unmarshal(req.Params.RawArguments, &args); err != nil {
				return mcp.NewToolResultError("arguments are not a JSON object"), nil
			}
		}
		s.mu.Lock()
		s.lastArgs[t.Name] = args
		s.mu.Unlock()
		if e := t.Escalation; e != nil {
			notify(ctx, srv, req, t.Name, e.ID, "pending", e.Reason)
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
			notify(ctx, srv, req, t.Name, e.ID, status, e.Reason)
			settle(ctx)
			if !approved {
				return mcp.NewToolResultError("denied by a human: " + e.Reason), nil
			}
		}
		if t.Handler == nil {
			return mcp.NewToolResultText("ok"), nil
		}
		text, isErr := t.Handler(ctx, args)
		res := &mcp.CallToolResult{Content: []mcp.Content{mcp.NewTextContent(text)}, IsError: isErr}
		if t.Structured != nil && !isErr {
			res.StructuredContent = t.Structured(args)
		}
		return res, nil
	}
}

func notify(ctx context.Context, srv *server.MCPServer, req mcp.CallToolRequest, tool, id, status, reason string) {
	data := map[string]any{"escalation_id": id, "tool": tool, "status": status, "reason": reason}
	_ = srv.SendNotificationToClient(ctx, string(mcp.MethodNotificationMessage), map[string]any{
		"level": string(mcp.LoggingLevelNotice), "logger": "ironcurtain.escalation", "data": data,
	})
	if req.Params.Meta != nil && req.Params.Meta.ProgressToken != nil {
		_ = srv.SendNotificationToClient(ctx, string(mcp.MethodNotificationProgress), map[string]any{
			"progressToken": req.Params.Meta.ProgressToken, "progress": 1, "message": "escalation " + id + ": " + status,
		})
	}
}

// settle waits until the transport has taken the session's queued
// notifications, as the gateway does before it answers: mcp-go's
// streamable HTTP transport drops a notification still queued when the
// response is written.
func settle(ctx context.Context) {
	cs := server.ClientSessionFromContext(ctx)
	if cs == nil {
		return
	}
	ch := cs.NotificationChannel()
	deadline := time.Now().Add(200 * time.Millisecond)
	for len(ch) > 0 && time.Now().Before(deadline) {
		time.Sleep(200 * time.Microsecond)
	}
	time.Sleep(2 * time.Millisecond)
}

// AuthFailures returns how many requests carried a wrong token.
func (s *Server) AuthFailures() int {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.authFails
}

// Streams returns how many event streams (HTTP GET) clients opened.
func (s *Server) Streams() int {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.streams
}

// LastArgs returns the arguments of the last call of tool.
func (s *Server) LastArgs(tool string) map[string]any {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.lastArgs[tool]
}

// Close stops the server. Open event streams are cut, not waited for.
func (s *Server) Close() {
	s.srv.CloseClientConnections()
	s.srv.Close()
}
