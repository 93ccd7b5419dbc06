package llmrelay

import (
	"net/http"
	"strings"
	"testing"

	"ironcurtain.dev/gateway/internal/llmprovider"
)

// TestServerToolsRefused: a hijacked agent cannot have the provider fetch
// URLs or talk to an MCP server of its choosing (around the egress proxy),
// however it spells the request; ordinary and client-side tools pass.
func TestServerToolsRefused(t *testing.T) {
	const m = `"model":"claude-haiku-4-5","max_tokens":5,"messages":[{"role":"user","content":"hi"}]`
	tests := []struct {
		name       string
		path       string
		body       string
		unsafe     bool
		wantStatus int
		wantTool   string
	}{
		{name: "anthropic web_fetch", path: "/anthropic/v1/messages", body: `{` + m + `,"tools":[{"type":"web_fetch_20250910","name":"web_fetch"}]}`, wantStatus: 403, wantTool: "web_fetch_20250910"},
		{name: "anthropic web_search", path: "/anthropic/v1/messages", body: `{` + m + `,"tools":[{"name":"f","input_schema":{}},{"type":"web_search_20250305","name":"web_search"}]}`, wantStatus: 403, wantTool: "web_search_20250305"},
		{name: "anthropic mcp connector", path: "/anthropic/v1/messages", body: `{` + m + `,"mcp_servers":[{"type":"url","url":"https://evil.example/mcp","name":"x"}]}`, wantStatus: 403, wantTool: "mcp_servers"},
		{name: "openai responses mcp", path: "/openai/responses", body: `{"model":"gpt-5","input":"hi","tools":[{"type":"mcp","server_label":"x","server_url":"https://evil.example/mcp"}]}`, wantStatus: 403, wantTool: "mcp"},
		{name: "openai responses web_search_preview", path: "/openai/responses", body: `{"model":"gpt-5","input":"hi","tools":[{"type":"web_search_preview"}]}`, wantStatus: 403},
		{name: "openai chat web_search_options", path: "/openai/chat/completions", body: `{"model":"gpt-4o-search-preview","messages":[],"web_search_options":{}}`, wantStatus: 403, wantTool: "web_search_options"},
		{name: "case variant does not hide the type", path: "/openai/responses", body: `{"model":"gpt-5","input":"hi","tools":[{"type":"mcp","Type":"function","server_url":"https://evil.example"}]}`, wantStatus: 403},
		{name: "escaped member name", path: "/openai/responses", body: `{"model":"gpt-5","input":"hi","tools":[{"typ\u0065":"mcp","server_url":"https://evil.example"}]}`, wantStatus: 403},
		{name: "duplicate type refused", path: "/openai/responses", body: `{"model":"gpt-5","input":"hi","tools":[{"type":"function","type":"mcp"}]}`, wantStatus: 400},
		{name: "tools not an array", path: "/anthropic/v1/messages", body: `{` + m + `,"tools":{"type":"web_fetch_20250910"}}`, wantStatus: 400},
		{name: "tool not an object", path: "/anthropic/v1/messages", body: `{` + m + `,"tools":["web_fetch"]}`, wantStatus: 400},
		{name: "function tool passes", path: "/anthropic/v1/messages", body: `{` + m + `,"tools":[{"name":"get_weather","input_schema":{"type":"object"}}]}`, wantStatus: 200},
		{name: "client tools pass", path: "/anthropic/v1/messages", body: `{` + m + `,"tools":[{"type":"bash_20250124","name":"bash"},{"type":"text_editor_20250728","name":"str_replace_based_edit_tool"}]}`, wantStatus: 200},
		{name: "null and empty pass", path: "/anthropic/v1/messages", body: `{` + m + `,"tools":null,"mcp_servers":[]}`, wantStatus: 200},
		{name: "tool named like one passes", path: "/anthropic/v1/messages", body: `{` + m + `,"tools":[{"name":"web_fetch","description":"type mcp","input_schema":{}}]}`, wantStatus: 200},
		{name: "allowed by the unsafe switch", path: "/anthropic/v1/messages", body: `{` + m + `,"tools":[{"type":"web_search_20250305","name":"web_search"}]}`, unsafe: true, wantStatus: 200},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			tr := startRelay(t, withConfig(func(c *Config) { c.UnsafeAllowServerTools = tt.unsafe }))
			tr.model.override = func(w http.ResponseWriter, _ *http.Request, _ []byte) {
				w.Header().Set("Content-Type", "application/json")
				_, _ = w.Write([]byte(anthropicJSON))
			}
			resp, body := tr.do(t, http.MethodPost, tt.path, tt.body, map[string]string{"X-Api-Key": tokenS1})
			if resp.StatusCode != tt.wantStatus {
				t.Fatalf("status %d, want %d: %s", resp.StatusCode, tt.wantStatus, body)
			}
			if tt.wantStatus == 200 {
				return
			}
			provider := llmprovider.OpenAI
			if strings.HasPrefix(tt.path, "/anthropic") {
				provider = llmprovider.Anthropic
			}
			_, msg := errorMessage(t, provider, body)
			if tt.wantStatus == 403 && (!strings.Contains(msg, tt.wantTool) || !strings.Contains(msg, "relay.unsafe_allow_server_tools")) {
				t.Fatalf("message %q", msg)
			}
			if len(tr.model.requests()) != 0 {
				t.Fatal("the request went upstream")
			}
			if c := tr.sink.waitCalls(t, 1)[0]; c.StatusCode != 0 || c.Error == "" {
				t.Fatalf("record %+v", c)
			}
		})
	}
}
