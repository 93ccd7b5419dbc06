package main

import (
	"bytes"
	"errors"
	"net"
	"os"
	"slices"
	"strconv"
	"strings"
	"testing"
	"time"
)

// TestMain lets the test binary serve as our proxy's process ("ours") and
// the bare relay's ("bare"), as the harness re-executes itself.
func TestMain(m *testing.M) {
	if len(os.Args) > 1 && (os.Args[1] == "ours" || os.Args[1] == "bare") {
		main()
		return
	}
	os.Exit(m.Run())
}

// TestHarnessSmoke runs the harness on direct, ours and the bare relay
// with tiny workloads: every row has a value for each path that it applies
// to, and our proxy wrote one audit row per tunnel it relayed.
func TestHarnessSmoke(t *testing.T) {
	dir := t.TempDir()
	var out bytes.Buffer
	// An upstream reading 8 KiB at a time: many reads per client write.
	o := options{reps: 1, bytes: 1 << 20, readBuf: 8 << 10, streams: 4, workers: 4, connectTime: 200 * time.Millisecond, slices: 2, idle: 20, dir: dir, bare: true}
	if err := run(o, &out); err != nil {
		t.Fatal(err)
	}
	table := out.String()
	if head := tableLine(table, "workload"); !slices.Equal(head[len(head)-3:], []string{"ours/smokescreen", "bare/smokescreen", "ours/bare"}) {
		t.Errorf("table lacks the three ratio columns:\n%s", table)
	}
	for _, row := range []string{"1 stream, MB/s", "4 streams, MB/s", "connect+1st byte, 4 worker(s), p99 ms", "connect+1st byte, 1 worker(s), proxy CPU µs/conn", "RSS with 20 idle tunnels, MiB"} {
		line := tableLine(table, row)
		if line == nil {
			t.Errorf("table lacks row %q:\n%s", row, table)
			continue
		}
		// workload | direct | ours | bare | the three ratios (no smokescreen: "-")
		if len(line) != 7 {
			t.Errorf("row %q: %d cells %q, want 7", row, len(line), line)
			continue
		}
		rss := strings.HasPrefix(row, "RSS")
		proxyRow := strings.Contains(row, "CPU") || rss
		for i, path := range []string{"direct", "ours", "bare"} {
			v := line[1+i]
			// No proxy: no proxy CPU or memory; the bare relay sits out the
			// idle-tunnel run.
			if path == "direct" && proxyRow || path == "bare" && rss {
				if v != "-" {
					t.Errorf("row %q: %s has %q, want -", row, path, v)
				}
				continue
			}
			if f, err := strconv.ParseFloat(v, 64); err != nil || f < 0 {
				t.Errorf("row %q: %s has %q, want a number", row, path, v)
			}
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

// tableLine returns the cells of the table row named row, trimmed.
func tableLine(table, row string) []string {
	for _, l := range strings.Split(table, "\n") {
		cells := strings.Split(strings.TrimSuffix(l, "|"), "|")
		if strings.TrimSpace(cells[0]) != row {
			continue
		}
		for i := range cells {
			cells[i] = strings.TrimSpace(cells[i])
		}
		return cells
	}
	return nil
}

// The table has a ratio column for ours and, when the bare relay ran, one
// for it, each against smokescreen, and one for ours against the bare relay;
// with a baseline build, one for ours against it; each in the row's
// direction.
func TestPrintRatioColumns(t *testing.T) {
	var r results
	for _, v := range []struct {
		path      string
		rate, p50 float64
	}{{"direct", 400, 0.5}, {"ours", 150, 2}, {"bare", 200, 1}, {"smokescreen", 100, 4}} {
		r.add("rate", v.path, v.rate, higher)
		r.add("p50", v.path, v.p50, lower)
	}
	var out bytes.Buffer
	r.print(&out, options{reps: 1})
	table := out.String()
	for _, tc := range []struct {
		row  string
		want []string
	}{
		{"workload", []string{"workload", "direct", "ours", "bare", "smokescreen", "ours/smokescreen", "bare/smokescreen", "ours/bare"}},
		{"rate", []string{"rate", "400.00", "150.00", "200.00", "100.00", "1.50x (1.50-1.50)", "2.00x (2.00-2.00)", "0.75x (0.75-0.75)"}},
		{"p50", []string{"p50", "0.50", "2.00", "1.00", "4.00", "2.00x (2.00-2.00)", "4.00x (4.00-4.00)", "0.50x (0.50-0.50)"}},
	} {
		if got := tableLine(table, tc.row); !slices.Equal(got, tc.want) {
			t.Errorf("row %s: %q, want %q\n%s", tc.row, got, tc.want, table)
		}
	}
	// Without the bare relay, one ratio column.
	var r2 results
	r2.add("rate", "ours", 120, higher)
	r2.add("rate", "smokescreen", 100, higher)
	out.Reset()
	r2.print(&out, options{reps: 1})
	if got, want := tableLine(out.String(), "rate"), []string{"rate", "120.00", "100.00", "1.20x (1.20-1.20)"}; !slices.Equal(got, want) {
		t.Errorf("without bare: %q, want %q", got, want)
	}
	// With a baseline build, a column for ours against it.
	r2.add("rate", "base", 80, higher)
	out.Reset()
	r2.print(&out, options{reps: 1})
	if got, want := tableLine(out.String(), "rate"), []string{"rate", "120.00", "80.00", "100.00", "1.20x (1.20-1.20)", "1.50x (1.50-1.50)"}; !slices.Equal(got, want) {
		t.Errorf("with a baseline: %q, want %q", got, want)
	}
}

func TestRatios(t *testing.T) {
	var r results
	r.add("rate", "ours", 120, higher)
	r.add("rate", "smokescreen", 100, higher)
	r.add("p50", "ours", 1, lower)
	r.add("p50", "smokescreen", 2, lower)
	if got := r.ratios("rate", "ours", "smokescreen"); len(got) != 1 || got[0] != 1.2 {
		t.Errorf("rate ratio %v, want [1.2]", got)
	}
	if got := r.ratios("p50", "ours", "smokescreen"); len(got) != 1 || got[0] != 2 {
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

// A proxy that accepts and never answers fails the dial, naming the path,
// instead of hanging the run (as one out of descriptors did).
func TestDialSilentProxy(t *testing.T) {
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	defer ln.Close()
	held := make(chan net.Conn, 1)
	go func() {
		c, err := ln.Accept()
		if err == nil {
			held <- c // accepted, never answered
		}
	}()
	defer func() {
		select {
		case c := <-held:
			c.Close()
		default:
		}
	}()
	saved := answerTimeout
	answerTimeout = 200 * time.Millisecond
	defer func() { answerTimeout = saved }()
	start := time.Now()
	c, err := target{name: "silent", proxy: ln.Addr().String()}.dial(1)
	if err == nil {
		c.Close()
		t.Fatal("dial through a silent proxy succeeded")
	}
	var ne net.Error
	if !strings.HasPrefix(err.Error(), "silent: CONNECT:") || !errors.As(err, &ne) || !ne.Timeout() {
		t.Errorf("error %v; want the path's name and a timeout", err)
	}
	if el := time.Since(start); el > 5*time.Second {
		t.Errorf("dial took %v", el)
	}
}
