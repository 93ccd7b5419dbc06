package main

import (
	"context"
	"crypto/subtle"
	"errors"
	"net/http"

	"github.com/mark3labs/mcp-go/mcp"
	"github.com/mark3labs/mcp-go/server"

	"ironcurtain.dev/e2e/internal/mcpfixture"
)

// envMCPToken is the bearer token the remote MCP server requires (the
// gateway's servers.<name>.bearer_token_file holds it).
const envMCPToken = "E2E_MCP_TOKEN"

// remoteMCP is a streamable-HTTP MCP server (mcp.* hosts, the url: mode of
// the gateway) with the tools of mcpfixture.RemoteTools. Every request
// must carry "Authorization: Bearer <token>"; without a token configured
// it answers 503.
type remoteMCP struct {
	token   string
	handler http.Handler
}

func newRemoteMCP(token string) *remoteMCP {
	s := server.NewMCPServer("ic-e2e-remote", "1", server.WithToolCapabilities(false))
	for _, t := range mcpfixture.RemoteTools {
		s.AddTool(mcp.NewToolWithRawSchema(t.Name, t.Description, t.Schema), remoteTool(t.Name))
	}
	return &remoteMCP{token: token, handler: server.NewStreamableHTTPServer(s, server.WithEndpointPath("/mcp"))}
}

func remoteTool(name string) server.ToolHandlerFunc {
	return func(_ context.Context, req mcp.CallToolRequest) (*mcp.CallToolResult, error) {
		if name == "fail" {
			return nil, errors.New("the remote tool failed on purpose")
		}
		return mcp.NewToolResultText("remote echo: " + req.GetString("text", "")), nil
	}
}

// serve answers one request and returns the note to log (never the
// token).
func (m *remoteMCP) serve(w http.ResponseWriter, r *http.Request) string {
	if m.token == "" {
		http.Error(w, "no MCP token configured", http.StatusServiceUnavailable)
		return "mcp: no token configured"
	}
	got := r.Header.Get(mcpfixture.RemoteTokenHeader)
	if subtle.ConstantTimeCompare([]byte(got), []byte("Bearer "+m.token)) != 1 {
		http.Error(w, "unauthorised", http.StatusUnauthorized)
		return "mcp: refused (no or wrong bearer token)"
	}
	m.handler.ServeHTTP(w, r)
	return "mcp: authorised"
}
