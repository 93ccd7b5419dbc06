//go:build linux

package egress

import (
	"bytes"
	"context"
	"crypto/rand"
	"crypto/sha256"
	"io"
	"net"
	"os"
	"strconv"
	"strings"
	"testing"
	"time"

	"golang.org/x/sys/unix"

	"ironcurtain.dev/gateway/netpolicy"
)

// openPipes counts this process's descriptors that are pipes.
func openPipes(t *testing.T) int {
	t.Helper()
	ents, err := os.ReadDir("/proc/self/fd")
	if err != nil {
		t.Fatal(err)
	}
	n := 0
	for _, e := range ents {
		if l, err := os.Readlink("/proc/self/fd/" + e.Name()); err == nil && strings.HasPrefix(l, "pipe:") {
			n++
		}
	}
	return n
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

// waitHeld waits up to a second for the relay buffers held to reach want.
func waitHeld(t *testing.T, want int64) {
	t.Helper()
	deadline := time.Now().Add(time.Second)
	for relayBufsHeld.Load() != want && time.Now().Before(deadline) {
		time.Sleep(10 * time.Millisecond)
	}
	if got := relayBufsHeld.Load(); got != want {
		t.Fatalf("%d relay buffers held; want %d", got, want)
	}
}

// TestIdleTunnelsHoldNoBuffers: tunnels that carried data (a byte each way,
// and a bulk transfer that takes the big buffers) and went idle keep their
// two sockets only: no relay buffer, no pipe descriptor (io.Copy's splice
// held two pipes per direction for the tunnel's life).
func TestIdleTunnelsHoldNoBuffers(t *testing.T) {
	port := copyEchoUpstream(t)
	tp := startProxy(t, port, withConfig(func(c *ProxyConfig) {
		c.UnsafeSkipSNICheck = true
		c.IdleTimeout = time.Minute
	}))
	const tunnels = 24
	pipesBefore := openPipes(t)
	heldBefore := relayBufsHeld.Load()
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
		if i%8 == 0 { // bulk both ways: the relay moves it with big buffers
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
	if got := openPipes(t) - pipesBefore; got > 0 {
		t.Fatalf("%d pipe descriptors open for %d idle tunnels, want 0", got, tunnels)
	}
	if n := len(bigRelaySlots); n != 0 {
		t.Fatalf("%d big relay buffers taken by idle tunnels", n)
	}
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

// The big buffers are capped: with every slot taken, a direction that asks
// for one goes on with a small one; giving a buffer back frees its slot.
func TestRelayBufferCap(t *testing.T) {
	held := make([]relayBuffer, maxBigRelayBufs)
	for i := range held {
		held[i].take(true)
		if !held[i].big || len(*held[i].p) != bigRelayBuf {
			t.Fatalf("buffer %d: big %v, %d bytes; want a big one", i, held[i].big, len(*held[i].p))
		}
	}
	var extra relayBuffer
	extra.take(true)
	if extra.big || len(*extra.p) != relayBuf {
		t.Fatalf("with every slot taken: big %v, %d bytes; want a %d-byte one", extra.big, len(*extra.p), relayBuf)
	}
	extra.release()
	held[0].release()
	extra.take(true)
	if !extra.big {
		t.Fatal("a freed slot was not reused")
	}
	extra.release()
	extra.release() // twice: a no-op
	for i := range held {
		held[i].release()
	}
	if n := len(bigRelaySlots); n != 0 {
		t.Fatalf("%d slots still taken after every buffer was given back", n)
	}
}

// Tunnels stuck writing to an upstream that stopped reading each hold one
// buffer, at most maxBigRelayBufs of them big; another tunnel still relays,
// and when the idle watchdog cuts the stuck ones every buffer and slot
// comes back.
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
	const stuck = maxBigRelayBufs + 30 // more stuck tunnels than big buffers
	tp := startProxy(t, port, withConfig(func(c *ProxyConfig) {
		c.UnsafeSkipSNICheck = true
		c.IdleTimeout = 8 * time.Second      // every stuck tunnel blocks well before the first is cut
		c.MaxTunnelsPerSession = 2*stuck + 1 // above the default 64
	}))
	heldBefore := relayBufsHeld.Load()
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
	for relayBufsHeld.Load()-heldBefore < stuck && time.Now().Before(deadline) {
		time.Sleep(5 * time.Millisecond)
	}
	held, big := relayBufsHeld.Load()-heldBefore, len(bigRelaySlots)
	if held < stuck {
		t.Fatalf("%d of %d stuck tunnels hold a buffer", held, stuck)
	}
	if big != maxBigRelayBufs { // every stuck direction asked for one: the cap is reached, not passed
		t.Fatalf("%d big buffers in use; want the cap, %d", big, maxBigRelayBufs)
	}
	t.Logf("%d stuck tunnels hold %d buffers, %d of them big (cap %d)", stuck, held, big, maxBigRelayBufs)
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
	for (relayBufsHeld.Load() != heldBefore || len(bigRelaySlots) != 0) && time.Now().Before(deadline) {
		time.Sleep(20 * time.Millisecond)
	}
	if h, n := relayBufsHeld.Load(), len(bigRelaySlots); h != heldBefore || n != 0 {
		t.Fatalf("after the stuck tunnels were cut: %d buffers held (before: %d), %d big slots taken", h, heldBefore, n)
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
	g, err := NewGuard(GuardConfig{Allow: netpolicy.MustParsePatterns("example.com"), Addresses: loopback8,
		Resolver: newFakeResolver().set("example.com", "127.0.0.1")})
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
