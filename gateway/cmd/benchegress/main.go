// Command benchegress compares IronCurtain's egress proxy with a direct
// connection, a bare relay, stripe/smokescreen and Squid on loopback (make bench-egress,
// docs/egress.md "Performance"). Every proxy runs in its own process;
// the clients and the upstream run in this one. Each repetition restarts
// the proxies and runs every workload on every path, rotating the order of
// the paths, so that all of them see the same machine load.
//
//	benchegress -smokescreen /path/to/smokescreen -squid /usr/sbin/squid
//
// Workloads: one stream of -bytes; -streams streams of -bytes/-streams each;
// CONNECT + first byte with 1 and -workers workers for -connect-time (rate,
// p50, p99); the proxy's resident memory with -idle idle tunnels. All but
// the last are cut into -slices slices, the paths taking turns. The ratio column is ours against smokescreen, written so that > 1 means
// ours is better (a rate divided by a rate, a latency or memory divided
// into one), from the median of the per-repetition ratios; a second
// column, bare against smokescreen, is the floor's (-bare=false leaves it
// out).
//
// "benchegress ours -listen ADDR -port N -audit FILE" is our proxy's
// process and "benchegress bare -listen ADDR" the bare relay's (both
// started by the harness itself).
package main

import (
	"encoding/base64"
	"flag"
	"fmt"
	"io"
	"net"
	"os"
	"strings"
	"syscall"
	"time"
)

// basicToken is the Proxy-Authorization credentials (Basic) of benchToken.
var basicToken = base64.StdEncoding.EncodeToString([]byte("agent:" + benchToken))

func main() {
	if len(os.Args) > 1 && os.Args[1] == "ours" {
		fs := flag.NewFlagSet("ours", flag.ExitOnError)
		listen := fs.String("listen", "127.0.0.1:0", "address to listen on")
		port := fs.Int("port", 0, "the upstream port (the only one allowed)")
		auditPath := fs.String("audit", "", "JSON-lines audit file")
		_ = fs.Parse(os.Args[2:])
		if err := serveOurs(*listen, *port, *auditPath); err != nil {
			fmt.Fprintln(os.Stderr, "benchegress ours:", err)
			os.Exit(1)
		}
		return
	}
	if len(os.Args) > 1 && os.Args[1] == "bare" {
		fs := flag.NewFlagSet("bare", flag.ExitOnError)
		listen := fs.String("listen", "127.0.0.1:0", "address to listen on")
		_ = fs.Parse(os.Args[2:])
		if err := serveBare(*listen); err != nil {
			fmt.Fprintln(os.Stderr, "benchegress bare:", err)
			os.Exit(1)
		}
		return
	}
	var o options
	flag.StringVar(&o.smokescreen, "smokescreen", "", "smokescreen binary (empty: left out)")
	flag.StringVar(&o.squid, "squid", "", "squid binary (empty: left out)")
	flag.StringVar(&o.baseline, "baseline", "", "a benchegress binary built from another commit: its proxy runs as path \"base\" beside ours (before/after in one interleaved run)")
	flag.BoolVar(&o.bare, "bare", true, "also run the bare relay: a Go CONNECT relay with nothing else, the machine's floor")
	flag.IntVar(&o.reps, "reps", 3, "repetitions")
	flag.Int64Var(&o.bytes, "bytes", 1<<30, "bytes of the one-stream run (the multi-stream run moves the same in all)")
	flag.IntVar(&o.readBuf, "read-buf", 256<<10, "size of the upstream's reads (the client writes 256 KiB at a time)")
	flag.IntVar(&o.streams, "streams", 32, "streams of the multi-stream run")
	flag.IntVar(&o.workers, "workers", 32, "workers of the second connect run")
	flag.DurationVar(&o.connectTime, "connect-time", 3*time.Second, "duration of each connect run")
	flag.IntVar(&o.slices, "slices", 6, "slices each workload (but idle) is cut into, the paths taking turns")
	flag.IntVar(&o.idle, "idle", 5000, "idle tunnels for the memory figure")
	flag.StringVar(&o.dir, "dir", "", "working directory for logs and configs (default: a new temporary one)")
	workloads := flag.String("workloads", "stream,streams,connect,idle", "workloads to run, comma-separated: stream, streams, connect, idle")
	flag.Parse()
	var err error
	if o.workloads, err = parseWorkloads(*workloads); err != nil {
		fmt.Fprintln(os.Stderr, "benchegress:", err)
		os.Exit(2)
	}
	if err := run(o, os.Stdout); err != nil {
		fmt.Fprintln(os.Stderr, "benchegress:", err)
		os.Exit(1)
	}
}

type options struct {
	smokescreen, squid string
	baseline           string // another build's benchegress: its "ours" runs as path "base"
	bare               bool
	reps               int
	bytes              int64
	readBuf            int
	streams, workers   int
	connectTime        time.Duration
	slices             int
	idle               int
	dir                string
	workloads          map[string]bool // nil: all
}

// parseWorkloads parses the -workloads list.
func parseWorkloads(list string) (map[string]bool, error) {
	w := map[string]bool{}
	for _, name := range strings.Split(list, ",") {
		name = strings.TrimSpace(name)
		switch name {
		case "stream", "streams", "connect", "idle":
			w[name] = true
		default:
			return nil, fmt.Errorf("-workloads: unknown workload %q (want stream, streams, connect, idle)", name)
		}
	}
	return w, nil
}

// runs reports whether workload is selected.
func (o options) runs(workload string) bool { return o.workloads == nil || o.workloads[workload] }

func run(o options, out io.Writer) error {
	for _, c := range []struct {
		flag string
		bad  bool
	}{
		{"-reps", o.reps < 1}, {"-bytes", o.bytes < 1}, {"-read-buf", o.readBuf < 1},
		{"-streams", o.streams < 1}, {"-workers", o.workers < 1},
		{"-connect-time", o.connectTime <= 0}, {"-slices", o.slices < 1}, {"-idle", o.idle < 0},
	} {
		if c.bad {
			return fmt.Errorf("bad option %s: want > 0 (-idle: >= 0)", c.flag)
		}
	}
	raiseFileLimit()
	if o.dir == "" {
		d, err := os.MkdirTemp("", "bench-egress-")
		if err != nil {
			return err
		}
		defer os.RemoveAll(d)
		o.dir = d
	} else if err := os.MkdirAll(o.dir, 0o755); err != nil {
		return err
	}
	up, err := startUpstream(o.readBuf)
	if err != nil {
		return err
	}
	defer up.close()
	self, err := os.Executable()
	if err != nil {
		return err
	}
	var res results
	for rep := range o.reps {
		fmt.Fprintf(os.Stderr, "benchegress: repetition %d of %d\n", rep+1, o.reps)
		procs, err := startProxies(o, self, up.port, rep)
		if err != nil {
			return err
		}
		err = runRep(o, up.port, procs, rep, &res)
		for _, p := range procs {
			p.stop()
		}
		if err != nil {
			return err
		}
	}
	res.print(out, o)
	return nil
}

// runRep runs every workload once on every path.
func runRep(o options, upPort int, procs []*proc, rep int, res *results) error {
	targets := []target{{name: "direct"}}
	for _, p := range procs {
		targets = append(targets, p.target)
	}
	// Every workload is cut into slices, the paths taking turns in an order
	// rotated per slice and per repetition, so that a slow spell of the
	// machine falls on every path alike rather than on whichever ran then.
	// The proxy CPU rows are each proxy process's user and system time (all
	// threads) over its slices, per unit of work: what the proxy itself
	// spent, apart from the clients and the upstream it shares the cores
	// with.
	// bulk moves total bytes through streams tunnels per path (opened
	// first), cut into slices with the paths taking turns, as the connect
	// runs below.
	bulk := func(row string, streams int, total int64) error {
		conns := map[string][]net.Conn{}
		defer func() {
			for _, cs := range conns {
				closeAll(cs)
			}
		}()
		for _, t := range targets {
			cs, err := openTunnels(t, upPort, streams)
			if err != nil {
				return err
			}
			conns[t.name] = cs
		}
		per := max(1, total/int64(streams)/int64(o.slices))
		elapsed := map[string]time.Duration{}
		cpu := map[string]time.Duration{}
		for s := range o.slices {
			for _, t := range rotated(targets, rep+s) {
				before := procCPU(t.pid)
				el, err := throughput(t, conns[t.name], per)
				if err != nil {
					return err
				}
				elapsed[t.name] += el
				cpu[t.name] += procCPU(t.pid) - before
			}
		}
		moved := float64(per) * float64(streams) * float64(o.slices)
		for _, t := range targets {
			res.add(row+", MB/s", t.name, moved/1e6/elapsed[t.name].Seconds(), higher)
			if t.pid != 0 {
				res.add(row+", proxy CPU ms/GB", t.name, float64(cpu[t.name])/1e6/(moved/1e9), lower)
			}
		}
		return nil
	}
	if o.runs("stream") {
		if err := bulk("1 stream", 1, o.bytes); err != nil {
			return err
		}
	}
	if o.runs("streams") {
		if err := bulk(fmt.Sprintf("%d streams", o.streams), o.streams, o.bytes); err != nil {
			return err
		}
	}
	for _, w := range []int{1, o.workers} {
		if !o.runs("connect") {
			break
		}
		row := fmt.Sprintf("connect+1st byte, %d worker(s)", w)
		runs := map[string]*connectRun{}
		cpu := map[string]time.Duration{}
		slice := o.connectTime / time.Duration(o.slices)
		for s := range o.slices {
			for _, t := range rotated(targets, rep+s) {
				if runs[t.name] == nil {
					runs[t.name] = &connectRun{}
				}
				before := procCPU(t.pid)
				if err := connectFirstByte(t, upPort, w, slice, runs[t.name]); err != nil {
					return err
				}
				cpu[t.name] += procCPU(t.pid) - before
			}
		}
		for _, t := range targets {
			r := runs[t.name]
			res.add(row+", conn/s", t.name, r.rate(), higher)
			res.add(row+", p50 ms", t.name, ms(r.quantile(0.5)), lower)
			res.add(row+", p99 ms", t.name, ms(r.quantile(0.99)), lower)
			if t.pid != 0 {
				res.add(row+", proxy CPU µs/conn", t.name, float64(cpu[t.name])/1e3/float64(len(r.lat)), lower)
			}
		}
	}
	if o.idle > 0 && o.runs("idle") {
		for _, t := range rotated(targets, rep) {
			// The bare relay splices with io.Copy, which holds two pipes per
			// direction while it waits: 6 descriptors per idle tunnel, more
			// than a 20,000-file limit allows for 5,000 (ours pools its
			// pipes). Its memory is not the floor's point: left out.
			if t.pid == 0 || t.name == "bare" {
				continue
			}
			before, with, err := idleRSS(t, upPort, o.idle)
			if err != nil {
				return err
			}
			res.add("RSS idle, MiB", t.name, float64(before)/1024, lower)
			res.add(fmt.Sprintf("RSS with %d idle tunnels, MiB", o.idle), t.name, float64(with)/1024, lower)
		}
	}
	return nil
}

// rotated is targets starting at index r (mod their number).
func rotated(targets []target, r int) []target {
	r %= len(targets)
	return append(append([]target(nil), targets[r:]...), targets[:r]...)
}

func ms(d time.Duration) float64 { return float64(d.Microseconds()) / 1000 }

// raiseFileLimit lifts the limit on open files (inherited by the proxies)
// to at least 65,536 when allowed (root), else to the hard limit: the
// idle-tunnel run holds two sockets per tunnel here, and each proxy holds
// two sockets per tunnel, plus, for a proxy that splices with io.Copy, up to
// two pipes (ours pools at most 32 pipes in all).
func raiseFileLimit() {
	var l syscall.Rlimit
	if err := syscall.Getrlimit(syscall.RLIMIT_NOFILE, &l); err != nil {
		return
	}
	want := max(l.Max, 65536)
	if syscall.Setrlimit(syscall.RLIMIT_NOFILE, &syscall.Rlimit{Cur: want, Max: want}) == nil {
		return
	}
	if l.Cur < l.Max {
		l.Cur = l.Max
		_ = syscall.Setrlimit(syscall.RLIMIT_NOFILE, &l)
	}
}
