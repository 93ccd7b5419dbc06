package main

import (
	"bufio"
	"fmt"
	"io"
	"math"
	"sort"
	"strconv"
	"strings"
	"text/tabwriter"
)

// Key names one benchmark's metric.
type Key struct {
	Bench string // without the -GOMAXPROCS suffix
	Unit  string // "ns/op", "B/op", "allocs/op" or a custom unit
}

// Samples are the values read for each metric, in the order read.
type Samples map[Key][]float64

// maxLine bounds one line of benchmark output.
const maxLine = 64 << 10

// Parse reads `go test -bench` output: every line starting "Benchmark"
// that has an iteration count and value-unit pairs; other lines (PASS,
// goos, test logs) are skipped. A benchmark line that does not parse is an
// error naming its line number.
func Parse(r io.Reader) (Samples, error) {
	out := Samples{}
	sc := bufio.NewScanner(r)
	sc.Buffer(make([]byte, 4096), maxLine)
	for n := 1; sc.Scan(); n++ {
		line := sc.Text()
		if !strings.HasPrefix(line, "Benchmark") {
			continue
		}
		f := strings.Fields(line)
		if len(f) < 2 {
			continue // a benchmark's name printed alone before its result (-v)
		}
		if _, err := strconv.ParseUint(f[1], 10, 64); err != nil {
			continue // a log line of the benchmark, not a result
		}
		if len(f) < 4 || len(f)%2 != 0 {
			return nil, fmt.Errorf("line %d: want name, iterations and value-unit pairs: %q", n, line)
		}
		name := trimProcs(f[0])
		for i := 2; i < len(f); i += 2 {
			v, err := strconv.ParseFloat(f[i], 64)
			if err != nil || math.IsNaN(v) || math.IsInf(v, 0) {
				return nil, fmt.Errorf("line %d: %q is not a number", n, f[i])
			}
			k := Key{Bench: name, Unit: f[i+1]}
			out[k] = append(out[k], v)
		}
	}
	if err := sc.Err(); err != nil {
		return nil, err
	}
	return out, nil
}

// trimProcs drops the "-N" GOMAXPROCS suffix of a benchmark name.
func trimProcs(name string) string {
	i := strings.LastIndexByte(name, '-')
	if i <= 0 {
		return name
	}
	if _, err := strconv.Atoi(name[i+1:]); err != nil {
		return name
	}
	return name[:i]
}

// Spread is a side's minimum, median and maximum of one metric.
type Spread struct {
	Min, Median, Max float64
	N                int
}

func spread(v []float64) Spread {
	if len(v) == 0 {
		return Spread{}
	}
	s := append([]float64(nil), v...)
	sort.Float64s(s)
	med := s[len(s)/2]
	if len(s)%2 == 0 {
		med = (s[len(s)/2-1] + s[len(s)/2]) / 2
	}
	return Spread{Min: s[0], Median: med, Max: s[len(s)-1], N: len(s)}
}

// Row is one metric compared.
type Row struct {
	Key
	Base, New Spread
	// Ratio is New.Median / Base.Median (0 when a side lacks the metric
	// or the baseline's median is 0).
	Ratio float64
	// Slower marks a cost metric whose ratio exceeds the threshold.
	Slower bool
}

// costUnit reports whether a larger value of unit is worse. Custom
// metrics count as costs when they name time or bytes.
func costUnit(unit string) bool {
	switch {
	case strings.HasSuffix(unit, "/op"), strings.HasPrefix(unit, "ns"), strings.HasPrefix(unit, "µs"),
		strings.HasPrefix(unit, "us"), strings.HasPrefix(unit, "ms"), strings.Contains(unit, "-ns"),
		strings.Contains(unit, "-µs"), strings.Contains(unit, "-us"), strings.Contains(unit, "-ms"):
		return true
	}
	return false
}

// Compare pairs the two sides' metrics, sorted by benchmark and unit; a
// metric one side lacks is shown with a zero spread and no ratio.
func Compare(base, cur Samples, threshold float64) []Row {
	keys := map[Key]bool{}
	for k := range base {
		keys[k] = true
	}
	for k := range cur {
		keys[k] = true
	}
	rows := make([]Row, 0, len(keys))
	for k := range keys {
		r := Row{Key: k, Base: spread(base[k]), New: spread(cur[k])}
		if r.Base.N > 0 && r.New.N > 0 && r.Base.Median != 0 {
			r.Ratio = r.New.Median / r.Base.Median
			r.Slower = costUnit(k.Unit) && r.Ratio > threshold
		}
		rows = append(rows, r)
	}
	sort.Slice(rows, func(i, j int) bool {
		if rows[i].Bench != rows[j].Bench {
			return rows[i].Bench < rows[j].Bench
		}
		return rows[i].Unit < rows[j].Unit
	})
	return rows
}

// Regressed reports whether any row is marked slower.
func Regressed(rows []Row) bool {
	for _, r := range rows {
		if r.Slower {
			return true
		}
	}
	return false
}

// Print writes the table: ratio first, then each side's min–median–max.
func Print(w io.Writer, rows []Row) {
	tw := tabwriter.NewWriter(w, 2, 4, 2, ' ', 0)
	fmt.Fprintln(tw, "benchmark\tunit\tnew/base\t\tbase min–median–max\tnew min–median–max\truns")
	for _, r := range rows {
		ratio, mark := "n/a", ""
		if r.Ratio != 0 {
			ratio = strconv.FormatFloat(r.Ratio, 'f', 2, 64)
		}
		if r.Slower {
			mark = "SLOWER"
		}
		fmt.Fprintf(tw, "%s\t%s\t%s\t%s\t%s\t%s\t%d/%d\n", r.Bench, r.Unit, ratio, mark,
			fmtSpread(r.Base), fmtSpread(r.New), r.Base.N, r.New.N)
	}
	tw.Flush()
}

func fmtSpread(s Spread) string {
	if s.N == 0 {
		return "-"
	}
	return num(s.Min) + "–" + num(s.Median) + "–" + num(s.Max)
}

// num prints a value with three significant digits at most.
func num(v float64) string {
	switch a := math.Abs(v); {
	case a >= 100 || a == math.Trunc(a):
		return strconv.FormatFloat(v, 'f', 0, 64)
	case a >= 10:
		return strconv.FormatFloat(v, 'f', 1, 64)
	default:
		return strconv.FormatFloat(v, 'f', 2, 64)
	}
}
