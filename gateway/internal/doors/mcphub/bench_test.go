package mcphub_test

import (
	"context"
	"net/http"
	"net/http/httptest"
	"os"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"testing"
	"time"

	sdk "github.com/modelcontextprotocol/go-sdk/mcp"

	"ironcurtain.dev/gateway/gitremote"
	"ironcurtain.dev/gateway/internal/audit"
	"ironcurtain.dev/gateway/internal/doors/mcphub"
	"ironcurtain.dev/gateway/internal/servers"
	"ironcurtain.dev/gateway/internal/servers/filesystem"
	"ironcurtain.dev/gateway/internal/session"
	"ironcurtain.dev/gateway/policies/base"
	"ironcurtain.dev/gateway/policy"
)

const (
	benchToken = "bench-agent-token-0123456789"
	quietToken = "quiet-agent-token-0123456789" // another agent (bench_wide_test.go)
)

// benchSetup is the real thing minus the network: the shipped base policy in
// the real engine, the real filesystem server on a temporary sandbox, and
// the JSON-lines audit sink writing to a file.
type benchSetup struct {
	hub  *mcphub.Hub
	fs   *filesystem.Server
	path string
	sink *audit.JSONL
	deps mcphub.Deps // what hub was built with (bench_trace_test.go builds another)
}

func newBenchSetup(tb testing.TB, fsync bool) *benchSetup {
	tb.Helper()
	root, err := filepath.EvalSymlinks(tb.TempDir())
	if err != nil {
		tb.Fatal(err)
	}
	sandbox := filepath.Join(root, "sandbox")
	if err := os.Mkdir(sandbox, 0o755); err != nil {
		tb.Fatal(err)
	}
	file := filepath.Join(sandbox, "notes.txt")
	if err := os.WriteFile(file, []byte(strings.Repeat("a line of notes\n", 64)), 0o644); err != nil {
		tb.Fatal(err)
	}
	read := func(name string) []byte {
		b, err := base.FS.ReadFile(name)
		if err != nil {
			tb.Fatal(err)
		}
		return b
	}
	cp, err := policy.ParseCompiledPolicy(policy.CompiledPolicyFile, read(policy.CompiledPolicyFile))
	if err != nil {
		tb.Fatal(err)
	}
	ann, err := policy.ParseAnnotations(policy.AnnotationsFile, read(policy.AnnotationsFile))
	if err != nil {
		tb.Fatal(err)
	}
	eng, err := policy.New(cp, ann, nil, policy.Settings{Sandbox: sandbox, Home: root}, policy.WithRemoteResolver(gitremote.New(gitremote.Options{})))
	if err != nil {
		tb.Fatal(err)
	}
	fs, err := filesystem.New(filesystem.Config{Root: sandbox})
	if err != nil {
		tb.Fatal(err)
	}
	var opts []audit.JSONLOption
	if fsync {
		opts = append(opts, audit.Fsync())
	}
	sink, err := audit.OpenJSONL(filepath.Join(root, "audit.jsonl"), opts...)
	if err != nil {
		tb.Fatal(err)
	}
	tb.Cleanup(func() { _ = sink.Close() })
	tokens := map[string]string{"bench": benchToken, "quiet": quietToken}
	for i := range 8 {
		tokens["wide"+strconv.Itoa(i)] = wideToken(i) // bench_wide_test.go
	}
	auth, err := session.NewStatic(tokens)
	if err != nil {
		tb.Fatal(err)
	}
	deps := mcphub.Deps{Servers: []servers.Server{fs}, Policy: eng, Audit: sink, Auth: auth}
	hub, err := mcphub.New(mcphub.Config{}, deps)
	if err != nil {
		tb.Fatal(err)
	}
	s := &benchSetup{hub: hub, fs: fs, path: file, sink: sink, deps: deps}
	// Both paths must work before they are timed.
	if r, err := fs.Call(context.Background(), "read_text_file", map[string]any{"path": file}); err != nil || r.IsError {
		tb.Fatalf("direct call: %+v %v", r, err)
	}
	if r := s.viaHub(); r.IsError {
		tb.Fatalf("hub call: %+v", r)
	}
	return s
}

func (s *benchSetup) viaHub() servers.Result {
	return s.hub.Call(context.Background(), mcphub.CallRequest{
		Session: session.Session{ID: "bench"}, Tool: "filesystem__read_text_file",
		Args: map[string]any{"path": s.path},
	})
}

func (s *benchSetup) direct() (servers.Result, error) {
	return s.fs.Call(context.Background(), "read_text_file", map[string]any{"path": s.path})
}

// BenchmarkDirectRead calls the built-in filesystem tool directly.
func BenchmarkDirectRead(b *testing.B) {
	s := newBenchSetup(b, false)
	b.ReportAllocs()
	for b.Loop() {
		if _, err := s.direct(); err != nil {
			b.Fatal(err)
		}
	}
}

// BenchmarkHubRead makes the same call through the pipeline: policy
// evaluation, write-ahead decision and outcome in the JSON-lines sink,
// dispatch with timeout, result cap, metrics.
func BenchmarkHubRead(b *testing.B) {
	s := newBenchSetup(b, false)
	b.ReportAllocs()
	for b.Loop() {
		if r := s.viaHub(); r.IsError {
			b.Fatal(r.Content[0].Text)
		}
	}
}

// BenchmarkHubOverheadMedian times each direct call and each hub call,
// interleaved so both see the same machine load, and reports the medians
// and the added median (hub − direct). The target is ≤ 200 µs.
func BenchmarkHubOverheadMedian(b *testing.B) {
	for _, fsync := range []bool{false, true} {
		name := "jsonl"
		if fsync {
			name = "jsonl-fsync"
		}
		b.Run(name, func(b *testing.B) {
			s := newBenchSetup(b, fsync)
			direct := make([]time.Duration, 0, b.N)
			hub := make([]time.Duration, 0, b.N)
			b.ReportAllocs()
			for b.Loop() {
				t0 := time.Now()
				if _, err := s.direct(); err != nil {
					b.Fatal(err)
				}
				t1 := time.Now()
				if r := s.viaHub(); r.IsError {
					b.Fatal(r.Content[0].Text)
				}
				t2 := time.Now()
				direct = append(direct, t1.Sub(t0))
				hub = append(hub, t2.Sub(t1))
			}
			dm, hm := median(direct), median(hub)
			b.ReportMetric(float64(dm.Nanoseconds())/1e3, "direct-p50-µs")
			b.ReportMetric(float64(hm.Nanoseconds())/1e3, "hub-p50-µs")
			b.ReportMetric(float64((hm-dm).Nanoseconds())/1e3, "added-p50-µs")
		})
	}
}

func median(d []time.Duration) time.Duration {
	if len(d) == 0 {
		return 0
	}
	s := slices.Clone(d)
	slices.Sort(s)
	return s[len(s)/2]
}

// BenchmarkMCPOverHTTPRead is the whole agent-facing path: the official
// go-sdk client calling over streamable HTTP on loopback (JSON-RPC, HTTP,
// authentication, the pipeline).
func BenchmarkMCPOverHTTPRead(b *testing.B) {
	s := newBenchSetup(b, false)
	ts := httptest.NewServer(s.hub.Handler())
	b.Cleanup(ts.Close)
	c := sdk.NewClient(&sdk.Implementation{Name: "bench", Version: "1"}, nil)
	cs, err := c.Connect(context.Background(), &sdk.StreamableClientTransport{
		Endpoint:   ts.URL,
		HTTPClient: &http.Client{Transport: bearerRT{base: http.DefaultTransport}},
		MaxRetries: -1,
	}, nil)
	if err != nil {
		b.Fatal(err)
	}
	b.Cleanup(func() { _ = cs.Close() })
	params := &sdk.CallToolParams{Name: "filesystem__read_text_file", Arguments: map[string]any{"path": s.path}}
	b.ReportAllocs()
	for b.Loop() {
		res, err := cs.CallTool(context.Background(), params)
		if err != nil || res.IsError {
			b.Fatalf("%+v %v", res, err)
		}
	}
}

type bearerRT struct{ base http.RoundTripper }

func (t bearerRT) RoundTrip(r *http.Request) (*http.Response, error) {
	r = r.Clone(r.Context())
	r.Header.Set("Authorization", "Bearer "+benchToken)
	return t.base.RoundTrip(r)
}
