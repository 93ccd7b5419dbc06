package mcphub_test

import (
	"context"
	"net/http"
	"net/http/httptest"
	"testing"
	"time"

	"github.com/mark3labs/mcp-go/mcp"
	"github.com/mark3labs/mcp-go/server"
	sdk "github.com/modelcontextprotocol/go-sdk/mcp"
)

// BenchmarkMCPOverHTTPShare measures the gateway's share of one MCP call
// over streamable HTTP: the same go-sdk client calls the same built-in
// filesystem tool through the gateway's /mcp handler (authentication, the
// JSON-RPC gate, fair queuing, policy, write-ahead audit, result cap) and
// through a bare mcp-go streamable HTTP server whose handler calls the tool
// directly, alternating call by call so both see the same load. It reports
// the median of each and their difference, the gateway's share (target:
// <= 25 µs).
// Run: go test -run XXX -bench MCPOverHTTPShare -benchtime 3000x ./internal/doors/mcphub
func BenchmarkMCPOverHTTPShare(b *testing.B) {
	s := newBenchSetup(b, false)
	var def *mcp.Tool
	for _, t := range s.fs.Tools() {
		if t.Name == "read_text_file" {
			tool := mcp.NewToolWithRawSchema("filesystem__read_text_file", t.Description, t.InputSchema)
			def = &tool
		}
	}
	if def == nil {
		b.Fatal("filesystem has no read_text_file")
	}
	bare := server.NewMCPServer("bare", "1", server.WithToolCapabilities(false))
	bare.AddTool(*def, func(ctx context.Context, req mcp.CallToolRequest) (*mcp.CallToolResult, error) {
		args, _ := req.Params.Arguments.(map[string]any)
		r, err := s.fs.Call(ctx, "read_text_file", args)
		if err != nil || r.IsError || len(r.Content) == 0 {
			return mcp.NewToolResultError("read failed"), nil
		}
		return mcp.NewToolResultText(r.Content[0].Text), nil
	})
	bareSrv := httptest.NewServer(server.NewStreamableHTTPServer(bare))
	b.Cleanup(bareSrv.Close)
	gwSrv := httptest.NewServer(s.hub.Handler())
	b.Cleanup(gwSrv.Close)

	connect := func(url string) *sdk.ClientSession {
		c := sdk.NewClient(&sdk.Implementation{Name: "bench", Version: "1"}, nil)
		cs, err := c.Connect(context.Background(), &sdk.StreamableClientTransport{
			Endpoint:   url,
			HTTPClient: &http.Client{Transport: bearerRT{base: http.DefaultTransport}},
			MaxRetries: -1,
		}, nil)
		if err != nil {
			b.Fatal(err)
		}
		b.Cleanup(func() { _ = cs.Close() })
		return cs
	}
	bareCS, gwCS := connect(bareSrv.URL), connect(gwSrv.URL)
	params := &sdk.CallToolParams{Name: "filesystem__read_text_file", Arguments: map[string]any{"path": s.path}}
	call := func(cs *sdk.ClientSession) time.Duration {
		t0 := time.Now()
		res, err := cs.CallTool(context.Background(), params)
		d := time.Since(t0)
		if err != nil || res.IsError {
			b.Fatalf("%+v %v", res, err)
		}
		return d
	}
	for range 50 { // warm both connections
		call(bareCS)
		call(gwCS)
	}
	bareT, gwT := make([]time.Duration, 0, b.N), make([]time.Duration, 0, b.N)
	b.ReportAllocs()
	b.ResetTimer()
	for i := 0; i < b.N; i++ {
		if i%2 == 0 { // alternate which goes first
			bareT = append(bareT, call(bareCS))
			gwT = append(gwT, call(gwCS))
		} else {
			gwT = append(gwT, call(gwCS))
			bareT = append(bareT, call(bareCS))
		}
	}
	b.StopTimer()
	bm, gm := median(bareT), median(gwT)
	b.ReportMetric(float64(bm.Nanoseconds())/1e3, "bare-p50-µs")
	b.ReportMetric(float64(gm.Nanoseconds())/1e3, "gateway-p50-µs")
	b.ReportMetric(float64((gm-bm).Nanoseconds())/1e3, "share-p50-µs")
}
