package egress

import (
	"encoding/base64"
	"io"
	"net"
	"path/filepath"
	"strconv"
	"testing"
	"time"

	"ironcurtain.dev/gateway/internal/audit"
	"ironcurtain.dev/gateway/netpolicy"
)

// BenchmarkConnectFirstByte is one tunnel's whole life through the proxy,
// as the agent's clients see it: CONNECT (authenticated, decided, dialed,
// answered 200), one byte each way, close, and its audit row written to a
// JSON-lines audit file (a production sink: gateway.yaml audit.jsonl_file).
// It is the loop to profile the connect path with:
//
//	go test -run '^$' -bench ConnectFirstByte -benchtime 3000x -cpuprofile cpu.out -memprofile mem.out ./internal/doors/egress/
//
// (make bench-egress compares the same with smokescreen and Squid, each in
// its own process.)
func BenchmarkConnectFirstByte(b *testing.B) {
	port := echoOneUpstream(b)
	sink, err := audit.OpenJSONL(filepath.Join(b.TempDir(), "audit.jsonl"))
	if err != nil {
		b.Fatal(err)
	}
	b.Cleanup(func() { sink.Close() })
	tp := startProxy(b, port, withConfig(func(c *ProxyConfig) {
		c.Allow = netpolicy.MustParsePatterns("127.0.0.1") // as make bench-egress: no name to resolve
		c.UnsafeSkipSNICheck = true
		c.MaxTunnelsPerSession = 1 << 16
		c.MaxConnections = 1 << 16
		c.MaxConnectionsPerClient = 1 << 16
	}), withDeps(func(d *Deps) { d.Sink = sink }))
	target := "127.0.0.1:" + strconv.Itoa(port)
	req := []byte("CONNECT " + target + " HTTP/1.1\r\nHost: " + target + "\r\nProxy-Authorization: Basic " +
		base64.StdEncoding.EncodeToString([]byte("agent:"+tokenS1)) + "\r\n\r\n")
	const okHead = "HTTP/1.1 200 Connection established\r\n\r\n"
	b.ReportAllocs()
	resp := make([]byte, len(okHead)+1)
	for b.Loop() {
		c, err := net.Dial("tcp", tp.addr)
		if err != nil {
			b.Fatal(err)
		}
		if _, err := c.Write(req); err != nil {
			b.Fatal(err)
		}
		if _, err := io.ReadFull(c, resp[:len(okHead)]); err != nil || string(resp[:len(okHead)]) != okHead {
			b.Fatalf("CONNECT: %q %v", resp, err)
		}
		if _, err := c.Write([]byte{1}); err != nil {
			b.Fatal(err)
		}
		if _, err := io.ReadFull(c, resp[:1]); err != nil {
			b.Fatal(err)
		}
		_ = c.(*net.TCPConn).SetLinger(0)
		c.Close()
	}
}

// echoOneUpstream answers every byte it reads with one byte, closing with
// a reset (no TIME_WAIT pile-up over thousands of iterations).
func echoOneUpstream(b testing.TB) int {
	return echoUpstreamWith(b, func(c net.Conn) {
		_ = c.(*net.TCPConn).SetLinger(0)
		buf := make([]byte, 512)
		for {
			_ = c.SetReadDeadline(time.Now().Add(time.Minute))
			n, err := c.Read(buf)
			if n > 0 {
				if _, err := c.Write(buf[:1]); err != nil {
					return
				}
			}
			if err != nil {
				return
			}
		}
	})
}
