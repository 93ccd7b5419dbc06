package main

import (
	"context"
	"encoding/json"
	"fmt"
	"io"
	"slices"
	"strconv"
	"strings"
	"text/tabwriter"

	"github.com/jackc/pgx/v5"
)

// verify checks that every successful call has a committed allow decision
// for filesystem write_file in its own session, with the content it wrote,
// and that each such decision has an outcome. It returns the calls without
// a decision and the decisions without an outcome.
func verify(ctx context.Context, dsn string, calls []okCall) (unaudited, missingOutcome int, err error) {
	conn, err := pgx.Connect(ctx, dsn)
	if err != nil {
		return 0, 0, fmt.Errorf("connecting: %w", err)
	}
	defer conn.Close(context.Background())
	rows, err := conn.Query(ctx, `
SELECT d.session_id, d.args, o.call_id IS NOT NULL
FROM tool_calls d LEFT JOIN tool_call_outcomes o ON o.call_id = d.call_id
WHERE d.server = 'filesystem' AND d.tool = 'write_file' AND d.decision = 'allow'`)
	if err != nil {
		return 0, 0, fmt.Errorf("reading decisions: %w", err)
	}
	type key struct{ session, content string }
	committed := map[key]bool{} // → has an outcome
	for rows.Next() {
		var sess, args string
		var hasOutcome bool
		if err := rows.Scan(&sess, &args, &hasOutcome); err != nil {
			return 0, 0, fmt.Errorf("reading decisions: %w", err)
		}
		var a struct {
			Content string `json:"content"`
		}
		if err := json.Unmarshal([]byte(args), &a); err != nil {
			return 0, 0, fmt.Errorf("a stored argument is not JSON: %w", err)
		}
		committed[key{sess, a.Content}] = hasOutcome
	}
	if err := rows.Err(); err != nil {
		return 0, 0, fmt.Errorf("reading decisions: %w", err)
	}
	for _, c := range calls {
		hasOutcome, ok := committed[key{"s" + strconv.Itoa(c.session), c.content}]
		switch {
		case !ok:
			unaudited++
		case !hasOutcome:
			missingOutcome++
		}
	}
	return unaudited, missingOutcome, nil
}

// printTable prints, per session count, the ratios of each binary's medians
// to the first binary's, then every binary's min–median–max.
func printTable(out io.Writer, o options, results []result) {
	w := tabwriter.NewWriter(out, 0, 0, 2, ' ', 0)
	defer w.Flush()
	get := func(bin string, n int) []result {
		var rs []result
		for _, r := range results {
			if r.bin == bin && r.sessions == n {
				rs = append(rs, r)
			}
		}
		return rs
	}
	base := o.bins[0].name
	fmt.Fprintf(w, "sessions\tbinary\tcalls/s ratio\tRSS ratio\tcalls/s (min / median / max)\tp50 ms\tp99 ms\tpeak RSS MB\tgateway CPU µs/call\terrors\tunaudited\n")
	for _, n := range o.sessions {
		b := get(base, n)
		for _, bin := range o.bins {
			rs := get(bin.name, n)
			rate := stat(rs, func(r result) float64 { return r.rate })
			rss := stat(rs, func(r result) float64 { return mb(r.peakRSS) })
			ratio, rssRatio := "—", "—"
			if bin.name != base {
				ratio = ratioText(rate[1], stat(b, func(r result) float64 { return r.rate })[1])
				rssRatio = ratioText(rss[1], stat(b, func(r result) float64 { return mb(r.peakRSS) })[1])
			}
			errs, unaud := 0, 0
			for _, r := range rs {
				errs += r.errors
				unaud += r.unaudited + r.missingOutcome
			}
			fmt.Fprintf(w, "%d\t%s\t%s\t%s\t%s\t%s\t%s\t%s\t%s\t%d\t%d\n", n, bin.name, ratio, rssRatio,
				fmtStat(rate, "%.0f"),
				fmtStat(stat(rs, func(r result) float64 { return ms(r.p50) }), "%.1f"),
				fmtStat(stat(rs, func(r result) float64 { return ms(r.p99) }), "%.1f"),
				fmtStat(rss, "%.0f"),
				fmtStat(stat(rs, func(r result) float64 { return r.cpuPerCall }), "%.0f"),
				errs, unaud)
		}
	}
}

// ratioText is a/b, or "—" when b is zero (no call succeeded).
func ratioText(a, b float64) string {
	if b == 0 {
		return "—"
	}
	return fmt.Sprintf("%.2f", a/b)
}

// stat is min, median, max of f over rs.
func stat(rs []result, f func(result) float64) [3]float64 {
	if len(rs) == 0 {
		return [3]float64{}
	}
	v := make([]float64, len(rs))
	for i, r := range rs {
		v[i] = f(r)
	}
	slices.Sort(v)
	return [3]float64{v[0], v[len(v)/2], v[len(v)-1]}
}

func fmtStat(s [3]float64, f string) string {
	return strings.Join([]string{fmt.Sprintf(f, s[0]), fmt.Sprintf(f, s[1]), fmt.Sprintf(f, s[2])}, " / ")
}
