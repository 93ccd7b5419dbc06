package deploy

import (
	"bufio"
	"bytes"
	"context"
	"encoding/json"
	"os/exec"
	"strings"
	"testing"
	"time"

	"ironcurtain.dev/e2e/internal/mcpfixture"
	"ironcurtain.dev/e2e/internal/testenv"
)

// TestServerScriptsSpeakMCP runs the dependency-free MCP servers the Debian
// server images bake in (images/servers/testdata) with the host's node and
// python3: each answers initialize, lists exactly the tool the e2e suite
// pins (mcpfixture.RuntimeEchoTool: a drift would hide the tool in
// TestConfinedRuntimeServers), echoes with its runtime's name, refuses an
// unknown tool, method and malformed line with JSON-RPC errors, ignores
// notifications, and exits when stdin closes.
func TestServerScriptsSpeakMCP(t *testing.T) {
	for _, tc := range []struct{ runtime, script, prefix string }{
		{"node", "images/servers/testdata/mcp-echo.js", "node v"},
		{"python3", "images/servers/testdata/mcp-echo.py", "python 3."},
	} {
		t.Run(tc.runtime, func(t *testing.T) {
			bin := testenv.Require(t, tc.runtime)
			in := strings.Join([]string{
				`{"jsonrpc":"2.0","id":1,"method":"initialize","params":{"protocolVersion":"2025-06-18","capabilities":{},"clientInfo":{"name":"t","version":"1"}}}`,
				`{"jsonrpc":"2.0","method":"notifications/initialized"}`,
				`{"jsonrpc":"2.0","id":2,"method":"tools/list"}`,
				`{"jsonrpc":"2.0","id":3,"method":"tools/call","params":{"name":"echo","arguments":{"text":"héllo \"q\""}}}`,
				`{"jsonrpc":"2.0","id":4,"method":"tools/call","params":{"name":"nosuch","arguments":{}}}`,
				`{"jsonrpc":"2.0","id":5,"method":"tools/call","params":{"name":"echo","arguments":{"text":7}}}`,
				`{"jsonrpc":"2.0","id":6,"method":"resources/list"}`,
				`not json`,
				`{"jsonrpc":"2.0","id":7,"method":"ping"}`,
			}, "\n") + "\n"
			ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
			defer cancel()
			cmd := exec.CommandContext(ctx, bin, repoPath(tc.script))
			cmd.Stdin = strings.NewReader(in)
			var stderr bytes.Buffer
			cmd.Stderr = &stderr
			out, err := cmd.Output()
			if err != nil {
				t.Fatalf("%s %s: %v (it must exit 0 when stdin closes)\n%s", tc.runtime, tc.script, err, stderr.String())
			}
			type rpcError struct {
				Code int `json:"code"`
			}
			type response struct {
				ID     json.RawMessage `json:"id"`
				Result json.RawMessage `json:"result"`
				Error  *rpcError       `json:"error"`
			}
			byID := map[string]response{}
			sc := bufio.NewScanner(bytes.NewReader(out))
			for sc.Scan() {
				var r response
				if err := json.Unmarshal(sc.Bytes(), &r); err != nil {
					t.Fatalf("stdout line is not JSON-RPC: %q", sc.Text())
				}
				byID[string(r.ID)] = r
			}
			if len(byID) != 8 {
				t.Errorf("%d responses, want 8 (7 requests and the parse error; no answer to a notification):\n%s", len(byID), out)
			}
			var init struct {
				ProtocolVersion string `json:"protocolVersion"`
				Capabilities    struct {
					Tools *struct{} `json:"tools"`
				} `json:"capabilities"`
			}
			if err := json.Unmarshal(byID["1"].Result, &init); err != nil || init.ProtocolVersion != "2025-06-18" || init.Capabilities.Tools == nil {
				t.Errorf("initialize: %s (%v)", byID["1"].Result, err)
			}
			var list struct {
				Tools []struct {
					Name        string          `json:"name"`
					Description string          `json:"description"`
					InputSchema json.RawMessage `json:"inputSchema"`
				} `json:"tools"`
			}
			want := mcpfixture.RuntimeEchoTool
			if err := json.Unmarshal(byID["2"].Result, &list); err != nil || len(list.Tools) != 1 {
				t.Fatalf("tools/list: %s (%v)", byID["2"].Result, err)
			}
			got := list.Tools[0]
			var gotSchema, wantSchema any
			_ = json.Unmarshal(got.InputSchema, &gotSchema)
			_ = json.Unmarshal(want.Schema, &wantSchema)
			gs, _ := json.Marshal(gotSchema)
			ws, _ := json.Marshal(wantSchema)
			if got.Name != want.Name || got.Description != want.Description || !bytes.Equal(gs, ws) {
				t.Errorf("listed tool %s %q %s, want mcpfixture.RuntimeEchoTool %s %q %s", got.Name, got.Description, gs, want.Name, want.Description, ws)
			}
			var call struct {
				Content []struct{ Type, Text string } `json:"content"`
				IsError bool                          `json:"isError"`
			}
			if err := json.Unmarshal(byID["3"].Result, &call); err != nil || call.IsError || len(call.Content) != 1 ||
				!strings.HasPrefix(call.Content[0].Text, tc.prefix) || !strings.HasSuffix(call.Content[0].Text, ` echo: héllo "q"`) {
				t.Errorf("tools/call echo: %s (%v)", byID["3"].Result, err)
			}
			if r := byID["4"]; r.Error == nil || r.Error.Code != -32602 {
				t.Errorf("unknown tool: %+v", r)
			}
			call.IsError = false
			if err := json.Unmarshal(byID["5"].Result, &call); err != nil || !call.IsError {
				t.Errorf("a text that is not a string: %s, want a tool error", byID["5"].Result)
			}
			if r := byID["6"]; r.Error == nil || r.Error.Code != -32601 {
				t.Errorf("unknown method: %+v", r)
			}
			if r := byID["null"]; r.Error == nil || r.Error.Code != -32700 {
				t.Errorf("malformed line: %+v", r)
			}
			if r := byID["7"]; r.Error != nil || string(r.Result) != "{}" {
				t.Errorf("ping: %+v", r)
			}
		})
	}
}
