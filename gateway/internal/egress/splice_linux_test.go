//go:build linux

package egress

import (
	"io"
	"os"
	"strconv"
	"strings"
	"testing"
	"time"
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

// TestIdleTunnelsHoldNoPipes: tunnels that carried data and went idle keep
// their sockets only (the relay's pipes go back to the pool), where
// io.Copy's splice held two pipes (four descriptors) per tunnel.
func TestIdleTunnelsHoldNoPipes(t *testing.T) {
	port := echoOneUpstream(t)
	tp := startProxy(t, port, withConfig(func(c *ProxyConfig) {
		c.UnsafeSkipSNICheck = true
		c.IdleTimeout = time.Minute
	}))
	const tunnels = 24
	before := openPipes(t)
	for i := range tunnels {
		c, resp := rawConnect(t, tp.addr, hostPort("example.com", port), basicAuth(tokenS1))
		if resp.StatusCode != 200 {
			t.Fatalf("tunnel %d: %s", i, resp.Status)
		}
		defer c.Close()
		// One byte up, one byte down: the relay ran in both directions.
		if _, err := c.Write([]byte{byte(i)}); err != nil {
			t.Fatal(err)
		}
		if _, err := io.ReadFull(c, make([]byte, 1)); err != nil {
			t.Fatalf("tunnel %d: %v", i, err)
		}
	}
	time.Sleep(100 * time.Millisecond)
	// Empty pipes stay pooled for reuse; a few at most, never one per
	// tunnel direction.
	if got := openPipes(t) - before; got > 2*4 {
		t.Fatalf("%d pipe descriptors open for %d idle tunnels, want <= 8 (pooled)", got, tunnels)
	}
	// The tunnels still work after idling.
	c, resp := rawConnect(t, tp.addr, hostPort("example.com", port), basicAuth(tokenS1))
	defer c.Close()
	if resp.StatusCode != 200 {
		t.Fatal(resp.Status)
	}
	for i := range 3 {
		if _, err := c.Write([]byte(strconv.Itoa(i))); err != nil {
			t.Fatal(err)
		}
		if _, err := io.ReadFull(c, make([]byte, 1)); err != nil {
			t.Fatal(err)
		}
	}
}
