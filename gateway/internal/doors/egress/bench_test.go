package egress

import (
	"bytes"
	"crypto/tls"
	"crypto/x509"
	"fmt"
	"io"
	"net"
	"net/http"
	"net/http/httptest"
	"slices"
	"strconv"
	"sync"
	"testing"
	"time"

	"ironcurtain.dev/gateway/internal/netguard/netguardtest"
)

// Benchmarks on loopback. Each compares the proxy with a direct connection
// in the same run:
//
//	go test -run '^$' -bench 'Tunnel|Connect' -benchtime 20x ./internal/doors/egress/
//
// Throughput is reported as MB/s (b.SetBytes); connect latency as the
// median per connection (ms/median).

// benchChunk is what one stream moves per benchmark iteration.
const benchChunk = 4 << 20

// sinkUpstream reads and acknowledges every benchChunk with one byte, for
// plain TCP or (with a config) TLS streams.
func sinkUpstream(b *testing.B, cfg *tls.Config) int {
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
			if cfg != nil {
				c = tls.Server(c, cfg)
			}
			go func() {
				defer c.Close()
				buf := make([]byte, 64<<10)
				got := 0
				for {
					n, err := c.Read(buf)
					got += n
					for got >= benchChunk {
						got -= benchChunk
						if _, err := c.Write([]byte{1}); err != nil {
							return
						}
					}
					if err != nil {
						return
					}
				}
			}()
		}
	}()
	return ln.Addr().(*net.TCPAddr).Port
}

// benchTLS returns a server config and a client pool for example.com
// (httptest's certificate).
func benchTLS(b *testing.B) (*tls.Config, *x509.CertPool) {
	srv := httptest.NewUnstartedServer(http.NotFoundHandler())
	srv.StartTLS()
	cert := srv.TLS.Certificates[0]
	pool := x509.NewCertPool()
	pool.AddCert(srv.Certificate())
	srv.Close()
	return &tls.Config{Certificates: []tls.Certificate{cert}}, pool
}

type dialFunc func() (net.Conn, error)

func directDial(port int) dialFunc {
	return func() (net.Conn, error) { return net.Dial("tcp", "127.0.0.1:"+strconv.Itoa(port)) }
}

func proxyDial(tp *testProxy, port int) dialFunc {
	target := hostPort("example.com", port)
	req := "CONNECT " + target + " HTTP/1.1\r\nHost: " + target + "\r\nProxy-Authorization: " + basicAuth(tokenS1) + "\r\n\r\n"
	return func() (net.Conn, error) {
		c, err := net.Dial("tcp", tp.addr)
		if err != nil {
			return nil, err
		}
		if _, err := io.WriteString(c, req); err != nil {
			c.Close()
			return nil, err
		}
		// Read exactly the response head so no tunnel byte is consumed.
		head := make([]byte, 0, 64)
		one := make([]byte, 1)
		for len(head) < 4 || string(head[len(head)-4:]) != "\r\n\r\n" {
			if _, err := c.Read(one); err != nil {
				c.Close()
				return nil, err
			}
			head = append(head, one[0])
		}
		if len(head) < 12 || string(head[9:12]) != "200" {
			c.Close()
			return nil, fmt.Errorf("CONNECT: %q", head)
		}
		return c, nil
	}
}

func withTLS(d dialFunc, roots *x509.CertPool) dialFunc {
	return func() (net.Conn, error) {
		c, err := d()
		if err != nil {
			return nil, err
		}
		tc := tls.Client(c, &tls.Config{ServerName: "example.com", RootCAs: roots})
		if err := tc.Handshake(); err != nil {
			c.Close()
			return nil, err
		}
		return tc, nil
	}
}

func benchProxy(b *testing.B, port int, skipSNI bool) *testProxy {
	return startProxy(b, port, withConfig(func(c *ProxyConfig) {
		c.UnsafeSkipSNICheck = skipSNI
		c.MaxTunnelsPerSession = 256
		c.IdleTimeout = time.Minute
		c.Resolver = netguardtest.NewResolver().Set("example.com", "127.0.0.1")
	}))
}

// BenchmarkTunnelThroughput: bytes from client to server through 1 and 32
// concurrent streams, raw TCP and TLS. Each iteration moves benchChunk per
// stream directly AND through the proxy, alternating which goes first, so
// that both see the same machine load (CPU here is shared); the reported
// metrics are the two rates and their ratio.
func BenchmarkTunnelThroughput(b *testing.B) {
	for _, useTLS := range []bool{false, true} {
		var srvCfg *tls.Config
		var roots *x509.CertPool
		proto := "tcp"
		if useTLS {
			srvCfg, roots = benchTLS(b)
			proto = "tls"
		}
		port := sinkUpstream(b, srvCfg)
		tp := benchProxy(b, port, !useTLS)
		for _, streams := range []int{1, 32} {
			direct, proxied := directDial(port), proxyDial(tp, port)
			if useTLS {
				direct, proxied = withTLS(direct, roots), withTLS(proxied, roots)
			}
			b.Run(fmt.Sprintf("%s/streams=%d", proto, streams), func(b *testing.B) {
				dc, pc := openStreams(b, direct, streams), openStreams(b, proxied, streams)
				payload := make([]byte, benchChunk)
				var dt, pt time.Duration
				b.ReportAllocs()
				b.ResetTimer()
				for i := 0; i < b.N; i++ {
					if i%2 == 0 {
						dt += moveChunk(b, dc, payload)
						pt += moveChunk(b, pc, payload)
					} else {
						pt += moveChunk(b, pc, payload)
						dt += moveChunk(b, dc, payload)
					}
				}
				total := float64(benchChunk*streams*b.N) / 1e6
				b.ReportMetric(total/dt.Seconds(), "direct-MB/s")
				b.ReportMetric(total/pt.Seconds(), "proxy-MB/s")
				b.ReportMetric(100*dt.Seconds()/pt.Seconds(), "proxy/direct-%")
			})
		}
	}
}

func openStreams(b *testing.B, d dialFunc, streams int) []net.Conn {
	conns := make([]net.Conn, streams)
	for i := range conns {
		c, err := d()
		if err != nil {
			b.Fatal(err)
		}
		conns[i] = c
	}
	b.Cleanup(func() {
		for _, c := range conns {
			c.Close()
		}
	})
	return conns
}

// moveChunk sends payload on every stream concurrently and waits for every
// acknowledgement.
func moveChunk(b *testing.B, conns []net.Conn, payload []byte) time.Duration {
	start := time.Now()
	var wg sync.WaitGroup
	errs := make(chan error, len(conns))
	for _, c := range conns {
		wg.Add(1)
		go func() {
			defer wg.Done()
			if _, err := c.Write(payload); err != nil {
				errs <- err
				return
			}
			if _, err := io.ReadFull(c, make([]byte, 1)); err != nil {
				errs <- err
			}
		}()
	}
	wg.Wait()
	d := time.Since(start)
	close(errs)
	for err := range errs {
		b.Fatal(err)
	}
	return d
}

// BenchmarkConnectLatency: time to an open connection, direct and through
// the proxy (CONNECT answered 200), and to a finished TLS handshake (the
// proxied one includes the SNI check), alternating direct and proxied
// connections. Reports both medians and the difference.
func BenchmarkConnectLatency(b *testing.B) {
	srvCfg, roots := benchTLS(b)
	tcpPort := sinkUpstream(b, nil)
	tlsPort := sinkUpstream(b, srvCfg)
	tpTCP := benchProxy(b, tcpPort, true)
	tpTLS := benchProxy(b, tlsPort, false)
	cases := []struct {
		name            string
		direct, proxied dialFunc
	}{
		{name: "tcp", direct: directDial(tcpPort), proxied: proxyDial(tpTCP, tcpPort)},
		{name: "tls", direct: withTLS(directDial(tlsPort), roots), proxied: withTLS(proxyDial(tpTLS, tlsPort), roots)},
	}
	for _, c := range cases {
		b.Run(c.name, func(b *testing.B) {
			b.ReportAllocs()
			dl := make([]time.Duration, 0, b.N)
			pl := make([]time.Duration, 0, b.N)
			for i := 0; i < b.N; i++ {
				dl = append(dl, timeDial(b, c.direct))
				pl = append(pl, timeDial(b, c.proxied))
			}
			dm, pm := median(dl), median(pl)
			b.ReportMetric(ms(dm), "direct-ms/median")
			b.ReportMetric(ms(pm), "proxy-ms/median")
			b.ReportMetric(ms(pm-dm), "added-ms/median")
		})
	}
}

func timeDial(b *testing.B, d dialFunc) time.Duration {
	start := time.Now()
	c, err := d()
	el := time.Since(start)
	if err != nil {
		b.Fatal(err)
	}
	c.Close()
	return el
}

func median(ds []time.Duration) time.Duration {
	slices.Sort(ds)
	return ds[len(ds)/2]
}

func ms(d time.Duration) float64 { return float64(d.Microseconds()) / 1000 }

// BenchmarkReadClientHello is the cost of the SNI check per tunnel.
func BenchmarkReadClientHello(b *testing.B) {
	hello := recordClientHello(b, "example.com")
	b.ReportAllocs()
	for b.Loop() {
		_, sni, err := readClientHello(&bytesConn{r: bytes.NewReader(hello)})
		if err != nil || sni != "example.com" {
			b.Fatal(sni, err)
		}
	}
}

// recordClientHello returns the first flight a Go TLS client sends.
func recordClientHello(b *testing.B, serverName string) []byte {
	c := &bytesConn{r: bytes.NewReader(nil)}
	_ = tls.Client(c, &tls.Config{ServerName: serverName}).Handshake()
	if c.w.Len() == 0 {
		b.Fatal("no ClientHello recorded")
	}
	return c.w.Bytes()
}

// bytesConn is a net.Conn over an in-memory reader and writer.
type bytesConn struct {
	net.Conn
	r *bytes.Reader
	w bytes.Buffer
}

func (c *bytesConn) Read(p []byte) (int, error)       { return c.r.Read(p) }
func (c *bytesConn) Write(p []byte) (int, error)      { return c.w.Write(p) }
func (c *bytesConn) Close() error                     { return nil }
func (c *bytesConn) SetDeadline(time.Time) error      { return nil }
func (c *bytesConn) SetReadDeadline(time.Time) error  { return nil }
func (c *bytesConn) SetWriteDeadline(time.Time) error { return nil }
