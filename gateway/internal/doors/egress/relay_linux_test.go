//go:build linux

package egress

import (
	"bytes"
	"context"
	"crypto/rand"
	"crypto/sha256"
	"errors"
	"fmt"
	"io"
	"net"
	"os"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	"golang.org/x/sys/unix"

	"ironcurtain.dev/gateway/internal/netguard"
	"ironcurtain.dev/gateway/internal/netguard/netguardtest"
	"ironcurtain.dev/gateway/netpolicy"
)

// openPipes lists this process's open pipe descriptors: descriptor to
// pipe ("pipe:[inode]"). Pipes of Go's own splice pool may close at any
// garbage collection, so tests compare sets, not counts.
func openPipes(t *testing.T) map[int]string {
	t.Helper()
	ents, err := os.ReadDir("/proc/self/fd")
	if err != nil {
		t.Fatal(err)
	}
	pipes := map[int]string{}
	for _, e := range ents {
		fd, err := strconv.Atoi(e.Name())
		if err != nil {
			continue
		}
		if l, err := os.Readlink("/proc/self/fd/" + e.Name()); err == nil && strings.HasPrefix(l, "pipe:") {
			pipes[fd] = l
		}
	}
	return pipes
}

// newPipeFDs lists the pipe descriptors open now that were not open in
// before (the same descriptor naming the same pipe) and are not ends of a
// pooled relay pipe.
func newPipeFDs(t *testing.T, before map[int]string) []int {
	t.Helper()
	pooled := map[int]bool{}
	relayPipes.mu.Lock()
	for _, p := range relayPipes.free {
		pooled[p.r], pooled[p.w] = true, true
	}
	relayPipes.mu.Unlock()
	var fds []int
	for fd, l := range openPipes(t) {
		if before[fd] != l && !pooled[fd] {
			fds = append(fds, fd)
		}
	}
	return fds
}

// copyEchoUpstream echoes every connection's bytes through a user-space
// buffer (io.Copy between the sockets would splice and hold pipes of its
// own, which the test counts).
func copyEchoUpstream(t *testing.T) int {
	t.Helper()
	return echoUpstreamWith(t, func(c net.Conn) {
		_, _ = io.Copy(struct{ io.Writer }{c}, struct{ io.Reader }{c})
	})
}

// waitHeld waits up to a second for the relay carriers held to reach want.
func waitHeld(t *testing.T, want int64) {
	t.Helper()
	deadline := time.Now().Add(time.Second)
	for relayHeld.Load() != want && time.Now().Before(deadline) {
		time.Sleep(10 * time.Millisecond)
	}
	if got := relayHeld.Load(); got != want {
		t.Fatalf("%d relay carriers held; want %d", got, want)
	}
}

func pipesInUse() int {
	n, _, _ := relayPipeStats()
	return n
}

// waitRelaysDone waits up to 5 s for the relays of earlier tests' tunnels
// to give their carriers back, so that a test counts its own.
func waitRelaysDone(t *testing.T) {
	t.Helper()
	deadline := time.Now().Add(5 * time.Second)
	for relayHeld.Load() != 0 && time.Now().Before(deadline) {
		time.Sleep(10 * time.Millisecond)
	}
	if h, n := relayHeld.Load(), pipesInUse(); h != 0 || n != 0 {
		t.Fatalf("before the test: %d relay carriers held, %d pipe slots taken (an earlier test's tunnel is still open)", h, n)
	}
}

// TestIdleTunnelsHoldNoBuffers: tunnels that carried data (a byte each way,
// and a bulk transfer, spliced through pipes) and went idle keep their two
// sockets only: no pipe, no buffer. Every pipe the relay opened is back in
// the pool (io.Copy's splice held two pipes per direction for the tunnel's
// life: 96 descriptors for these 24 tunnels).
func TestIdleTunnelsHoldNoBuffers(t *testing.T) {
	port := copyEchoUpstream(t)
	tp := startProxy(t, port, withConfig(func(c *ProxyConfig) {
		c.UnsafeSkipSNICheck = true
		c.IdleTimeout = time.Minute
	}))
	const tunnels = 24
	waitRelaysDone(t)
	pipesBefore := openPipes(t)
	heldBefore := relayHeld.Load()
	bulk := make([]byte, 4<<20)
	if _, err := rand.Read(bulk); err != nil {
		t.Fatal(err)
	}
	var conns []io.ReadWriter
	for i := range tunnels {
		c, resp := rawConnect(t, tp.addr, hostPort("example.com", port), basicAuth(tokenS1))
		if resp.StatusCode != 200 {
			t.Fatalf("tunnel %d: %s", i, resp.Status)
		}
		defer c.Close()
		_ = c.SetDeadline(time.Now().Add(30 * time.Second))
		conns = append(conns, c)
		if _, err := c.Write([]byte{byte(i)}); err != nil {
			t.Fatal(err)
		}
		got := make([]byte, 1)
		if _, err := io.ReadFull(c, got); err != nil || got[0] != byte(i) {
			t.Fatalf("tunnel %d: %v %v", i, got, err)
		}
		if i%8 == 0 { // bulk both ways: the relay splices it
			echoed := make(chan []byte, 1)
			go func() {
				b := make([]byte, len(bulk))
				_, _ = io.ReadFull(c, b)
				echoed <- b
			}()
			if _, err := c.Write(bulk); err != nil {
				t.Fatal(err)
			}
			if b := <-echoed; sha256.Sum256(b) != sha256.Sum256(bulk) {
				t.Fatalf("tunnel %d: the bulk transfer came back changed", i)
			}
		}
	}
	waitHeld(t, heldBefore)
	if n := pipesInUse(); n != 0 {
		t.Fatalf("%d relay pipes taken by idle tunnels", n)
	}
	if fds := newPipeFDs(t, pipesBefore); len(fds) > 0 {
		t.Fatalf("%d idle tunnels hold pipe descriptors %v, want none", tunnels, fds)
	}
	_, pooled, open := relayPipeStats()
	t.Logf("%d idle tunnels; %d pipes pooled, %d open", tunnels, pooled, open)
	// The tunnels still work after idling.
	for i, c := range conns[:3] {
		msg := []byte(strconv.Itoa(i) + "-again")
		if _, err := c.Write(msg); err != nil {
			t.Fatal(err)
		}
		got := make([]byte, len(msg))
		if _, err := io.ReadFull(c, got); err != nil || !bytes.Equal(got, msg) {
			t.Fatalf("tunnel %d after idling: %q %v", i, got, err)
		}
	}
}

// The pipes are capped: with every slot taken, a direction goes on with a
// buffer; giving a pipe back frees its slot and pools it, unless bytes are
// still in it (then it is closed); a carrier that rules splice out gets a
// buffer.
func TestRelayPipeCap(t *testing.T) {
	waitRelaysDone(t)
	held := make([]relayCarrier, maxRelayPipes)
	for i := range held {
		held[i].take(false)
		if held[i].pipe == nil || held[i].buf != nil {
			t.Fatalf("carrier %d: pipe %v, buffer %v; want a pipe", i, held[i].pipe, held[i].buf)
		}
	}
	if inUse, pooled, open := relayPipeStats(); inUse != maxRelayPipes || pooled != 0 || open != maxRelayPipes {
		t.Fatalf("every slot taken: %d in use, %d pooled, %d open; want %d, 0, %d", inUse, pooled, open, maxRelayPipes, maxRelayPipes)
	}
	var extra relayCarrier
	extra.take(false)
	if extra.pipe != nil || extra.buf == nil || len(*extra.buf) != relayBuf {
		t.Fatalf("with every slot taken: pipe %v, buffer %v; want a %d-byte buffer", extra.pipe, extra.buf, relayBuf)
	}
	extra.release()
	extra.release() // twice: a no-op
	held[0].release()
	extra.take(false)
	if extra.pipe == nil {
		t.Fatal("a freed slot was not reused")
	}
	extra.release()
	var noSplice relayCarrier
	noSplice.take(true)
	if noSplice.pipe != nil || noSplice.buf == nil {
		t.Fatal("a carrier that rules splice out got a pipe")
	}
	noSplice.release()

	// A pipe given back with a byte still in it is closed, not pooled.
	if _, err := unix.Write(held[1].pipe.w, []byte{1}); err != nil {
		t.Fatal(err)
	}
	held[1].inPipe = 1
	full := *held[1].pipe
	_, pooled, open := relayPipeStats()
	held[1].release()
	if _, p, o := relayPipeStats(); p != pooled || o != open-1 {
		t.Fatalf("a pipe with a byte in it: %d pooled (before %d), %d open (before %d); want it closed", p, pooled, o, open)
	}
	for _, fd := range []int{full.r, full.w} {
		if _, err := unix.FcntlInt(uintptr(fd), unix.F_GETFD, 0); err != unix.EBADF {
			t.Fatalf("descriptor %d of the closed pipe: %v; want EBADF", fd, err)
		}
	}
	for i := range held {
		held[i].release()
	}
	if inUse, pooled, open := relayPipeStats(); inUse != 0 || pooled != open || open > maxRelayPipes {
		t.Fatalf("every pipe given back: %d in use, %d pooled, %d open; want 0, every open one, at most %d", inUse, pooled, open, maxRelayPipes)
	}
}

// Tunnels stuck writing to an upstream that stopped reading each hold one
// carrier, at most maxRelayPipes of them pipes (the others buffers); another
// tunnel still relays, and when the idle watchdog cuts the stuck ones every
// carrier and slot comes back and the pipes left with bytes are closed.
func TestStuckTunnelsBoundedBuffers(t *testing.T) {
	done := make(chan struct{})
	t.Cleanup(func() { close(done) })
	port := echoUpstreamWith(t, func(c net.Conn) {
		first := make([]byte, 1)
		if _, err := io.ReadFull(c, first); err != nil {
			return
		}
		if first[0] == 'S' { // stall: never read again, hold the connection
			<-done
			return
		}
		_, _ = c.Write(first)
		_, _ = io.Copy(struct{ io.Writer }{c}, struct{ io.Reader }{c})
	})
	const stuck = maxRelayPipes + 30 // more stuck tunnels than pipes
	tp := startProxy(t, port, withConfig(func(c *ProxyConfig) {
		c.UnsafeSkipSNICheck = true
		c.IdleTimeout = 8 * time.Second      // every stuck tunnel blocks well before the first is cut
		c.MaxTunnelsPerSession = 2*stuck + 1 // above the default 64
	}))
	waitRelaysDone(t)
	heldBefore, pipesBefore := relayHeld.Load(), openPipes(t)
	chunk := make([]byte, 1<<20)
	for i := range stuck {
		c, resp := rawConnect(t, tp.addr, hostPort("example.com", port), basicAuth(tokenS1))
		if resp.StatusCode != 200 {
			t.Fatalf("tunnel %d: %s", i, resp.Status)
		}
		defer c.Close()
		go func() {
			_ = c.SetWriteDeadline(time.Now().Add(20 * time.Second))
			if _, err := c.Write([]byte{'S'}); err != nil {
				return
			}
			for { // until the socket buffers fill and the proxy cuts the tunnel
				if _, err := c.Write(chunk); err != nil {
					return
				}
			}
		}()
	}
	// Wait until every stuck tunnel is blocked holding its buffer (before
	// the watchdog cuts them).
	deadline := time.Now().Add(7 * time.Second)
	for relayHeld.Load()-heldBefore < stuck && time.Now().Before(deadline) {
		time.Sleep(5 * time.Millisecond)
	}
	held, pipes := relayHeld.Load()-heldBefore, pipesInUse()
	if held < stuck {
		t.Fatalf("%d of %d stuck tunnels hold a carrier", held, stuck)
	}
	if pipes != maxRelayPipes { // every stuck direction asked for one: the cap is reached, not passed
		t.Fatalf("%d pipes in use; want the cap, %d", pipes, maxRelayPipes)
	}
	if _, _, o := relayPipeStats(); o > maxRelayPipes {
		t.Fatalf("%d relay pipes open; at most %d may be", o, maxRelayPipes)
	}
	if fds := newPipeFDs(t, pipesBefore); len(fds) > 2*maxRelayPipes {
		t.Fatalf("%d pipe descriptors opened; at most %d may be", len(fds), 2*maxRelayPipes)
	}
	t.Logf("%d stuck tunnels hold %d carriers, %d of them pipes (cap %d)", stuck, held, pipes, maxRelayPipes)
	// Another tunnel still relays, in both directions, with the cap reached.
	c, resp := rawConnect(t, tp.addr, hostPort("example.com", port), basicAuth(tokenS1))
	if resp.StatusCode != 200 {
		t.Fatal(resp.Status)
	}
	defer c.Close()
	_ = c.SetDeadline(time.Now().Add(10 * time.Second))
	msg := append([]byte{'E'}, bytes.Repeat([]byte("0123456789abcdef"), 8192)...) // 128 KiB + 1
	go func() { _, _ = c.Write(msg) }()
	got := make([]byte, len(msg))
	if _, err := io.ReadFull(c, got); err != nil || !bytes.Equal(got, msg) {
		t.Fatalf("a tunnel beside %d stuck ones: %v (echo equal: %v)", stuck, err, bytes.Equal(got, msg))
	}
	c.Close()
	// The watchdog cuts the stuck tunnels; every buffer comes back.
	deadline = time.Now().Add(20 * time.Second)
	for (relayHeld.Load() != heldBefore || pipesInUse() != 0) && time.Now().Before(deadline) {
		time.Sleep(20 * time.Millisecond)
	}
	if h, n := relayHeld.Load(), pipesInUse(); h != heldBefore || n != 0 {
		t.Fatalf("after the stuck tunnels were cut: %d carriers held (before: %d), %d pipe slots taken", h, heldBefore, n)
	}
	if fds := newPipeFDs(t, pipesBefore); len(fds) > 0 {
		t.Fatalf("after the stuck tunnels were cut: pipe descriptors %v open outside the pool", fds)
	}
	if _, n, o := relayPipeStats(); n != o {
		t.Fatalf("after the stuck tunnels were cut: %d relay pipes open, %d pooled", o, n)
	}
}

// A tunnel's client socket has no TCP keep-alive; its upstream socket
// probes after 60 s idle, with the host's interval and count (two options
// set); a Guard left at its default keeps Go's.
func TestTunnelSocketsKeepAlive(t *testing.T) {
	port := echoUpstreamWith(t, func(c net.Conn) { _, _ = io.Copy(c, c) })
	tp := startProxy(t, port, withConfig(func(c *ProxyConfig) { c.UnsafeSkipSNICheck = true }))
	c, resp := rawConnect(t, tp.addr, hostPort("example.com", port), basicAuth(tokenS1))
	if resp.StatusCode != 200 {
		t.Fatal(resp.Status)
	}
	defer c.Close()
	if _, err := c.Write([]byte("x")); err != nil { // the relay has begun once the echo comes back
		t.Fatal(err)
	}
	if _, err := io.ReadFull(c, make([]byte, 1)); err != nil {
		t.Fatal(err)
	}
	tp.p.mu.Lock()
	conns := make([]net.Conn, 0, len(tp.p.conns))
	for pc := range tp.p.conns {
		conns = append(conns, rawConn(pc))
	}
	tp.p.mu.Unlock()
	if len(conns) != 2 {
		t.Fatalf("%d tracked connections; want the tunnel's 2", len(conns))
	}
	var sawClient, sawUpstream bool
	for _, pc := range conns {
		ka := sockopt(t, pc, unix.SOL_SOCKET, unix.SO_KEEPALIVE)
		switch {
		case pc.LocalAddr().String() == tp.addr: // accepted from the agent
			sawClient = true
			if ka != 0 {
				t.Errorf("client socket: SO_KEEPALIVE %d; want 0", ka)
			}
		case pc.RemoteAddr().(*net.TCPAddr).Port == port:
			sawUpstream = true
			if idle := sockopt(t, pc, unix.IPPROTO_TCP, unix.TCP_KEEPIDLE); ka != 1 || idle != 60 {
				t.Errorf("upstream socket: SO_KEEPALIVE %d, TCP_KEEPIDLE %d; want 1, 60", ka, idle)
			}
		}
	}
	if !sawClient || !sawUpstream {
		t.Fatalf("client socket seen %v, upstream socket seen %v", sawClient, sawUpstream)
	}
	// Control: a Guard left at its default dials with Go's keep-alive (15 s).
	g, err := netguard.NewGuard(netguard.GuardConfig{Allow: netpolicy.MustParsePatterns("example.com"), Addresses: loopback8,
		Resolver: netguardtest.NewResolver().Set("example.com", "127.0.0.1")})
	if err != nil {
		t.Fatal(err)
	}
	h, err := netpolicy.ParseHost("example.com")
	if err != nil {
		t.Fatal(err)
	}
	dc, _, err := g.Dial(context.Background(), h, port)
	if err != nil {
		t.Fatal(err)
	}
	defer dc.Close()
	if ka, idle := sockopt(t, dc, unix.SOL_SOCKET, unix.SO_KEEPALIVE), sockopt(t, dc, unix.IPPROTO_TCP, unix.TCP_KEEPIDLE); ka != 1 || idle != 15 {
		t.Errorf("default Guard: SO_KEEPALIVE %d, TCP_KEEPIDLE %d; want Go's 1, 15", ka, idle)
	}
}

func sockopt(t *testing.T, c net.Conn, level, opt int) int {
	t.Helper()
	tc, ok := c.(*net.TCPConn)
	if !ok {
		t.Fatalf("%T is not a TCP connection", c)
	}
	rc, err := tc.SyscallConn()
	if err != nil {
		t.Fatal(err)
	}
	var v int
	var gerr error
	if err := rc.Control(func(fd uintptr) { v, gerr = unix.GetsockoptInt(int(fd), level, opt) }); err != nil {
		t.Fatal(err)
	}
	if gerr != nil {
		t.Fatal(gerr)
	}
	return v
}

// Many tunnels relaying at once, with more directions busy than there are
// pipes: the upstreams hold off reading until every pipe is taken and
// directions beyond the cap wait with buffers; then they read, and pipes and
// buffers move the rest as they come free (a direction may carry one burst
// through a pipe and the next through a buffer). Every byte arrives, in
// order, both ways; each client's half-close is passed on to its upstream
// and back; each tunnel's audit row counts exactly the bytes it moved; every
// carrier comes back.
func TestRelayManyTunnelsIntegrity(t *testing.T) {
	release := make(chan struct{})
	var releaseOnce sync.Once
	t.Cleanup(func() { releaseOnce.Do(func() { close(release) }) })
	port := echoUpstreamWith(t, func(c net.Conn) {
		<-release
		// Echo through user space (io.Copy between the sockets would splice
		// with pipes of its own), then pass the client's EOF back.
		_, _ = io.Copy(struct{ io.Writer }{c}, struct{ io.Reader }{c})
		_ = c.(*net.TCPConn).CloseWrite()
	})
	const tunnels = 3 * maxRelayPipes
	tp := startProxy(t, port, withConfig(func(c *ProxyConfig) {
		c.UnsafeSkipSNICheck = true
		c.MaxTunnelsPerSession = tunnels
		c.IdleTimeout = 2 * time.Minute // a held-off tunnel is waiting, not idle, here
	}))
	waitRelaysDone(t)
	conns := make([]net.Conn, tunnels)
	for i := range conns {
		conns[i] = openTunnel(t, tp, port, tokenS1)
		defer conns[i].Close()
		_ = conns[i].SetDeadline(time.Now().Add(60 * time.Second))
	}
	// Tunnel i sends block[i*1021:][:size]: different bytes and a different
	// size on every tunnel, from one random block (no copies). Each sends
	// more than its upload direction can leave in kernel buffers with the
	// upstream holding off (the proxy's send buffer, grown up to tcp_wmem's
	// maximum; the upstream's receive buffer, tcp_rmem's default; a pipe),
	// so that every direction waits holding its carrier. Sizes just above
	// 4 MiB were absorbed whole on one VM, and those tunnels' uploads ended.
	base := sysctlField(t, "tcp_wmem", 2, 4<<20) + sysctlField(t, "tcp_rmem", 1, 128<<10) + relayPipeSize + 1<<20
	sizeOf := func(i int) int { return base + i*23<<10 }
	block := make([]byte, (tunnels-1)*1021+sizeOf(tunnels-1))
	if _, err := rand.Read(block); err != nil {
		t.Fatal(err)
	}
	sizes := map[int64]bool{}
	errs := make(chan error, tunnels)
	var wg sync.WaitGroup
	for i, c := range conns {
		size := sizeOf(i)
		data := block[i*1021:][:size]
		sizes[int64(size)] = true
		wg.Add(2)
		go func() {
			defer wg.Done()
			// Writes of uneven sizes, then the half-close.
			for rest, k := data, 1; len(rest) > 0; k = k*7%65521 + 1 {
				n := min(len(rest), k)
				if _, err := c.Write(rest[:n]); err != nil {
					return
				}
				rest = rest[n:]
			}
			_ = c.(*net.TCPConn).CloseWrite()
		}()
		go func() {
			defer wg.Done()
			// Compare what comes back with what was sent, until the
			// upstream's EOF comes back.
			buf := make([]byte, 64<<10)
			off := 0
			for {
				n, err := c.Read(buf)
				if n > 0 {
					if off+n > len(data) || !bytes.Equal(buf[:n], data[off:off+n]) {
						errs <- fmt.Errorf("tunnel %d: bytes %d-%d back differ from those sent", i, off, off+n)
						return
					}
					off += n
				}
				if errors.Is(err, io.EOF) {
					if off != len(data) {
						errs <- fmt.Errorf("tunnel %d: %d bytes back of %d", i, off, len(data))
					}
					return
				}
				if err != nil {
					errs <- fmt.Errorf("tunnel %d: after %d bytes back: %w", i, off, err)
					return
				}
			}
		}()
	}
	// Every upload direction blocks holding a carrier: the pipes' cap is
	// reached, not passed, and the others hold buffers.
	deadline := time.Now().Add(20 * time.Second)
	for relayHeld.Load() < tunnels && time.Now().Before(deadline) {
		time.Sleep(5 * time.Millisecond)
	}
	held, pipes := relayHeld.Load(), pipesInUse()
	releaseOnce.Do(func() { close(release) })
	if held < tunnels || pipes != maxRelayPipes {
		t.Errorf("while the upstreams held off: %d carriers held, %d pipes in use; want >= %d, and the cap, %d", held, pipes, tunnels, maxRelayPipes)
	}
	wg.Wait()
	close(errs)
	for err := range errs {
		t.Error(err)
	}
	for _, c := range conns {
		c.Close()
	}
	tp.sink.wait(t, tunnels)
	for _, ev := range tp.sink.all() {
		if ev.BytesUp != ev.BytesDown || !sizes[ev.BytesUp] {
			t.Errorf("audit row %s: %d bytes up, %d down (error %q); want the same size, one the test sent", ev.ID, ev.BytesUp, ev.BytesDown, ev.Error)
		}
	}
	waitRelaysDone(t)
	if _, pooled, open := relayPipeStats(); pooled != open || open > maxRelayPipes {
		t.Fatalf("%d relay pipes open, %d pooled; want all pooled, at most %d", open, pooled, maxRelayPipes)
	}
}

// Out of descriptors (an agent holding every connection it may open, say):
// a direction that cannot open a pipe copies through a buffer, and the
// failed attempt leaves the pool's counts as they were.
func TestRelayPipeOutOfDescriptors(t *testing.T) {
	waitRelaysDone(t)
	// Empty the pool, so that taking a pipe must open one.
	relayPipes.mu.Lock()
	for _, p := range relayPipes.free {
		p.close()
		relayPipes.open--
	}
	relayPipes.free = nil
	relayPipes.mu.Unlock()

	// The lowest free descriptor becomes the limit: pipe(2) cannot get two.
	f, err := os.Open(os.DevNull)
	if err != nil {
		t.Fatal(err)
	}
	lowest := f.Fd()
	f.Close()
	var lim unix.Rlimit
	if err := unix.Getrlimit(unix.RLIMIT_NOFILE, &lim); err != nil {
		t.Fatal(err)
	}
	low := lim
	low.Cur = uint64(lowest)
	if err := unix.Setrlimit(unix.RLIMIT_NOFILE, &low); err != nil {
		t.Fatal(err)
	}
	var c relayCarrier
	c.take(false)
	if err := unix.Setrlimit(unix.RLIMIT_NOFILE, &lim); err != nil {
		t.Fatal(err)
	}
	defer c.release()
	if c.pipe != nil || c.buf == nil {
		t.Fatalf("out of descriptors: pipe %v, buffer %v; want a buffer", c.pipe, c.buf)
	}
	if inUse, pooled, open := relayPipeStats(); inUse != 0 || pooled != 0 || open != 0 {
		t.Fatalf("after a failed pipe: %d in use, %d pooled, %d open; want 0, 0, 0", inUse, pooled, open)
	}
	c.release()
	c.take(false) // with descriptors again
	if c.pipe == nil {
		t.Fatal("no pipe once descriptors are free again")
	}
}

// sysctlField returns field i (0-based) of /proc/sys/net/ipv4/name (three
// numbers: min, default, max), or def when it cannot be read.
func sysctlField(t *testing.T, name string, i, def int) int {
	t.Helper()
	b, err := os.ReadFile("/proc/sys/net/ipv4/" + name)
	if err != nil {
		t.Logf("%s: %v; assuming %d", name, err, def)
		return def
	}
	f := strings.Fields(string(b))
	if i >= len(f) {
		return def
	}
	n, err := strconv.Atoi(f[i])
	if err != nil || n <= 0 {
		return def
	}
	return n
}
