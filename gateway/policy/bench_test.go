package policy

import (
	"context"
	"io/fs"
	"os"
	"path/filepath"
	"sync/atomic"
	"testing"
	"time"
)

// countFS counts the filesystem calls of the path canonicaliser.
type countFS struct {
	inner FileSystem
	n     atomic.Int64
}

func (c *countFS) Lstat(name string) (fs.FileMode, error) {
	c.n.Add(1)
	return c.inner.Lstat(name)
}

func (c *countFS) LstatID(name string) (fs.FileMode, fileID, error) {
	c.n.Add(1)
	if f, ok := c.inner.(idFS); ok {
		return f.LstatID(name)
	}
	m, err := c.inner.Lstat(name)
	return m, fileID{}, err
}

func (c *countFS) Readlink(name string) (string, error) {
	c.n.Add(1)
	return c.inner.Readlink(name)
}

// benchEngine builds the fixture engine on a fresh tree with a counting
// filesystem.
func benchEngine(b *testing.B, s suite) (*Engine, tree, *countFS) {
	b.Helper()
	return benchEngineWith(b, s, withGit(b))
}

// benchEngineWith is benchEngine with the resolver of opts.
func benchEngineWith(b *testing.B, s suite, opts ...Option) (*Engine, tree, *countFS) {
	b.Helper()
	tr := newTree(b)
	tr.apply(b, s.Setup)
	e := tr.engineWith(b, s, opts...)
	cfs := &countFS{inner: osFS{}}
	e.canon.fs = cfs
	return e, tr, cfs
}

func runBench(b *testing.B, e *Engine, cfs *countFS, r Request, want Status) {
	b.Helper()
	ctx := context.Background()
	if d := e.Evaluate(ctx, r).Decision; d.Status != want {
		b.Fatalf("decision = %s (%s: %s), want %s", d.Status, d.Rule, d.Reason, want)
	}
	cfs.n.Store(0)
	lstats, _ := TestResolverStats(e.remotes)
	b.ReportAllocs()
	cpu := processCPU()
	b.ResetTimer()
	for i := 0; i < b.N; i++ {
		e.Evaluate(ctx, r)
	}
	b.StopTimer()
	// CPU time of this process (git children excluded) per evaluation.
	b.ReportMetric(float64(processCPU()-cpu)/float64(b.N), "cpu-ns/op")
	// Path canonicalisation calls plus the resolver cache's lstats.
	lstatsAfter, _ := TestResolverStats(e.remotes)
	b.ReportMetric(float64(cfs.n.Load()+lstatsAfter-lstats)/float64(b.N), "fscalls/op")
}

// BenchmarkEvaluateNoPathRoles: a call whose tool has no path (or other
// resource) roles.
func BenchmarkEvaluateNoPathRoles(b *testing.B) {
	e, _, cfs := benchEngine(b, suite{})
	runBench(b, e, cfs, Request{Server: "fetch", Tool: "web_search", Args: map[string]any{"query": "golang generics", "max_results": 5.0}}, Allow)
}

// BenchmarkEvaluateReadExisting: a filesystem read of an existing file in
// the sandbox.
func BenchmarkEvaluateReadExisting(b *testing.B) {
	e, tr, cfs := benchEngine(b, suite{Setup: []op{{Write: "$SANDBOX/src/main.go"}}})
	runBench(b, e, cfs, Request{Server: "filesystem", Tool: "read_text_file", Args: map[string]any{"path": tr.sandbox + "/src/main.go"}}, Allow)
}

// BenchmarkEvaluateReadMissing: the same for a file that does not exist yet.
func BenchmarkEvaluateReadMissing(b *testing.B) {
	e, tr, cfs := benchEngine(b, suite{Setup: []op{{Mkdir: "$SANDBOX/src"}}})
	runBench(b, e, cfs, Request{Server: "filesystem", Tool: "read_text_file", Args: map[string]any{"path": tr.sandbox + "/src/new/main.go"}}, Allow)
}

// BenchmarkEvaluateWriteNew: a write of a new file in the sandbox.
func BenchmarkEvaluateWriteNew(b *testing.B) {
	e, tr, cfs := benchEngine(b, suite{Setup: []op{{Mkdir: "$SANDBOX/src"}}})
	runBench(b, e, cfs, Request{Server: "filesystem", Tool: "write_file", Args: map[string]any{"path": tr.sandbox + "/src/new.go", "content": "package x"}}, Allow)
}

// BenchmarkEvaluateFetchURL: a URL role matched against dynamic lists (an
// allowlisted URL; the original TypeScript engine takes 5.4 µs).
func BenchmarkEvaluateFetchURL(b *testing.B) {
	e, _, cfs := benchEngine(b, suite{})
	runBench(b, e, cfs, Request{Server: "fetch", Tool: "http_fetch", Args: map[string]any{"url": "https://pkg.go.dev/net/url"}}, Allow)
}

// BenchmarkEvaluateFetchURLUnlisted: the same for a URL on no list: every
// domain rule is tried and fails, the catch-all escalates (the original
// TypeScript engine takes 10.4 µs).
func BenchmarkEvaluateFetchURLUnlisted(b *testing.B) {
	e, _, cfs := benchEngine(b, suite{})
	runBench(b, e, cfs, Request{Server: "fetch", Tool: "http_fetch", Args: map[string]any{"url": "https://unlisted.example.net/docs/page?id=42"}}, Escalate)
}

func pushSetup() []op {
	return []op{
		{GitRepo: "$SANDBOX/app"},
		{Git: []string{"$SANDBOX/app", "remote", "add", "origin", "git@github.com:acme/app.git"}},
		{Git: []string{"$SANDBOX/app", "branch", "feature"}},
	}
}

// BenchmarkEvaluateGitPushOrigin: a push naming origin, with the resolution
// cache warm (the repository's files are older than the racy window).
func BenchmarkEvaluateGitPushOrigin(b *testing.B) {
	e, tr, cfs := benchEngine(b, suite{Setup: pushSetup()})
	ageFiles(b, filepath.Join(tr.sandbox, "app", ".git"))
	r := Request{Server: "git", Tool: "push", Args: map[string]any{"path": tr.sandbox + "/app", "remote": "origin", "branch": "feature"}}
	runBench(b, e, cfs, r, Allow)
}

// BenchmarkEvaluateGitPushOriginCold: the same with the cache defeated, so
// every evaluation finds the repository, checks its git directory and reads
// its config natively (no git process).
func BenchmarkEvaluateGitPushOriginCold(b *testing.B) {
	e, tr, cfs := benchEngineWith(b, suite{Setup: pushSetup()}, withResolver(b, TestResolverConfig{Cold: true}))
	r := Request{Server: "git", Tool: "push", Args: map[string]any{"path": tr.sandbox + "/app", "remote": "origin", "branch": "feature"}}
	runBench(b, e, cfs, r, Allow)
	if _, n := TestResolverStats(e.remotes); n != 0 {
		b.Fatalf("%d resolutions fell back to git", n)
	}
}

// BenchmarkEvaluateGitPushOriginColdGit: the cold path through the git
// fallback (git config --list and git remote get-url), for comparison.
func BenchmarkEvaluateGitPushOriginColdGit(b *testing.B) {
	e, tr, cfs := benchEngineWith(b, suite{Setup: pushSetup()}, withResolver(b, TestResolverConfig{Cold: true, ViaGit: true}))
	r := Request{Server: "git", Tool: "push", Args: map[string]any{"path": tr.sandbox + "/app", "remote": "origin", "branch": "feature"}}
	runBench(b, e, cfs, r, Allow)
}

// ageFiles waits until the repository's files are older than the racy
// window (ctime cannot be set), so that the resolver may cache.
func ageFiles(b *testing.B, gitDir string) {
	b.Helper()
	var newest time.Time
	for _, f := range []string{"HEAD", "config"} {
		fi, err := os.Stat(filepath.Join(gitDir, f))
		if err != nil {
			b.Fatal(err)
		}
		if fi.ModTime().After(newest) {
			newest = fi.ModTime()
		}
	}
	time.Sleep(time.Until(newest.Add(resolverRacyWindow + 200*time.Millisecond)))
}

// resolverRacyWindow is gitremote's racy window: files changed more
// recently are never cached.
const resolverRacyWindow = 2 * time.Second
