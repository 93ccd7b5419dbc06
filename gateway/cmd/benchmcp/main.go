// Command benchmcp measures audited MCP tool calls per second through the
// real gateway binary (`ironcurtain serve`), as an agent makes them: N
// sessions, each its own static token and its own streamable-HTTP MCP
// session, call filesystem__write_file (allowed by the shipped policy) as
// fast as the gateway answers, against a Postgres audit store (a
// testcontainers Postgres from the offline image, one fresh database per
// run). It reports calls/s, p50/p99 latency, the gateway's peak RSS and CPU
// per call, and afterwards checks in the database that every call that
// succeeded has its committed allow decision (and an outcome): a call
// without one is counted as unaudited.
//
// Several binaries (-bin name=path, e.g. this tree's and a baseline's) are
// run in turn, alternating the order on each repetition, so a slow spell of
// the machine falls on each alike. docs/performance.md has the figures and
// the command (scripts/bench-mcp-load.sh builds both binaries).
package main

import (
	"context"
	"errors"
	"flag"
	"fmt"
	"os"
	"os/signal"
	"strconv"
	"strings"
	"syscall"
	"time"

	"ironcurtain.dev/gateway/internal/store/pgtest"
)

type binFlag []namedBin

type namedBin struct{ name, path string }

func (b *binFlag) String() string { return fmt.Sprint(*b) }

func (b *binFlag) Set(v string) error {
	name, path, ok := strings.Cut(v, "=")
	if !ok || name == "" || path == "" {
		return errors.New("want name=path")
	}
	*b = append(*b, namedBin{name, path})
	return nil
}

type options struct {
	bins     binFlag
	sessions []int
	duration time.Duration
	warmup   time.Duration
	reps     int
	dir      string
	keep     bool
}

func main() {
	var o options
	var sessions string
	flag.Var(&o.bins, "bin", "name=path of an ironcurtain binary (repeat; the first is the baseline of the ratios)")
	flag.StringVar(&sessions, "sessions", "1,256", "comma-separated session counts")
	flag.DurationVar(&o.duration, "duration", 10*time.Second, "measured time per run")
	flag.DurationVar(&o.warmup, "warmup", 2*time.Second, "calls before the measured time (verified, not timed)")
	flag.IntVar(&o.reps, "reps", 3, "repetitions of each (binary, sessions) run")
	flag.StringVar(&o.dir, "dir", "", "working directory (default: a temporary one)")
	flag.BoolVar(&o.keep, "keep", false, "keep the working directory and the databases")
	flag.Parse()
	for _, s := range strings.Split(sessions, ",") {
		n, err := strconv.Atoi(strings.TrimSpace(s))
		if err != nil || n < 1 || n > 10000 {
			fmt.Fprintf(os.Stderr, "benchmcp: bad -sessions %q\n", sessions)
			os.Exit(2)
		}
		o.sessions = append(o.sessions, n)
	}
	if len(o.bins) == 0 || o.reps < 1 {
		fmt.Fprintln(os.Stderr, "benchmcp: at least one -bin name=path and -reps ≥ 1")
		os.Exit(2)
	}
	ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt, syscall.SIGTERM)
	defer stop()
	if err := run(ctx, o); err != nil {
		fmt.Fprintf(os.Stderr, "benchmcp: %v\n", err)
		os.Exit(1)
	}
}

func run(ctx context.Context, o options) error {
	if o.dir == "" {
		d, err := os.MkdirTemp("", "benchmcp-")
		if err != nil {
			return fmt.Errorf("temporary directory: %w", err)
		}
		o.dir = d
		if !o.keep {
			defer os.RemoveAll(d)
		}
	}
	sctx, cancel := context.WithTimeout(ctx, pgtest.StartTimeout)
	srv, err := pgtest.StartServer(sctx)
	cancel()
	if err != nil {
		return fmt.Errorf("starting Postgres (image %s): %w", os.Getenv(pgtest.EnvImage), err)
	}
	defer func() {
		tctx, cancel := context.WithTimeout(context.Background(), time.Minute)
		defer cancel()
		_ = srv.Terminate(tctx)
	}()
	fmt.Fprintf(os.Stderr, "benchmcp: Postgres %s; load average %s\n", srv.Image(), loadavg())

	var results []result
	for rep := range o.reps {
		for _, n := range o.sessions {
			for i := range o.bins {
				b := o.bins[i]
				if rep%2 == 1 { // alternate which binary goes first
					b = o.bins[len(o.bins)-1-i]
				}
				r, err := runOne(ctx, srv, o, b, n, rep)
				if err != nil {
					return fmt.Errorf("%s, %d sessions, rep %d: %w", b.name, n, rep+1, err)
				}
				fmt.Fprintf(os.Stderr, "benchmcp: %s n=%d rep=%d: %.0f calls/s p50 %.1f ms p99 %.1f ms rss %.0f MB cpu %.0f µs/call errors %d unaudited %d (load %s)\n",
					b.name, n, rep+1, r.rate, ms(r.p50), ms(r.p99), mb(r.peakRSS), r.cpuPerCall, r.errors, r.unaudited, loadavg())
				results = append(results, r)
			}
		}
	}
	printTable(os.Stdout, o, results)
	for _, r := range results {
		if r.unaudited > 0 || r.missingOutcome > 0 {
			return fmt.Errorf("%s n=%d: %d calls without a committed decision, %d without an outcome", r.bin, r.sessions, r.unaudited, r.missingOutcome)
		}
	}
	return nil
}

func loadavg() string {
	b, err := os.ReadFile("/proc/loadavg")
	if err != nil {
		return "?"
	}
	f := strings.Fields(string(b))
	if len(f) < 3 {
		return "?"
	}
	return strings.Join(f[:3], " ")
}

func ms(d time.Duration) float64 { return float64(d) / 1e6 }

func mb(b int64) float64 { return float64(b) / (1 << 20) }
