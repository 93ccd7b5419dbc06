package mcphub

import (
	"testing"

	"github.com/mark3labs/mcp-go/mcp"

	"ironcurtain.dev/gateway/internal/servers"
)

func TestToMCPResultContentTypes(t *testing.T) {
	tests := []struct {
		name    string
		in      servers.Content
		check   func(mcp.Content) bool
		wantErr bool
	}{
		{name: "text", in: servers.Content{Type: "text", Text: "hi"}, check: func(c mcp.Content) bool {
			tc, ok := c.(mcp.TextContent)
			return ok && tc.Text == "hi"
		}},
		{name: "image", in: servers.Content{Type: "image", Data: "aW1n", MIMEType: "image/png"}, check: func(c mcp.Content) bool {
			ic, ok := c.(mcp.ImageContent)
			return ok && ic.Data == "aW1n" && ic.MIMEType == "image/png"
		}},
		{name: "audio", in: servers.Content{Type: "audio", Data: "YXVk", MIMEType: "audio/wav"}, check: func(c mcp.Content) bool {
			ac, ok := c.(mcp.AudioContent)
			return ok && ac.Data == "YXVk" && ac.MIMEType == "audio/wav"
		}},
		{name: "unknown type is left out, not passed through", in: servers.Content{Type: "resource", Data: "secret"}, check: func(c mcp.Content) bool {
			tc, ok := c.(mcp.TextContent)
			return ok && tc.Text == "[content of type resource left out]"
		}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			out := toMCPResult(servers.Result{Content: []servers.Content{tt.in}, IsError: true})
			if !out.IsError || len(out.Content) != 1 || !tt.check(out.Content[0]) {
				t.Fatalf("toMCPResult(%+v) = %+v", tt.in, out)
			}
		})
	}
}
