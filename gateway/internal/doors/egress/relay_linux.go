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

// The relay's loop between two TCP sockets. A direction waits for its
// source to be readable holding nothing, takes a carrier when there are
// bytes to move, and gives it back as soon as the source has none: an idle
// tunnel holds its two sockets only (no pipe, no buffer), however many are
// open.
//
// The carrier is a pipe while one of maxRelayPipes is free: splice(2) moves
// the bytes from the source socket into the pipe and from the pipe into the
// destination without copying them through the proxy (io.Copy's path
// between TCP sockets). Otherwise it is a relayBuf buffer, read into and
// written from. Pipes are kept open in a pool between uses, so a burst
// costs two splices and no pipe(2); at most maxRelayPipes exist at once
// (2 descriptors each), whatever the number of tunnels. io.Copy's splice,
// which this relay used at first, held a pipe per direction for the
// tunnel's whole life: a proxy with 20,000 descriptors ran out at 3,334
// tunnels.
//
// Why splice rather than copy, measured side by side (make bench-egress,
// docs/egress.md): the proxy spends half or less of the CPU per byte on
// every test VM. Which moves more bytes through the whole machine on
// loopback, where the client and upstream share the cores, has changed with
// the VM: on one, 32 streams moved 1.2-1.3x more splicing; on two others,
// copying moved more (docs/egress.md, "Splice or copy" and "the floor").

const (
	// relayPipeSize is a relay pipe's capacity (F_SETPIPE_SZ; the
	// kernel's 64 KiB default if refused): the most one splice moves.
	relayPipeSize = 1 << 20
	// maxRelayPipes bounds the pipes open at once, in use or pooled; a
	// direction that finds none free copies through a relayBuf buffer.
	maxRelayPipes = 32
)

// relayPipes is the pool of relay pipes. A pipe is opened only by a
// direction that took a slot (inUse < maxRelayPipes) and pooled only when
// it gives the slot back, so at most maxRelayPipes are open. A mutex rather
// than channels: a direction takes and gives back a carrier on every burst,
// on the goroutine that waits with it, and channel operations' deeper calls
// grew 5,000 idle tunnels' stacks by 10 MiB (make bench-egress).
var relayPipes struct {
	mu    sync.Mutex
	free  []*relayPipe // open, empty, not in use
	inUse int
	open  int
}

// relayHeld counts the carriers directions hold now (tests: idle tunnels
// hold none).
var relayHeld atomic.Int64

// takePipe returns a pipe, or nil when maxRelayPipes are in use or none can
// be opened.
func takePipe() *relayPipe {
	relayPipes.mu.Lock()
	if relayPipes.inUse == maxRelayPipes {
		relayPipes.mu.Unlock()
		return nil
	}
	relayPipes.inUse++
	if n := len(relayPipes.free); n > 0 {
		p := relayPipes.free[n-1]
		relayPipes.free = relayPipes.free[:n-1]
		relayPipes.mu.Unlock()
		return p
	}
	relayPipes.open++
	relayPipes.mu.Unlock()
	p, err := openRelayPipe()
	if err != nil { // out of descriptors, say: the direction copies this time
		relayPipes.mu.Lock()
		relayPipes.inUse--
		relayPipes.open--
		relayPipes.mu.Unlock()
		return nil
	}
	return p
}

// putPipe gives p back: pooled when empty, else closed.
func putPipe(p *relayPipe, empty bool) {
	if !empty {
		p.close()
	}
	relayPipes.mu.Lock()
	relayPipes.inUse--
	if empty {
		relayPipes.free = append(relayPipes.free, p)
	} else {
		relayPipes.open--
	}
	relayPipes.mu.Unlock()
}

// relayPipeStats reports the pipes in use, pooled and open (tests).
func relayPipeStats() (inUse, pooled, open int) {
	relayPipes.mu.Lock()
	defer relayPipes.mu.Unlock()
	return relayPipes.inUse, len(relayPipes.free), relayPipes.open
}

// relayPipe is a pipe's two ends, non-blocking.
type relayPipe struct{ r, w int }

func openRelayPipe() (*relayPipe, error) {
	var fds [2]int
	if err := unix.Pipe2(fds[:], unix.O_CLOEXEC|unix.O_NONBLOCK); err != nil {
		return nil, err
	}
	_, _ = unix.FcntlInt(uintptr(fds[0]), unix.F_SETPIPE_SZ, relayPipeSize) // a smaller pipe works too
	return &relayPipe{r: fds[0], w: fds[1]}, nil
}

func (p *relayPipe) close() {
	_ = unix.Close(p.r)
	_ = unix.Close(p.w)
}

// relayCarrier is what a direction holds while bytes are in flight: a pipe
// (with inPipe bytes in it) or a buffer.
type relayCarrier struct {
	pipe   *relayPipe
	inPipe int
	buf    *[]byte

	// drain's state between it and its write callback (writeReady), kept
	// here so that a burst allocates nothing: off and m say what to write,
	// w and werr what the last write did.
	off, m, w int
	werr      error
	writeFn   func(fd uintptr) bool // c.writeReady, bound once per direction
}

// take gets a pipe when one is free (and splice is not ruled out), else a
// buffer.
func (c *relayCarrier) take(noSplice bool) {
	relayHeld.Add(1)
	if !noSplice {
		if c.pipe = takePipe(); c.pipe != nil {
			return
		}
	}
	c.buf = relayBufs.Get().(*[]byte)
}

// held reports whether c holds a carrier.
func (c *relayCarrier) held() bool { return c.pipe != nil || c.buf != nil }

// release gives the carrier back (no-op when none is held). A pipe with
// bytes still in it (the tunnel failed mid-way) is closed, never pooled.
func (c *relayCarrier) release() {
	switch {
	case c.pipe != nil:
		putPipe(c.pipe, c.inPipe == 0)
		c.pipe, c.inPipe = nil, 0
	case c.buf != nil:
		relayBufs.Put(c.buf)
		c.buf = nil
	default:
		return
	}
	relayHeld.Add(-1)
}

// fill moves what the socket fd has (up to the carrier's size) into the
// carrier: the count, 0 at EOF, or an error (EAGAIN: nothing to read).
func (c *relayCarrier) fill(fd int) (int, error) {
	for {
		var k int
		var err error
		if c.pipe != nil {
			var k64 int64
			k64, err = unix.Splice(fd, nil, c.pipe.w, nil, relayPipeSize, unix.SPLICE_F_MOVE|unix.SPLICE_F_NONBLOCK)
			k = int(k64)
			if k > 0 {
				c.inPipe += k
			}
		} else {
			k, err = unix.Read(fd, *c.buf)
		}
		if err != unix.EINTR {
			return k, err
		}
	}
}

// socketRelay moves src to dst (splice through a pooled pipe, or a copy
// through a buffer), counting the bytes into n and noting activity in last.
// At EOF it half-closes dst. It falls back to pipe when either side is not
// a TCP socket.
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
	var c relayCarrier
	defer c.release()
	noSplice := false
	for {
		// Move what src has; when it has nothing, give the carrier back and
		// wait (RawConn.Read waits for readability when f returns false).
		var k int
		var rerr error
		if err := srs.Read(func(fd uintptr) bool {
			if !c.held() {
				c.take(noSplice)
			}
			k, rerr = c.fill(int(fd))
			if rerr == unix.EINVAL && c.pipe != nil {
				// This socket cannot be spliced (nothing was moved): copy.
				noSplice = true
				c.release()
				c.take(noSplice)
				k, rerr = c.fill(int(fd))
			}
			if rerr == unix.EAGAIN {
				rerr = nil
				c.release()
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
		if err := c.drain(drs, k, n, last); err != nil {
			return err
		}
	}
}

// drain writes the k bytes c holds to the socket, waiting while its send
// buffer is full.
func (c *relayCarrier) drain(rc interface {
	Write(func(fd uintptr) bool) error
}, k int, n, last *atomic.Int64) error {
	if c.writeFn == nil {
		c.writeFn = c.writeReady
	}
	for c.off = 0; c.off < k; {
		c.m = k - c.off
		if err := rc.Write(c.writeFn); err != nil {
			return err
		}
		if c.werr != nil {
			return c.werr
		}
		if c.w <= 0 {
			return io.ErrShortWrite
		}
		c.off += c.w
		n.Add(int64(c.w))
		last.Store(time.Now().UnixNano())
	}
	return nil
}

// writeReady is drain's callback: one write of c.m bytes from c.off, done
// (true) unless the socket would block.
func (c *relayCarrier) writeReady(fd uintptr) bool {
	for {
		c.w, c.werr = c.put(int(fd), c.off, c.m)
		if c.werr != unix.EINTR {
			break
		}
	}
	return c.werr != unix.EAGAIN
}

// put writes up to m of c's bytes to the socket fd: from the pipe (its
// bytes come out in order), or from the buffer at off.
func (c *relayCarrier) put(fd, off, m int) (int, error) {
	if c.pipe == nil {
		return unix.Write(fd, (*c.buf)[off:off+m])
	}
	w, err := unix.Splice(c.pipe.r, nil, fd, nil, m, unix.SPLICE_F_MOVE|unix.SPLICE_F_NONBLOCK)
	if w > 0 {
		c.inPipe -= int(w)
	}
	return int(w), err
}
