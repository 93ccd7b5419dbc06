package mcphub

import (
	"github.com/mark3labs/mcp-go/mcp"

	"ironcurtain.dev/gateway/internal/gate"
	"ironcurtain.dev/gateway/internal/servers"
)

// toMCPResult converts a tool result to MCP.
func toMCPResult(r servers.Result) *mcp.CallToolResult {
	out := &mcp.CallToolResult{IsError: r.IsError, Content: make([]mcp.Content, 0, len(r.Content))}
	for _, c := range r.Content {
		switch c.Type {
		case "image":
			out.Content = append(out.Content, mcp.NewImageContent(c.Data, c.MIMEType))
		case "audio":
			out.Content = append(out.Content, mcp.NewAudioContent(c.Data, c.MIMEType))
		case "text", "":
			out.Content = append(out.Content, mcp.NewTextContent(c.Text))
		default:
			out.Content = append(out.Content, mcp.NewTextContent("[content of type "+gate.SafeName(c.Type)+" left out]"))
		}
	}
	return out
}
