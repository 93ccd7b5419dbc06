package egress

import (
	"context"
	"fmt"
	"net"
	"runtime"
	"sync/atomic"
	"syscall"
	"testing"
	"time"

	"ironcurtain.dev/gateway/internal/audit"
	"ironcurtain.dev/gateway/internal/netguard/netguardtest"
)

// holdUpstream accepts connections and holds each open, idle, until its
// client closes (one small goroutine each, blocked in a 1-byte read), as a
// server would.
func holdUpstream(b *testing.B) int {
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		b.Fatal(err)
	}
	b.Cleanup(func() { ln.Close() })
	go func() {
		for {
			c, err := ln.Accept()
			if err != nil {
				return
			}
			go func() {
				defer c.Close()
				var one [1]byte
				for {
					if _, err := c.Read(one[:]); err != nil {
						return
					}
				}
			}()
		}
	}()
	return ln.Addr().(*net.TCPAddr).Port
}

// heldBy opens k connections with dial and returns them and the memory
// (heap and goroutine stacks, after a GC) they hold in this process.
func heldBy(b *testing.B, k int, dial dialFunc) ([]net.Conn, float64, time.Duration) {
	runtime.GC()
	var m0, m1 runtime.MemStats
	runtime.ReadMemStats(&m0)
	conns := make([]net.Conn, 0, k)
	start := time.Now()
	for range k {
		c, err := dial()
		if err != nil {
			for _, c := range conns {
				c.Close()
			}
			b.Fatalf("connection %d: %v", len(conns)+1, err)
		}
		conns = append(conns, c)
	}
	opened := time.Since(start)
	time.Sleep(50 * time.Millisecond) // the upstream's accept loop catches up
	runtime.GC()
	runtime.ReadMemStats(&m1)
	return conns, float64(int64(m1.HeapInuse+m1.StackInuse) - int64(m0.HeapInuse+m0.StackInuse)), opened
}

func closeAll(conns []net.Conn) {
	for _, c := range conns {
		c.Close()
	}
}

// fdsPerTunnel: the client's socket, the proxy's two and the upstream's,
// all in this process.
const fdsPerTunnel = 4

// BenchmarkIdleTunnels holds 1 to 10,000 CONNECT tunnels open and idle
// (raw TCP, so the SNI check is off: past the check a TLS tunnel holds the
// same relay) and reports the memory the proxy holds for them (heap and
// goroutine stacks after a GC, less what the same number of direct
// connections holds in the same run: the client and upstream sides) and
// the cost of opening and closing one more tunnel beside them. Sizes the open-file limit cannot hold are
// skipped with the limit named.
//
//	go test ./internal/doors/egress -run '^$' -bench BenchmarkIdleTunnels -benchtime 200x
func BenchmarkIdleTunnels(b *testing.B) {
	var lim syscall.Rlimit
	if err := syscall.Getrlimit(syscall.RLIMIT_NOFILE, &lim); err != nil {
		b.Fatal(err)
	}
	if lim.Cur < lim.Max {
		lim.Cur = lim.Max
		if err := syscall.Setrlimit(syscall.RLIMIT_NOFILE, &lim); err != nil {
			b.Logf("raising RLIMIT_NOFILE to %d: %v", lim.Max, err)
		}
		_ = syscall.Getrlimit(syscall.RLIMIT_NOFILE, &lim)
	}
	for _, k := range []int{1, 100, 1000, 4000, 10000} {
		b.Run(fmt.Sprintf("tunnels=%d", k), func(b *testing.B) {
			if need := uint64(fdsPerTunnel*(k+1) + 256); need > lim.Cur {
				b.Skipf("%d idle tunnels need about %d open files in this process (client, proxy and upstream sides); RLIMIT_NOFILE is %d (hard %d) and cannot be raised here",
					k, need, lim.Cur, lim.Max)
			}
			port := holdUpstream(b)
			// The harness's memSink holds 1,024 events; thousands of
			// tunnels are recorded (and counted) here instead.
			sink := &countingSink{}
			tp := startProxy(b, port, withConfig(func(c *ProxyConfig) {
				c.UnsafeSkipSNICheck = true
				c.MaxTunnelsPerSession = k + 4096 // closed tunnels are released asynchronously
				c.MaxConnections = k + 8192
				c.MaxConnectionsPerClient = k + 8192
				c.IdleTimeout = 30 * time.Minute
				c.Resolver = netguardtest.NewResolver().Set("example.com", "127.0.0.1")
			}), withDeps(func(d *Deps) { d.Sink = sink }))
			dial := proxyDial(tp, port)
			// The same k connections made directly, in the same run: what
			// the client and upstream sides hold without the proxy.
			direct, base, _ := heldBy(b, k, directDial(port))
			closeAll(direct)
			conns, held, opened := heldBy(b, k, dial)
			defer closeAll(conns)
			proxy := held - base
			b.ReportAllocs()
			cpu := processCPUTime()
			for b.Loop() {
				c, err := dial()
				if err != nil {
					b.Fatal(err)
				}
				c.Close()
			}
			b.ReportMetric(float64(processCPUTime()-cpu)/float64(b.N), "cpu-ns/op")
			if got := sink.n.Load(); got < int64(b.N)/2 {
				b.Fatalf("%d tunnels opened and closed, %d recorded", b.N, got)
			}
			b.ReportMetric(proxy/float64(k)/1024, "proxy-KB/tunnel")
			b.ReportMetric(proxy/1e6, "proxy-MB")
			b.ReportMetric(float64(opened.Microseconds())/float64(k), "open-µs/tunnel")
		})
	}
}

// countingSink records egress events by counting them.
type countingSink struct{ n atomic.Int64 }

func (s *countingSink) Record(_ context.Context, e audit.Event) error {
	if _, ok := e.(*audit.EgressEvent); !ok {
		return fmt.Errorf("unexpected event %T", e)
	}
	s.n.Add(1)
	return nil
}

func processCPUTime() time.Duration {
	var ru syscall.Rusage
	if err := syscall.Getrusage(syscall.RUSAGE_SELF, &ru); err != nil {
		return 0
	}
	return time.Duration(ru.Utime.Nano() + ru.Stime.Nano())
}
