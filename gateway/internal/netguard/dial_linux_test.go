//go:build linux

package netguard

import (
	"context"
	"errors"
	"net"
	"runtime"
	"strconv"
	"testing"
	"time"

	"golang.org/x/sys/unix"

	"ironcurtain.dev/gateway/netpolicy"
)

// silentPort listens with a backlog of zero and never accepts, then fills
// the queue: later SYNs are dropped, so a connect to the port neither
// succeeds nor fails until the client gives up.
func silentPort(t *testing.T) int {
	t.Helper()
	fd, err := unix.Socket(unix.AF_INET, unix.SOCK_STREAM, 0)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = unix.Close(fd) })
	if err := unix.Bind(fd, &unix.SockaddrInet4{Addr: [4]byte{127, 0, 0, 1}}); err != nil {
		t.Fatal(err)
	}
	if err := unix.Listen(fd, 0); err != nil {
		t.Fatal(err)
	}
	sa, err := unix.Getsockname(fd)
	if err != nil {
		t.Fatal(err)
	}
	port := sa.(*unix.SockaddrInet4).Port
	for range 4 { // the queue holds backlog+1; extra handshakes stall
		c, err := net.DialTimeout("tcp", net.JoinHostPort("127.0.0.1", strconv.Itoa(port)), 200*time.Millisecond)
		if err == nil {
			t.Cleanup(func() { _ = c.Close() })
		}
	}
	return port
}

// A target that never answers the handshake is given up after the
// guard's DialTimeout, as a timeout (the proxy's 504), and the dial leaves
// no goroutine behind.
func TestGuardConnectTimeout(t *testing.T) {
	port := silentPort(t)
	g, err := NewGuard(GuardConfig{Allow: netpolicy.MustParsePatterns("127.0.0.1"), Addresses: loopback8, DialTimeout: 300 * time.Millisecond})
	if err != nil {
		t.Fatal(err)
	}
	h, err := netpolicy.ParseHost("127.0.0.1")
	if err != nil {
		t.Fatal(err)
	}
	before := runtime.NumGoroutine()
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	start := time.Now()
	c, _, err := g.DialHost(ctx, "tcp", h, port)
	el := time.Since(start)
	if err == nil {
		_ = c.Close()
		t.Fatal("the silent port accepted a handshake: the test's premise (a full accept queue drops SYNs) does not hold")
	}
	if ne := net.Error(nil); !errors.As(err, &ne) || !ne.Timeout() {
		t.Fatalf("error %v; want a timeout", err)
	}
	if el < 250*time.Millisecond || el > 2*time.Second {
		t.Fatalf("gave up after %v; want about 300ms", el)
	}
	time.Sleep(50 * time.Millisecond)
	if n := runtime.NumGoroutine(); n > before {
		t.Fatalf("%d goroutines after the dial, %d before", n, before)
	}
}
