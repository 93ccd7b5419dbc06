package sandbox_test

import (
	"context"
	"sync/atomic"
	"testing"
	"time"

	"ironcurtain.dev/agent/internal/mcptest"
	"ironcurtain.dev/agent/mcpclient"
	"ironcurtain.dev/agent/sandbox"
	"ironcurtain.dev/agent/tsdecl"
)

// timedCaller calls the MCP server and adds up the time spent in calls.
type timedCaller struct {
	c     *mcpclient.Client
	spent atomic.Int64
}

func (t *timedCaller) CallTool(ctx context.Context, call sandbox.Call) (sandbox.Reply, error) {
	start := time.Now()
	res, err := t.c.Call(ctx, call.Tool, call.Args)
	t.spent.Add(int64(time.Since(start)))
	if err != nil {
		return sandbox.Reply{}, err
	}
	return sandbox.Reply{Text: res.Text, IsError: res.IsError}, nil
}

const tenCalls = `
interface Entry { name: string; size: number }
const files: string[] = [];
for (let i = 0; i < 10; i++) {
  const text: string = filesystem.read_text_file({ path: "/workspace/file" + i + ".txt" });
  files.push(text);
}
const entries: Entry[] = files.map((f, i) => ({ name: "file" + i, size: f.length }));
console.log("read", entries.length, "files");
return entries.reduce((n, e) => n + e.size, 0);
`

// BenchmarkRunTenToolCalls measures transpile + run of a small script making
// 10 tool calls against an in-process MCP server (streamable HTTP on
// loopback), and reports the overhead beyond the tool calls: total time
// minus the time spent inside the calls, per run (target ≤ 20 ms).
func BenchmarkRunTenToolCalls(b *testing.B) {
	srv := mcptest.Start("bench-token-0123456789",
		mcptest.Tool{Name: "filesystem__read_text_file", Schema: `{"type":"object","properties":{"path":{"type":"string"}},"required":["path"]}`,
			Handler: func(_ context.Context, a map[string]any) (string, bool) {
				return "contents of " + a["path"].(string), false
			}})
	defer srv.Close()
	ctx := context.Background()
	client, err := mcpclient.Connect(ctx, mcpclient.Config{URL: srv.URL, Token: "bench-token-0123456789"})
	if err != nil {
		b.Fatal(err)
	}
	defer client.Close()
	tools, err := client.Tools(ctx)
	if err != nil {
		b.Fatal(err)
	}
	caller := &timedCaller{c: client}
	sb := sandbox.New(tsdecl.Generate(tools).Functions, caller, sandbox.Limits{})
	if res := sb.Run(ctx, tenCalls); res.Err != nil || res.ToolCalls != 10 {
		b.Fatalf("warm-up run: %+v", res)
	}
	caller.spent.Store(0)
	b.ReportAllocs()
	b.ResetTimer()
	start := time.Now()
	for b.Loop() {
		res := sb.Run(ctx, tenCalls)
		if res.Err != nil {
			b.Fatal(res.Err)
		}
	}
	total := time.Since(start)
	b.StopTimer()
	n := float64(b.N)
	tool := time.Duration(caller.spent.Load())
	b.ReportMetric(float64(tool.Microseconds())/1000/n, "toolcalls-ms/op")
	b.ReportMetric(float64((total-tool).Microseconds())/1000/n, "overhead-ms/op")
}

// BenchmarkRunNoTools isolates transpile + runtime setup + run.
func BenchmarkRunNoTools(b *testing.B) {
	sb := sandbox.New(nil, nil, sandbox.Limits{})
	code := "const xs: number[] = [1, 2, 3];\nreturn xs.map((x) => x * 2).join(',')"
	b.ReportAllocs()
	for b.Loop() {
		if res := sb.Run(context.Background(), code); res.Err != nil {
			b.Fatal(res.Err)
		}
	}
}
