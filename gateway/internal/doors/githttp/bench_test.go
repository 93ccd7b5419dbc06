package githttp

import (
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"runtime"
	"strconv"
	"strings"
	"sync/atomic"
	"syscall"
	"testing"
	"time"
)

// BenchmarkPush pushes a one-commit change and a commit adding ~10 MB of
// incompressible data, through the door (allow-everything policy, in-memory
// audit) and directly to the same upstream (git http-backend over TLS), with
// the real git client. Compare the ns/op of door and direct for the ratio,
// and their cpu-ms/op: the CPU time of every process of the push (the
// client git, the door in this process, its git processes, the upstream's
// git http-backend), which a busy machine disturbs less than wall time.
//
//	go test ./internal/doors/githttp/ -run XXX -bench BenchmarkPush -benchtime 10x
func BenchmarkPush(b *testing.B) {
	for _, size := range []struct {
		name  string
		bytes int
	}{
		{name: "one-commit", bytes: 0},
		{name: "10MB", bytes: 10 << 20},
	} {
		for _, via := range []string{"direct", "door"} {
			b.Run(size.name+"/"+via, func(b *testing.B) {
				e := newEnv(b, envOptions{})
				work := e.clone(b)
				remote := e.url
				if via == "direct" {
					remote = "https://x-access-token:" + upstreamToken + "@" + e.up.host + "/acme/app.git"
					e.mustGit(b, work, "config", "http.sslCAInfo", e.up.caFile)
				}
				e.mustGit(b, work, "remote", "set-url", "origin", remote)
				e.mustGit(b, work, "switch", "-q", "-c", "feature")
				e.commit(b, work, "start.txt", "start\n")
				e.mustGit(b, work, "push", "-q", "origin", "feature")
				var cpu time.Duration
				b.ResetTimer()
				for i := 0; i < b.N; i++ {
					b.StopTimer()
					name := fmt.Sprintf("f%d.txt", i)
					content := fmt.Sprintf("change %d\n", i)
					if size.bytes > 0 {
						name = fmt.Sprintf("big%d.bin", i)
						content = randomTextSeed(size.bytes, uint64(i+1)*0x9e3779b97f4a7c15)
					}
					e.commit(b, work, name, content)
					before := cpuTime(b)
					b.StartTimer()
					e.mustGit(b, work, "push", "-q", "origin", "feature")
					b.StopTimer()
					cpu += cpuTime(b) - before
					b.StartTimer()
				}
				b.StopTimer()
				b.ReportMetric(float64(cpu.Microseconds())/1000/float64(b.N), "cpu-ms/op")
				if got, want := e.upstreamRef(b, "refs/heads/feature"), strings.TrimSpace(e.mustGit(b, work, "rev-parse", "HEAD")); got != want {
					b.Fatalf("upstream feature %s, want %s", got, want)
				}
			})
		}
	}
}

// cpuTime is the user and system CPU time of this process and of its
// children that have been waited for (every git process of a finished push,
// the upstream's CGI included).
func cpuTime(b *testing.B) time.Duration {
	var self, children syscall.Rusage
	if err := syscall.Getrusage(syscall.RUSAGE_SELF, &self); err != nil {
		b.Fatal(err)
	}
	if err := syscall.Getrusage(syscall.RUSAGE_CHILDREN, &children); err != nil {
		b.Fatal(err)
	}
	var t time.Duration
	for _, ru := range []*syscall.Rusage{&self, &children} {
		t += time.Duration(ru.Utime.Nano() + ru.Stime.Nano())
	}
	return t
}

// randomTextSeed is n bytes that do not compress, from seed.
func randomTextSeed(n int, seed uint64) string {
	buf := make([]byte, n)
	x := seed | 1
	for i := range buf {
		x ^= x << 13
		x ^= x >> 7
		x ^= x << 17
		buf[i] = byte('!' + x%90)
	}
	return string(buf)
}

// BenchmarkPushMemory pushes IC_BENCH_PACK_MB (default 100) megabytes of
// incompressible data through the door and reports the gateway process's
// peak Go heap while it streams (sampled every 10 ms): the pack goes through
// pipes to git, so the heap must not grow with it.
//
//	IC_BENCH_PACK_MB=500 go test ./internal/doors/githttp/ -run XXX -bench BenchmarkPushMemory -benchtime 1x
func BenchmarkPushMemory(b *testing.B) {
	mb := 100
	if v, err := strconv.Atoi(os.Getenv("IC_BENCH_PACK_MB")); err == nil && v > 0 {
		mb = v
	}
	// The whole push is scanned for secrets too (its blobs are read in
	// chunks: the heap stays bounded).
	e := newEnv(b, envOptions{cfg: Config{MaxPackBytes: int64(mb+16) << 20, MaxScanBytes: int64(mb+16) << 20}})
	work := e.clone(b)
	e.mustGit(b, work, "switch", "-q", "-c", "feature")
	for i := 0; i < b.N; i++ {
		b.StopTimer()
		e.commit(b, work, fmt.Sprintf("huge%d.bin", i), randomTextSeed(mb<<20, uint64(i+7)))
		base, peak := heapDuring(func() {
			b.StartTimer()
			e.mustGit(b, work, "push", "-q", "origin", "feature")
			b.StopTimer()
		})
		b.ReportMetric(float64(peak)/(1<<20), "peak-heap-MB")
		b.ReportMetric(float64(peak-min(peak, base))/(1<<20), "heap-growth-MB")
		b.ReportMetric(float64(mb), "pack-MB")
	}
}

// BenchmarkClone clones a repository holding ~10 MB of incompressible data
// through the door (a git__fetch decision and a refresh of the mirror from
// upstream, then the pack from the mirror) and directly from the same
// upstream, with the real git client. Compare the MB/s for the ratio.
//
//	go test ./internal/doors/githttp/ -run XXX -bench BenchmarkClone -benchtime 5x
func BenchmarkClone(b *testing.B) {
	const size = 10 << 20
	e := newEnv(b, envOptions{})
	work := e.clone(b)
	e.commit(b, work, "big.bin", randomTextSeed(size, 0x9e3779b97f4a7c15))
	e.mustGit(b, work, "push", "-q", "origin", "HEAD:refs/heads/data") // a clone fetches every branch
	for _, via := range []string{"direct", "door"} {
		b.Run(via, func(b *testing.B) {
			src := e.url
			var extra []string
			if via == "direct" {
				src = "https://x-access-token:" + upstreamToken + "@" + e.up.host + "/acme/app.git"
				extra = []string{"-c", "http.sslCAInfo=" + e.up.caFile}
			}
			b.SetBytes(size)
			b.ResetTimer()
			for i := 0; i < b.N; i++ {
				b.StopTimer()
				dir := filepath.Join(b.TempDir(), "c")
				b.StartTimer()
				e.mustGit(b, "", append(extra, "clone", "-q", src, dir)...)
			}
		})
	}
}

// fastImportCommits adds n commits on top of the branch checked out in
// dir with git fast-import, each changing one small file (n distinct
// blobs, trees and commits).
func (e *env) fastImportCommits(b *testing.B, dir, branch string, n, round int) {
	b.Helper()
	parent := strings.TrimSpace(e.mustGit(b, dir, "rev-parse", "HEAD"))
	var s strings.Builder
	for i := range n {
		msg := fmt.Sprintf("commit %d of round %d\n", i, round)
		body := fmt.Sprintf("round %d, change %d\n", round, i)
		fmt.Fprintf(&s, "commit refs/heads/%s\ncommitter Agent <agent@example.invalid> %d +0000\ndata %d\n%s", branch, 1700000000+i, len(msg), msg)
		if i == 0 {
			fmt.Fprintf(&s, "from %s\n", parent)
		}
		fmt.Fprintf(&s, "M 100644 inline many/f%d.txt\ndata %d\n%s\n", i%64, len(body), body)
	}
	cmd := exec.Command("git", "fast-import", "--quiet")
	cmd.Dir = dir
	cmd.Env = []string{"PATH=" + os.Getenv("PATH"), "HOME=" + e.home, "GIT_CONFIG_NOSYSTEM=1", "GIT_CONFIG_GLOBAL=/dev/null", "LC_ALL=C"}
	cmd.Stdin = strings.NewReader(s.String())
	if out, err := cmd.CombinedOutput(); err != nil {
		b.Fatalf("git fast-import of %d commits: %v\n%s", n, err, out)
	}
	e.mustGit(b, dir, "reset", "-q", "--hard")
}

// BenchmarkPushCommits pushes 1, 100 and 10,000 new small commits (made
// with git fast-import) through the door and directly to the same
// upstream, and reports the peak heap growth of this process (the door's)
// while the push streams.
//
//	go test ./internal/doors/githttp/ -run XXX -bench BenchmarkPushCommits -benchtime 3x
func BenchmarkPushCommits(b *testing.B) {
	for _, n := range []int{1, 100, 10000} {
		for _, via := range []string{"direct", "door"} {
			b.Run(fmt.Sprintf("%dcommits/%s", n, via), func(b *testing.B) {
				e := newEnv(b, envOptions{})
				work := e.clone(b)
				if via == "direct" {
					e.mustGit(b, work, "config", "http.sslCAInfo", e.up.caFile)
					e.mustGit(b, work, "remote", "set-url", "origin", "https://x-access-token:"+upstreamToken+"@"+e.up.host+"/acme/app.git")
				}
				e.mustGit(b, work, "switch", "-q", "-c", "feature")
				e.commit(b, work, "start.txt", "start\n")
				e.mustGit(b, work, "push", "-q", "origin", "feature")
				var growth uint64
				b.ResetTimer()
				for i := 0; i < b.N; i++ {
					b.StopTimer()
					e.fastImportCommits(b, work, "feature", n, i)
					base, peak := heapDuring(func() {
						b.StartTimer()
						e.mustGit(b, work, "push", "-q", "origin", "feature")
						b.StopTimer()
					})
					growth = max(growth, peak-min(peak, base))
				}
				if got, want := e.upstreamRef(b, "refs/heads/feature"), strings.TrimSpace(e.mustGit(b, work, "rev-parse", "HEAD")); got != want {
					b.Fatalf("upstream feature %s, want %s", got, want)
				}
				b.ReportMetric(float64(growth)/(1<<20), "heap-growth-MB")
				b.ReportMetric(float64(n), "commits")
			})
		}
	}
}

// heapDuring runs fn while sampling the heap every 10 ms: it returns the
// heap in use before fn (after a collection) and the most seen while it ran.
func heapDuring(fn func()) (base, peak uint64) {
	runtime.GC()
	var ms runtime.MemStats
	runtime.ReadMemStats(&ms)
	base = ms.HeapInuse
	var p atomic.Uint64
	stop, done := make(chan struct{}), make(chan struct{})
	go func() {
		defer close(done)
		var ms runtime.MemStats
		for {
			runtime.ReadMemStats(&ms)
			if ms.HeapInuse > p.Load() {
				p.Store(ms.HeapInuse)
			}
			select {
			case <-stop:
				return
			case <-time.After(10 * time.Millisecond):
			}
		}
	}()
	fn()
	close(stop)
	<-done
	return base, p.Load()
}
