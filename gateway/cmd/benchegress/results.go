package main

import (
	"fmt"
	"io"
	"slices"
	"strings"
	"text/tabwriter"
)

type better int

const (
	higher better = iota // a rate
	lower                // a latency or memory
)

// results holds every measurement: row → path → one value per repetition.
type results struct {
	rows  []string
	dir   map[string]better
	vals  map[string]map[string][]float64
	paths []string
}

func (r *results) add(row, path string, v float64, b better) {
	if r.vals == nil {
		r.vals, r.dir = map[string]map[string][]float64{}, map[string]better{}
	}
	if _, ok := r.vals[row]; !ok {
		r.rows = append(r.rows, row)
		r.vals[row] = map[string][]float64{}
		r.dir[row] = b
	}
	if !slices.Contains(r.paths, path) {
		r.paths = append(r.paths, path)
	}
	r.vals[row][path] = append(r.vals[row][path], v)
}

// ratios is path a against path b (> 1: a better) per repetition.
func (r *results) ratios(row, a, b string) []float64 {
	o, s := r.vals[row][a], r.vals[row][b]
	var out []float64
	for i := range min(len(o), len(s)) {
		if o[i] == 0 || s[i] == 0 {
			continue
		}
		if r.dir[row] == higher {
			out = append(out, o[i]/s[i])
		} else {
			out = append(out, s[i]/o[i])
		}
	}
	return out
}

func median(v []float64) float64 {
	if len(v) == 0 {
		return 0
	}
	s := slices.Clone(v)
	slices.Sort(s)
	if len(s)%2 == 1 {
		return s[len(s)/2]
	}
	return (s[len(s)/2-1] + s[len(s)/2]) / 2
}

// print writes the table: per path the median over repetitions; the ratio
// as the median (min–max) of the per-repetition ratios.
func (r *results) print(out io.Writer, o options) {
	paths := []string{}
	for _, p := range []string{"direct", "ours", "base", "bare", "smokescreen", "squid"} {
		if slices.Contains(r.paths, p) {
			paths = append(paths, p)
		}
	}
	// The ratio columns: ours against smokescreen; when the bare relay ran,
	// its own against smokescreen and ours against it (the floor); when a
	// baseline build of ours ran (-baseline), ours against it.
	pairs := [][2]string{{"ours", "smokescreen"}}
	if slices.Contains(paths, "bare") {
		pairs = append(pairs, [2]string{"bare", "smokescreen"}, [2]string{"ours", "bare"})
	}
	if slices.Contains(paths, "base") {
		pairs = append(pairs, [2]string{"ours", "base"})
	}
	heads := []string{}
	for _, pr := range pairs {
		heads = append(heads, pr[0]+"/"+pr[1])
	}
	fmt.Fprintf(out, "bench-egress: %d repetitions, interleaved; medians over repetitions; ratio = a vs b, > 1 is a better (median, min-max of the per-repetition ratios)\n\n", o.reps)
	tw := tabwriter.NewWriter(out, 0, 0, 2, ' ', tabwriter.AlignRight|tabwriter.Debug)
	fmt.Fprintf(tw, "%s\t%s\t%s\t\n", "workload", strings.Join(paths, "\t"), strings.Join(heads, "\t"))
	for _, row := range r.rows {
		cells := []string{row}
		for _, p := range paths {
			v, ok := r.vals[row][p]
			if !ok {
				cells = append(cells, "-")
				continue
			}
			cells = append(cells, fmt.Sprintf("%.2f", median(v)))
		}
		for _, pr := range pairs {
			if rs := r.ratios(row, pr[0], pr[1]); len(rs) > 0 {
				cells = append(cells, fmt.Sprintf("%.2fx (%.2f-%.2f)", median(rs), slices.Min(rs), slices.Max(rs)))
			} else {
				cells = append(cells, "-")
			}
		}
		fmt.Fprintf(tw, "%s\t\n", strings.Join(cells, "\t"))
	}
	_ = tw.Flush()
}
