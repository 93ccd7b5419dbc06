package testenv

import (
	"context"
	"encoding/json"
	"os"
	"strings"

	"github.com/modelcontextprotocol/go-sdk/mcp"
)

// MCPServerEnv makes a test binary run ServeMCP instead of its tests; a
// test starts os.Args[0] with it to get a real stdio MCP server. The
// server is built with the official MCP Go SDK on purpose: the compiler's
// client is mcp-go, so listing this server's tools is the interop test.
const MCPServerEnv = "IRONCURTAIN_TEST_MCP_SERVER"

// EnvDumpVar names a file the test MCP server writes its environment to.
const EnvDumpVar = "IRONCURTAIN_TEST_ENV_DUMP"

// MaybeServeMCP serves the test MCP server on stdio and reports true when
// the process was started for that; TestMain calls it first.
func MaybeServeMCP() bool {
	if os.Getenv(MCPServerEnv) != "1" {
		return false
	}
	if p := os.Getenv(EnvDumpVar); p != "" {
		_ = os.WriteFile(p, []byte(strings.Join(os.Environ(), "\n")), 0o600)
	}
	s := mcp.NewServer(&mcp.Implementation{Name: "notes", Version: "1"}, nil)
	noop := func(context.Context, *mcp.CallToolRequest) (*mcp.CallToolResult, error) {
		return &mcp.CallToolResult{Content: []mcp.Content{&mcp.TextContent{Text: "ok"}}}, nil
	}
	s.AddTool(&mcp.Tool{Name: "read_note", Description: "Reads a note file.",
		InputSchema: json.RawMessage(`{"type":"object","properties":{"path":{"type":"string"}},"required":["path"]}`)}, noop)
	s.AddTool(&mcp.Tool{Name: "share_note", Description: "Shares a note with someone by email, or shows what would be shared.",
		InputSchema: json.RawMessage(`{"type":"object","properties":{"path":{"type":"string"},"email":{"type":"string"},"dryRun":{"type":"boolean"}},"required":["path","email"]}`)}, noop)
	_ = s.Run(context.Background(), &mcp.StdioTransport{})
	return true
}
