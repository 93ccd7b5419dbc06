package main

import (
	"bytes"
	"os"
	"path/filepath"
	"strings"
	"testing"
)

const baseOut = `goos: linux
goarch: amd64
pkg: ironcurtain.dev/gateway/policy
BenchmarkEvaluateFetchURL/allowlisted-2   	  200000	      1000 ns/op	     128 B/op	       2 allocs/op
BenchmarkEvaluateFetchURL/allowlisted-2   	  200000	      1200 ns/op	     128 B/op	       2 allocs/op
BenchmarkEvaluateFetchURL/allowlisted-2   	  200000	      1100 ns/op	     128 B/op	       2 allocs/op
BenchmarkHubOverheadMedian-2              	    2000	     45000 ns/op	        44.5 hub-µs
BenchmarkOnlyInBase-2                     	      10	         5 ns/op
PASS
ok  	ironcurtain.dev/gateway/policy	3.2s
`

const newOut = `BenchmarkEvaluateFetchURL/allowlisted-2   	  200000	      1500 ns/op	     128 B/op	       2 allocs/op
BenchmarkEvaluateFetchURL/allowlisted-2   	  200000	      1400 ns/op	     128 B/op	       2 allocs/op
BenchmarkEvaluateFetchURL/allowlisted-2   	  200000	      1300 ns/op	     128 B/op	       2 allocs/op
BenchmarkHubOverheadMedian
    bench_test.go:12: a log line
BenchmarkHubOverheadMedian-2              	    2000	     40000 ns/op	        40.1 hub-µs
BenchmarkOnlyInNew-2                      	      10	         5 ns/op
`

func TestParse(t *testing.T) {
	s, err := Parse(strings.NewReader(baseOut))
	if err != nil {
		t.Fatal(err)
	}
	k := Key{Bench: "BenchmarkEvaluateFetchURL/allowlisted", Unit: "ns/op"}
	if got := s[k]; len(got) != 3 || got[0] != 1000 || got[2] != 1100 {
		t.Errorf("%v = %v", k, got)
	}
	if got := s[Key{Bench: "BenchmarkHubOverheadMedian", Unit: "hub-µs"}]; len(got) != 1 || got[0] != 44.5 {
		t.Errorf("custom metric = %v", got)
	}
}

func TestParseRefuses(t *testing.T) {
	for _, in := range []string{
		"BenchmarkX-2 10 5\n",         // a value without a unit
		"BenchmarkX-2 10 abc ns/op\n", // not a number
		"BenchmarkX-2 10 NaN ns/op\n",
		"BenchmarkX-2 10 +Inf ns/op\n",
		"BenchmarkX-2 10\n", // no metric
	} {
		if _, err := Parse(strings.NewReader(in)); err == nil {
			t.Errorf("Parse(%q) gave no error", in)
		}
	}
}

func TestTrimProcs(t *testing.T) {
	for in, want := range map[string]string{
		"BenchmarkA-2":        "BenchmarkA",
		"BenchmarkA/sub-16":   "BenchmarkA/sub",
		"BenchmarkA/x-y":      "BenchmarkA/x-y",
		"BenchmarkA":          "BenchmarkA",
		"-2":                  "-2",
		"BenchmarkA/rows-1k-": "BenchmarkA/rows-1k-",
	} {
		if got := trimProcs(in); got != want {
			t.Errorf("trimProcs(%q) = %q, want %q", in, got, want)
		}
	}
}

func TestCompare(t *testing.T) {
	base, _ := Parse(strings.NewReader(baseOut))
	cur, _ := Parse(strings.NewReader(newOut))
	rows := Compare(base, cur, 1.10)
	by := map[Key]Row{}
	for _, r := range rows {
		by[r.Key] = r
	}
	tests := []struct {
		key    Key
		ratio  float64
		slower bool
	}{
		{Key{"BenchmarkEvaluateFetchURL/allowlisted", "ns/op"}, 1400.0 / 1100, true},
		{Key{"BenchmarkEvaluateFetchURL/allowlisted", "allocs/op"}, 1, false},
		{Key{"BenchmarkHubOverheadMedian", "hub-µs"}, 40.1 / 44.5, false},
		{Key{"BenchmarkOnlyInBase", "ns/op"}, 0, false},
		{Key{"BenchmarkOnlyInNew", "ns/op"}, 0, false},
	}
	for _, tc := range tests {
		r, ok := by[tc.key]
		if !ok {
			t.Errorf("no row for %v", tc.key)
			continue
		}
		if diff := r.Ratio - tc.ratio; diff > 1e-9 || diff < -1e-9 || r.Slower != tc.slower {
			t.Errorf("%v: ratio %v slower %v, want %v %v", tc.key, r.Ratio, r.Slower, tc.ratio, tc.slower)
		}
	}
	if !Regressed(rows) {
		t.Error("a 27% slower ns/op was not a regression")
	}
	var buf bytes.Buffer
	Print(&buf, rows)
	for _, want := range []string{"new/base", "1.27", "SLOWER", "1000–1100–1200", "n/a"} {
		if !strings.Contains(buf.String(), want) {
			t.Errorf("table lacks %q:\n%s", want, buf.String())
		}
	}
}

func TestSpreadEven(t *testing.T) {
	s := spread([]float64{4, 1, 3, 2})
	if s.Min != 1 || s.Max != 4 || s.Median != 2.5 || s.N != 4 {
		t.Errorf("spread = %+v", s)
	}
}

func TestRun(t *testing.T) {
	dir := t.TempDir()
	b, n := filepath.Join(dir, "base.txt"), filepath.Join(dir, "new.txt")
	for path, content := range map[string]string{b: baseOut, n: newOut} {
		if err := os.WriteFile(path, []byte(content), 0o600); err != nil {
			t.Fatal(err)
		}
	}
	tests := []struct {
		name string
		args []string
		code int
	}{
		{"table", []string{b, n}, 0},
		{"fail on regression", []string{"-fail", b, n}, 1},
		{"higher threshold", []string{"-fail", "-threshold", "1.5", b, n}, 0},
		{"help", []string{"-h"}, 0},
		{"one file", []string{b}, 2},
		{"missing file", []string{b, filepath.Join(dir, "none")}, 2},
		{"threshold not above 1", []string{"-threshold", "0.9", b, n}, 2},
		{"unknown flag", []string{"-x", b, n}, 2},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			var out, errb bytes.Buffer
			if code := run(tc.args, &out, &errb); code != tc.code {
				t.Errorf("exit %d, want %d; stderr %s", code, tc.code, errb.String())
			}
		})
	}
}

func FuzzParse(f *testing.F) {
	f.Add(baseOut)
	f.Add(newOut)
	f.Add("BenchmarkX-2 1 1e308 ns/op 1 B/op\n")
	f.Fuzz(func(t *testing.T, in string) {
		s, err := Parse(strings.NewReader(in))
		if err != nil {
			return
		}
		rows := Compare(s, s, 1.1)
		for _, r := range rows {
			if r.Slower {
				t.Fatalf("a side compared with itself is slower: %+v", r)
			}
			if r.Base.N > 0 && (r.Base.Min > r.Base.Median || r.Base.Median > r.Base.Max) {
				t.Fatalf("spread out of order: %+v", r.Base)
			}
		}
		var buf bytes.Buffer
		Print(&buf, rows)
	})
}
