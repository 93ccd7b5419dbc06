package agente2e

import (
	"context"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"ironcurtain.dev/agent/mcpclient"
	"ironcurtain.dev/agent/runner"
	"ironcurtain.dev/agent/sandbox"
	"ironcurtain.dev/agent/tsdecl"
	"ironcurtain.dev/gateway/gitremote"
	"ironcurtain.dev/gateway/internal/audit/audittest"
	"ironcurtain.dev/gateway/internal/doors/mcphub"
	"ironcurtain.dev/gateway/internal/servers"
	"ironcurtain.dev/gateway/internal/servers/filesystem"
	"ironcurtain.dev/gateway/internal/session"
	"ironcurtain.dev/gateway/policy"
)

// timedCaller measures the time spent inside tool calls.
type timedCaller struct {
	inner runner.MCPCaller
	spent atomic.Int64
}

func (t *timedCaller) CallTool(ctx context.Context, c sandbox.Call) (sandbox.Reply, error) {
	start := time.Now()
	r, err := t.inner.CallTool(ctx, c)
	t.spent.Add(int64(time.Since(start)))
	return r, err
}

const tenReads = `
const root = "SANDBOX";
let total = 0;
for (let i = 0; i < 10; i++) {
  total += filesystem.read_text_file({ path: root + "/f" + i + ".txt" }).length;
}
return total;
`

// startReadGateway runs the real hub with the shipped policy and the
// filesystem server on a sandbox holding f0.txt … f9.txt.
func startReadGateway(b *testing.B) *world {
	b.Helper()
	root, err := filepath.EvalSymlinks(b.TempDir())
	if err != nil {
		b.Fatal(err)
	}
	w := &world{sandbox: root, audit: &audittest.Sink{}}
	for i := 0; i < 10; i++ {
		if err := os.WriteFile(filepath.Join(root, fmt.Sprintf("f%d.txt", i)), []byte("hello\n"), 0o644); err != nil {
			b.Fatal(err)
		}
	}
	eng, err := policy.LoadDir(filepath.Join("..", "..", "policies", "base"), policy.Settings{Sandbox: root, Home: b.TempDir()}, policy.WithRemoteResolver(gitremote.New(gitremote.Options{})))
	if err != nil {
		b.Fatal(err)
	}
	fs, err := filesystem.New(filesystem.Config{Root: root})
	if err != nil {
		b.Fatal(err)
	}
	auth, err := session.NewStatic(map[string]string{"bench": agentToken})
	if err != nil {
		b.Fatal(err)
	}
	hub, err := mcphub.New(mcphub.Config{}, mcphub.Deps{Servers: []servers.Server{fs}, Policy: eng, Audit: w.audit, Auth: auth})
	if err != nil {
		b.Fatal(err)
	}
	w.url = serveHub(b, hub)
	return w
}

// BenchmarkAgentAgainstHub: transpile + run of a script making 10 tool
// calls through the real hub (policy, audit, filesystem server) over HTTP.
// overhead-ms/op is the agent's own cost: total minus time inside calls.
func BenchmarkAgentAgainstHub(b *testing.B) {
	w := startReadGateway(b)
	ctx := context.Background()
	c, err := mcpclient.Connect(ctx, mcpclient.Config{URL: w.url, Token: agentToken})
	if err != nil {
		b.Fatal(err)
	}
	defer c.Close()
	tools, err := c.Tools(ctx)
	if err != nil {
		b.Fatal(err)
	}
	caller := &timedCaller{inner: runner.MCPCaller{Client: c}}
	sb := sandbox.New(tsdecl.Generate(tools).Functions, caller, sandbox.Limits{})
	code := strings.ReplaceAll(tenReads, "SANDBOX", w.sandbox)
	if res := sb.Run(ctx, code); res.Err != nil || res.ToolCalls != 10 || res.Value != "60" {
		b.Fatalf("warm-up: %s", res.Report())
	}
	caller.spent.Store(0)
	b.ReportAllocs()
	b.ResetTimer()
	start := time.Now()
	for b.Loop() {
		if res := sb.Run(ctx, code); res.Err != nil {
			b.Fatal(res.Err)
		}
	}
	total := time.Since(start)
	b.StopTimer()
	tool := time.Duration(caller.spent.Load())
	b.ReportMetric(float64(tool.Microseconds())/1000/float64(b.N), "toolcalls-ms/op")
	b.ReportMetric(float64((total-tool).Microseconds())/1000/float64(b.N), "overhead-ms/op")
}
