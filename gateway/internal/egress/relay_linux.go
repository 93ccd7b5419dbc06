//go:build linux

package egress

import (
	"io"
	"net"
	"sync"
	"sync/atomic"
	"time"

	"golang.org/x/sys/unix"
)

// The relay's copy loop between two TCP sockets. A direction waits for its
// source to be readable holding nothing, takes a buffer when there are bytes
// to move, and gives it back as soon as the source has none: an idle tunnel
// holds its two sockets only (no buffer, no pipe), however many are open.
//
// Why not splice(2) (io.Copy's path between TCP sockets, and this relay's
// before): measured side by side (make bench-egress, docs/egress.md), it
// spends a third of the proxy's CPU per byte but makes the same-host peers
// slower. The pages a sender wrote are handed on instead of being copied and
// freed, so the sender cannot reuse its page fragments while they are in
// flight and both peers copy cold memory: with the agent and the gateway on
// one host (Compose, a Cloud Run instance, a Kubernetes node) the system
// moved 10-25 % fewer bytes per second than with two copies in the proxy.
// A copy also needs no pipe descriptors: io.Copy's splice held two per
// direction for the tunnel's whole life.

const (
	// bigRelayBuf is the buffer a direction moves with while its source
	// keeps it full (a bulk transfer): fewer, larger reads and writes than
	// relayBuf's. Measured side by side (make bench-egress): 512 KiB moves
	// more bytes per second and costs the proxy less CPU per byte than 256
	// KiB (each read is a system call, a wake-up and a window update).
	bigRelayBuf = 512 << 10
	// maxBigRelayBufs bounds the big buffers in use at once (16 MiB); a
	// direction that finds none free goes on with a relayBuf one.
	maxBigRelayBufs = 32
)

var (
	bigRelayBufs  = sync.Pool{New: func() any { b := make([]byte, bigRelayBuf); return &b }}
	bigRelaySlots = make(chan struct{}, maxBigRelayBufs)
	// relayBufsHeld counts the buffers directions hold now (tests: idle
	// tunnels hold none).
	relayBufsHeld atomic.Int64
)

// relayBuffer is a direction's buffer while bytes are in flight.
type relayBuffer struct {
	p   *[]byte
	big bool
}

// take gets a buffer: a big one when asked for and one is free, else a
// relayBuf one.
func (b *relayBuffer) take(big bool) {
	relayBufsHeld.Add(1)
	if big {
		select {
		case bigRelaySlots <- struct{}{}:
			b.p, b.big = bigRelayBufs.Get().(*[]byte), true
			return
		default:
		}
	}
	b.p, b.big = relayBufs.Get().(*[]byte), false
}

// release gives the buffer back (no-op when none is held).
func (b *relayBuffer) release() {
	switch {
	case b.p == nil:
		return
	case b.big:
		bigRelayBufs.Put(b.p)
		<-bigRelaySlots
	default:
		relayBufs.Put(b.p)
	}
	b.p = nil
	relayBufsHeld.Add(-1)
}

// socketRelay copies src to dst through a buffer held only while bytes are
// in flight, counting the bytes into n and noting activity in last. At EOF
// it half-closes dst. It falls back to pipe when either side is not a TCP
// socket.
func socketRelay(dst, src net.Conn, n, last *atomic.Int64) error {
	sc, ok1 := src.(*net.TCPConn)
	dc, ok2 := dst.(*net.TCPConn)
	if !ok1 || !ok2 {
		return pipe(dst, src, n, last)
	}
	srs, err := sc.SyscallConn()
	if err != nil {
		return err
	}
	drs, err := dc.SyscallConn()
	if err != nil {
		return err
	}
	var buf relayBuffer
	defer buf.release()
	wantBig := false
	for {
		// Read what src has; when it has nothing, give the buffer back and
		// wait (RawConn.Read waits for readability when f returns false).
		var k int
		var rerr error
		if err := srs.Read(func(fd uintptr) bool {
			if buf.p == nil {
				buf.take(wantBig)
			}
			for {
				k, rerr = unix.Read(int(fd), *buf.p)
				if rerr != unix.EINTR {
					break
				}
			}
			if rerr == unix.EAGAIN {
				rerr = nil
				buf.release()
				wantBig = false
				return false
			}
			return true
		}); err != nil {
			return err
		}
		if rerr != nil {
			return rerr
		}
		if k <= 0 { // EOF
			closeWrite(dst)
			return nil
		}
		last.Store(time.Now().UnixNano())
		if err := writeAll(drs, (*buf.p)[:k], n, last); err != nil {
			return err
		}
		// A read that filled a small buffer: the source has more waiting,
		// move it in larger pieces.
		if !buf.big && k == len(*buf.p) {
			buf.release()
			wantBig = true
		}
	}
}

// writeAll writes b to the socket, waiting while its send buffer is full.
func writeAll(rc interface {
	Write(func(fd uintptr) bool) error
}, b []byte, n, last *atomic.Int64) error {
	for len(b) > 0 {
		var w int
		var werr error
		if err := rc.Write(func(fd uintptr) bool {
			for {
				w, werr = unix.Write(int(fd), b)
				if werr != unix.EINTR {
					break
				}
			}
			return werr != unix.EAGAIN
		}); err != nil {
			return err
		}
		if werr != nil {
			return werr
		}
		if w <= 0 {
			return io.ErrShortWrite
		}
		b = b[w:]
		n.Add(int64(w))
		last.Store(time.Now().UnixNano())
	}
	return nil
}
