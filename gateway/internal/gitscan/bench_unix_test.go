//go:build unix

package gitscan

import (
	"context"
	"os"
	"path/filepath"
	"runtime"
	"syscall"
	"testing"
	"time"

	"ironcurtain.dev/gateway/secretscan"
)

// pushOf10MB builds a repository whose last 20 commits add about 10 MB of
// real source files (the standard library's own, copied under new names so
// that every blob is new) on top of a base commit the upstream has.
func pushOf10MB(b *testing.B) (*testRepo, string) {
	b.Helper()
	r := newTestRepo(b)
	base := r.commit(b, "base", map[string][]byte{"README": []byte("hello\n")})
	r.git(b, "update-ref", "refs/remotes/origin/main", base)
	var srcs []string
	for _, dir := range []string{"net/http", "crypto/tls", "go/types", "runtime", "cmd/compile/internal/ssa"} {
		m, _ := filepath.Glob(filepath.Join(runtime.GOROOT(), "src", dir, "*.go"))
		srcs = append(srcs, m...)
	}
	var total int64
	var tip string
	for c := 0; total < 10<<20; c++ {
		files := map[string][]byte{}
		for i := 0; i < 40 && total < 10<<20 && len(srcs) > 0; i++ {
			f := srcs[0]
			srcs = srcs[1:]
			data, err := os.ReadFile(f)
			if err != nil {
				b.Fatal(err)
			}
			files[filepath.Join("src", filepath.Base(filepath.Dir(f)), filepath.Base(f))] = data
			total += int64(len(data))
		}
		if len(files) == 0 {
			b.Fatalf("not enough source under GOROOT: %d bytes", total)
		}
		tip = r.commit(b, "commit", files)
	}
	// A push arrives as a pack (the door indexes it; a staging fetch keeps one).
	r.git(b, "repack", "-a", "-d", "-q")
	return r, tip
}

// BenchmarkScanPush10MB scans a push adding 10 MB of files (rev-list,
// cat-file and the detector; the issue wants <= 100 ms).
func BenchmarkScanPush10MB(b *testing.B) {
	r, tip := pushOf10MB(b)
	d := secretscan.MustDefault()
	rep, err := Scan(context.Background(), r.opts(), d, []string{tip}, []string{"--glob=refs/remotes/origin/*"}, Limits{})
	if err != nil {
		b.Fatal(err)
	}
	if rep.Bytes < 10<<20 || rep.Incomplete {
		b.Fatalf("scanned %d bytes (incomplete %v), want >= 10 MB", rep.Bytes, rep.Incomplete)
	}
	b.SetBytes(rep.Bytes)
	b.ResetTimer()
	var worst time.Duration
	cpu0 := cpuTime()
	n := 0
	for b.Loop() {
		start := time.Now()
		if _, err := Scan(context.Background(), r.opts(), d, []string{tip}, []string{"--glob=refs/remotes/origin/*"}, Limits{}); err != nil {
			b.Fatal(err)
		}
		worst = max(worst, time.Since(start))
		n++
	}
	// CPU time of the gateway and its git children per scan: the figure
	// that does not depend on what else the machine runs.
	b.ReportMetric(float64((cpuTime()-cpu0).Milliseconds())/float64(n), "cpu-ms/op")
	b.ReportMetric(float64(worst.Milliseconds()), "worst-ms")
}

// cpuTime is the user and system time of this process and its waited-for children.
func cpuTime() time.Duration {
	var self, kids syscall.Rusage
	_ = syscall.Getrusage(syscall.RUSAGE_SELF, &self)
	_ = syscall.Getrusage(syscall.RUSAGE_CHILDREN, &kids)
	tv := func(t syscall.Timeval) time.Duration { return time.Duration(t.Nano()) }
	return tv(self.Utime) + tv(self.Stime) + tv(kids.Utime) + tv(kids.Stime)
}
