package main

import (
	"bufio"
	"encoding/binary"
	"errors"
	"fmt"
	"io"
	"net"
	"slices"
	"strconv"
	"sync"
	"sync/atomic"
	"time"
)

// The upstream protocol: the client sends an 8-byte big-endian length and
// that many bytes; the upstream answers one byte once it has them all, then
// waits for the next length (a throughput run's next slice) until the
// client goes.

// answerTimeout bounds the wait for a proxy's answer to a CONNECT.
var answerTimeout = 30 * time.Second // a variable: tests shorten it

// writeBuf is the size of the client's writes.
const writeBuf = 256 << 10

// upstream is the TCP server every path ends at.
type upstream struct {
	ln      net.Listener
	port    int
	readBuf int // the size of its reads
	wg      sync.WaitGroup
	mu      sync.Mutex
	open    map[net.Conn]struct{}
}

// startUpstream listens on loopback; the upstream reads in pieces of
// readBuf bytes (> 0: run checks its options first).
func startUpstream(readBuf int) (*upstream, error) {
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		return nil, err
	}
	u := &upstream{ln: ln, port: ln.Addr().(*net.TCPAddr).Port, readBuf: readBuf, open: map[net.Conn]struct{}{}}
	u.wg.Add(1)
	go u.accept()
	return u, nil
}

func (u *upstream) accept() {
	defer u.wg.Done()
	for {
		c, err := u.ln.Accept()
		if err != nil {
			return
		}
		u.mu.Lock()
		u.open[c] = struct{}{}
		u.mu.Unlock()
		go u.serve(c)
	}
}

func (u *upstream) serve(c net.Conn) {
	defer func() {
		u.mu.Lock()
		delete(u.open, c)
		u.mu.Unlock()
		abort(c)
	}()
	// Read into a buffer of readBuf bytes, as a receiver does (not
	// io.Discard, whose ReadFrom reads 8 KiB at a time).
	var buf []byte
	for {
		var hdr [8]byte
		if _, err := io.ReadFull(c, hdr[:]); err != nil {
			return // the client went (its reset or EOF through the proxy)
		}
		n := int64(binary.BigEndian.Uint64(hdr[:]))
		if buf == nil {
			buf = make([]byte, u.readBuf)
		}
		for left := n; left > 0; {
			k, err := c.Read(buf[:min(left, int64(len(buf)))])
			if err != nil {
				return
			}
			left -= int64(k)
		}
		if _, err := c.Write([]byte{1}); err != nil {
			return
		}
	}
}

func (u *upstream) close() {
	_ = u.ln.Close()
	u.mu.Lock()
	for c := range u.open {
		abort(c)
	}
	u.mu.Unlock()
	u.wg.Wait()
}

// abort closes c with a reset, so that neither end keeps the port in
// TIME_WAIT (tens of thousands of connections per run).
func abort(c net.Conn) {
	if tc, ok := c.(*net.TCPConn); ok {
		_ = tc.SetLinger(0)
	}
	_ = c.Close()
}

// target is one way to reach the upstream: directly (proxy empty) or
// through an HTTP CONNECT proxy.
type target struct {
	name  string
	proxy string // host:port; empty: direct
	pid   int    // the proxy's process (RSS); 0 for direct
}

// dial opens a connection to the upstream through t: for a proxy, CONNECT
// 127.0.0.1:port with the agent's Proxy-Authorization (ignored by
// smokescreen and Squid) and a 200 answer.
func (t target) dial(upPort int) (net.Conn, error) {
	up := "127.0.0.1:" + strconv.Itoa(upPort)
	if t.proxy == "" {
		return net.Dial("tcp", up)
	}
	c, err := net.Dial("tcp", t.proxy)
	if err != nil {
		return nil, err
	}
	// A proxy that stops answering (out of descriptors, say) fails the run
	// instead of hanging it.
	_ = c.SetDeadline(time.Now().Add(answerTimeout))
	req := "CONNECT " + up + " HTTP/1.1\r\nHost: " + up + "\r\nProxy-Authorization: Basic " + basicToken + "\r\n\r\n"
	if _, err := io.WriteString(c, req); err != nil {
		abort(c)
		return nil, err
	}
	// The upstream says nothing before it gets data, so whatever the reader
	// buffers is the response head only.
	br := bufio.NewReaderSize(c, 512)
	status, err := br.ReadString('\n')
	if err != nil {
		abort(c)
		return nil, fmt.Errorf("%s: CONNECT: %w", t.name, err)
	}
	if len(status) < 12 || status[9:12] != "200" {
		abort(c)
		return nil, fmt.Errorf("%s: CONNECT answered %q", t.name, status)
	}
	for {
		line, err := br.ReadString('\n')
		if err != nil {
			abort(c)
			return nil, fmt.Errorf("%s: CONNECT: %w", t.name, err)
		}
		if line == "\r\n" || line == "\n" {
			break
		}
	}
	if br.Buffered() > 0 {
		abort(c)
		return nil, fmt.Errorf("%s: bytes after the CONNECT answer", t.name)
	}
	_ = c.SetDeadline(time.Time{})
	return c, nil
}

// send writes the length header and n bytes from buf (repeated) and waits
// for the upstream's byte.
func send(c net.Conn, buf []byte, n int64) error {
	var hdr [8]byte
	binary.BigEndian.PutUint64(hdr[:], uint64(n))
	if _, err := c.Write(hdr[:]); err != nil {
		return err
	}
	for left := n; left > 0; {
		k := min(left, int64(len(buf)))
		if _, err := c.Write(buf[:k]); err != nil {
			return err
		}
		left -= k
	}
	var ack [1]byte
	_, err := io.ReadFull(c, ack[:])
	return err
}

// openTunnels opens n connections to the upstream through t.
func openTunnels(t target, upPort, n int) ([]net.Conn, error) {
	conns := make([]net.Conn, 0, n)
	for range n {
		c, err := t.dial(upPort)
		if err != nil {
			closeAll(conns)
			return nil, err
		}
		conns = append(conns, c)
	}
	return conns, nil
}

func closeAll(conns []net.Conn) {
	for _, c := range conns {
		abort(c)
	}
}

// throughput moves perStream bytes on each of conns at once (opened before
// the clock starts) and returns the time it took.
func throughput(t target, conns []net.Conn, perStream int64) (time.Duration, error) {
	var wg sync.WaitGroup
	errs := make(chan error, len(conns))
	start := time.Now()
	for _, c := range conns {
		wg.Add(1)
		go func() {
			defer wg.Done()
			buf := make([]byte, writeBuf)
			if err := send(c, buf, perStream); err != nil {
				errs <- err
			}
		}()
	}
	wg.Wait()
	el := time.Since(start)
	close(errs)
	if err := <-errs; err != nil {
		return 0, fmt.Errorf("%s: %w", t.name, err)
	}
	return el, nil
}

// connectRun accumulates the slices of one path's CONNECT + first byte
// run: every loop's latency and the time spent.
type connectRun struct {
	lat     []time.Duration
	elapsed time.Duration
}

// rate is completed loops per second.
func (r *connectRun) rate() float64 {
	if r.elapsed <= 0 {
		return 0
	}
	return float64(len(r.lat)) / r.elapsed.Seconds()
}

// quantile is the q quantile (0 < q < 1) of the loops' latencies.
func (r *connectRun) quantile(q float64) time.Duration {
	if len(r.lat) == 0 {
		return 0
	}
	all := slices.Clone(r.lat)
	slices.Sort(all)
	return all[min(len(all)-1, int(float64(len(all))*q))]
}

// connectFirstByte runs workers loops of: connect (CONNECT answered), send
// one byte, receive the upstream's byte, reset; for d. Latency is per loop;
// the loops and the time are added to r.
func connectFirstByte(t target, upPort, workers int, d time.Duration, r *connectRun) error {
	var stop atomic.Bool
	var wg sync.WaitGroup
	lat := make([][]time.Duration, workers)
	errs := make(chan error, workers)
	one := []byte{0}
	start := time.Now()
	for w := range workers {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for !stop.Load() {
				t0 := time.Now()
				c, err := t.dial(upPort)
				if err != nil {
					errs <- err
					return
				}
				err = send(c, one, 1)
				abort(c)
				if err != nil {
					errs <- fmt.Errorf("%s: first byte: %w", t.name, err)
					return
				}
				lat[w] = append(lat[w], time.Since(t0))
			}
		}()
	}
	time.Sleep(d)
	stop.Store(true)
	wg.Wait()
	el := time.Since(start)
	close(errs)
	if err := <-errs; err != nil {
		return err
	}
	all := slices.Concat(lat...)
	if len(all) == 0 {
		return errors.New(t.name + ": no connection completed")
	}
	r.lat = append(r.lat, all...)
	r.elapsed += el
	return nil
}

// idleRSS opens n tunnels through t, leaves them idle, and returns the
// proxy's resident memory before and with them (KiB). The tunnels are
// closed on return.
func idleRSS(t target, upPort, n int) (before, with int64, err error) {
	if before, err = rssKiB(t.pid); err != nil {
		return 0, 0, err
	}
	conns := make([]net.Conn, 0, n)
	defer func() {
		for _, c := range conns {
			abort(c)
		}
	}()
	for range n {
		c, err := t.dial(upPort)
		if err != nil {
			return 0, 0, fmt.Errorf("tunnel %d: %w", len(conns)+1, err)
		}
		conns = append(conns, c)
	}
	time.Sleep(time.Second) // let the proxy settle (goroutines parked, buffers allocated)
	with, err = rssKiB(t.pid)
	return before, with, err
}
