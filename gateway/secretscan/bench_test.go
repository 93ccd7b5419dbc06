package secretscan

import (
	"os"
	"path/filepath"
	"runtime"
	"strings"
	"testing"
	"time"
)

// sourceCorpus is real source code without secrets: the standard library's net/http.
func sourceCorpus(b *testing.B) string {
	b.Helper()
	files, err := filepath.Glob(filepath.Join(runtime.GOROOT(), "src", "net", "http", "*.go"))
	if err != nil || len(files) == 0 {
		b.Fatalf("no corpus under GOROOT (%v)", err)
	}
	var sb strings.Builder
	for _, f := range files {
		data, err := os.ReadFile(f)
		if err != nil {
			b.Fatal(err)
		}
		sb.Write(data)
	}
	return sb.String()
}

// BenchmarkScanSource is the scan throughput on source code (the issue wants >= 200 MB/s
// per core with the default detectors).
func BenchmarkScanSource(b *testing.B) {
	text := sourceCorpus(b)
	d := MustDefault()
	b.SetBytes(int64(len(text)))
	b.ResetTimer()
	cpu := processCPU()
	for b.Loop() {
		d.Scan(text)
	}
	reportCPU(b, cpu, len(text))
}

// reportCPU reports the CPU time per operation and the throughput per core
// it implies (MB/s of one core busy scanning).
func reportCPU(b *testing.B, start time.Duration, size int) {
	used := processCPU() - start
	if used <= 0 {
		return
	}
	b.ReportMetric(float64(used)/float64(b.N), "cpu-ns/op")
	if size > 0 {
		b.ReportMetric(float64(size)*float64(b.N)/used.Seconds()/1e6, "MB/cpu-s")
	}
}

// BenchmarkScanURL is the latency a fetch pays (the issue wants <= 50 µs median).
func BenchmarkScanURL(b *testing.B) {
	d := MustDefault()
	u := "https://github.com/search?q=golang+context+cancel+deadline&type=code&p=2#results"
	cpu := processCPU()
	for b.Loop() {
		d.ScanURL(u)
	}
	reportCPU(b, cpu, 0)
}

// BenchmarkScanURLClean is an ordinary URL that the prefilter (urlClean)
// passes without the full scan: the cost a typical fetch pays.
func BenchmarkScanURLClean(b *testing.B) {
	d := MustDefault()
	u := "https://pkg.go.dev/net/url"
	if d.ScanURL(u) != nil {
		b.Fatal("hits in a clean URL")
	}
	cpu := processCPU()
	for b.Loop() {
		d.ScanURL(u)
	}
	reportCPU(b, cpu, 0)
}

// BenchmarkScanPush10MB scans 10 MB of added blobs, as a push would (want <= 100 ms).
func BenchmarkScanPush10MB(b *testing.B) {
	text := sourceCorpus(b)
	var sb strings.Builder
	for sb.Len() < 10<<20 {
		sb.WriteString(text)
	}
	blob := sb.String()[:10<<20]
	d := MustDefault()
	b.SetBytes(int64(len(blob)))
	b.ResetTimer()
	cpu := processCPU()
	for b.Loop() {
		d.Scan(blob)
	}
	reportCPU(b, cpu, len(blob))
}
