package main

import (
	"bytes"
	"os"
	"strings"
	"testing"
	"time"
)

// TestMain lets the test binary serve as our proxy's process ("ours"),
// as the harness re-executes itself.
func TestMain(m *testing.M) {
	if len(os.Args) > 1 && os.Args[1] == "ours" {
		main()
		return
	}
	os.Exit(m.Run())
}

// TestHarnessSmoke runs the harness on direct and ours with tiny workloads:
// every row has a value for both paths, and our proxy wrote one audit row
// per tunnel it relayed.
func TestHarnessSmoke(t *testing.T) {
	dir := t.TempDir()
	var out bytes.Buffer
	// An upstream reading 8 KiB at a time: many reads per client write.
	o := options{reps: 1, bytes: 1 << 20, readBuf: 8 << 10, streams: 4, workers: 4, connectTime: 200 * time.Millisecond, slices: 2, idle: 20, dir: dir}
	if err := run(o, &out); err != nil {
		t.Fatal(err)
	}
	table := out.String()
	for _, row := range []string{"1 stream, MB/s", "4 streams, MB/s", "connect+1st byte, 4 worker(s), p99 ms", "connect+1st byte, 1 worker(s), proxy CPU µs/conn", "RSS with 20 idle tunnels, MiB"} {
		if !strings.Contains(table, row) {
			t.Errorf("table lacks row %q:\n%s", row, table)
		}
	}
	b, err := os.ReadFile(dir + "/ours-audit-0.jsonl")
	if err != nil {
		t.Fatal(err)
	}
	rows := strings.Count(string(b), "\n")
	allowed := strings.Count(string(b), `"decision":"allow"`)
	// 1 + 4 streams and 20 idle tunnels at least, plus the connect runs.
	if rows < 25 || allowed != rows {
		t.Errorf("audit: %d rows, %d allowed; want >= 25, all allowed", rows, allowed)
	}
	t.Logf("\n%s", table)
}

// Every bad option is refused before anything starts, naming its flag.
func TestHarnessRefusesBadOptions(t *testing.T) {
	good := options{reps: 1, bytes: 1 << 20, readBuf: 1 << 10, streams: 1, workers: 1, connectTime: time.Second, slices: 1}
	for _, tc := range []struct {
		flag string
		set  func(*options)
	}{
		{"-reps", func(o *options) { o.reps = 0 }},
		{"-bytes", func(o *options) { o.bytes = -1 }},
		{"-read-buf", func(o *options) { o.readBuf = 0 }},
		{"-streams", func(o *options) { o.streams = 0 }},
		{"-workers", func(o *options) { o.workers = -3 }},
		{"-connect-time", func(o *options) { o.connectTime = 0 }},
		{"-slices", func(o *options) { o.slices = 0 }},
		{"-idle", func(o *options) { o.idle = -1 }},
	} {
		t.Run(tc.flag, func(t *testing.T) {
			o := good
			o.dir = t.TempDir()
			tc.set(&o)
			err := run(o, &bytes.Buffer{})
			if err == nil || !strings.Contains(err.Error(), tc.flag+":") {
				t.Fatalf("run: %v; want an error naming %s", err, tc.flag)
			}
		})
	}
}

func TestRatios(t *testing.T) {
	var r results
	r.add("rate", "ours", 120, higher)
	r.add("rate", "smokescreen", 100, higher)
	r.add("p50", "ours", 1, lower)
	r.add("p50", "smokescreen", 2, lower)
	if got := r.ratios("rate"); len(got) != 1 || got[0] != 1.2 {
		t.Errorf("rate ratio %v, want [1.2]", got)
	}
	if got := r.ratios("p50"); len(got) != 1 || got[0] != 2 {
		t.Errorf("latency ratio %v, want [2] (smokescreen/ours)", got)
	}
	if m := median([]float64{3, 1, 2, 10}); m != 2.5 {
		t.Errorf("median %v, want 2.5", m)
	}
}

// A connect run's slices add up: the rate is every loop over all the time,
// the quantiles are over every loop.
func TestConnectRunSlices(t *testing.T) {
	ms := time.Millisecond
	tests := []struct {
		name     string
		slices   [][]time.Duration
		each     time.Duration
		rate     float64
		p50, p99 time.Duration
	}{
		{name: "none", rate: 0},
		{name: "one slice", slices: [][]time.Duration{{3 * ms, 1 * ms, 2 * ms}}, each: time.Second, rate: 3, p50: 2 * ms, p99: 3 * ms},
		{name: "two slices", slices: [][]time.Duration{{1 * ms, 1 * ms}, {5 * ms, 1 * ms}}, each: 500 * ms, rate: 4, p50: 1 * ms, p99: 5 * ms},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			var r connectRun
			for _, s := range tt.slices {
				r.lat = append(r.lat, s...)
				r.elapsed += tt.each
			}
			if got := r.rate(); got != tt.rate {
				t.Errorf("rate %v, want %v", got, tt.rate)
			}
			if got := r.quantile(0.5); got != tt.p50 {
				t.Errorf("p50 %v, want %v", got, tt.p50)
			}
			if got := r.quantile(0.99); got != tt.p99 {
				t.Errorf("p99 %v, want %v", got, tt.p99)
			}
		})
	}
}
