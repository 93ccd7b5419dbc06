//go:build linux

package egress

import (
	"errors"
	"net"
	"sync/atomic"
	"time"

	"golang.org/x/sys/unix"
)

// The relay's splice loop. io.Copy between two TCP sockets also splices,
// but it holds its pipe (two descriptors) for the whole copy, so every open
// tunnel costs six descriptors even when idle: with a limit of 20,000 open
// files a proxy could hold 3,333 tunnels. Here a direction takes a pipe
// from a small pool when its source has data and gives it back, empty, as
// soon as the source has none: an idle tunnel holds its two sockets only.

// maxSplice is the most one splice call moves (and the pipe size asked for).
const maxSplice = 1 << 20

// idlePipes is the pool of empty pipes; beyond its capacity a pipe given
// back is closed. Its capacity bounds the pipe memory the kernel accounts
// to the gateway's user while nothing flows (64 x 1 MiB: the default
// fs.pipe-user-pages-soft, past which an unprivileged user's new pipes get
// a minimal buffer and splice crawls).
var idlePipes = make(chan *kpipe, 64)

type kpipe struct{ r, w int }

func getPipe() (*kpipe, error) {
	select {
	case p := <-idlePipes:
		return p, nil
	default:
	}
	var fds [2]int
	if err := unix.Pipe2(fds[:], unix.O_CLOEXEC|unix.O_NONBLOCK); err != nil {
		return nil, err
	}
	_, _ = unix.FcntlInt(uintptr(fds[0]), unix.F_SETPIPE_SZ, maxSplice) // best effort, as the runtime does
	return &kpipe{r: fds[0], w: fds[1]}, nil
}

// putPipe gives back an empty pipe.
func putPipe(p *kpipe) {
	select {
	case idlePipes <- p:
	default:
		p.close()
	}
}

func (p *kpipe) close() {
	_ = unix.Close(p.r)
	_ = unix.Close(p.w)
}

// errSpliceStalled: splice moved nothing from a pipe holding data.
var errSpliceStalled = errors.New("splice: no progress")

// kernelRelay copies src to dst with splice(2) through a pipe held only
// while bytes are in flight, counting the bytes into n and noting activity
// in last. At EOF it half-closes dst. It falls back to splicePipe when
// either side is not a TCP socket.
func kernelRelay(dst, src net.Conn, n, last *atomic.Int64) error {
	sc, ok1 := src.(*net.TCPConn)
	dc, ok2 := dst.(*net.TCPConn)
	if !ok1 || !ok2 {
		return splicePipe(dst, src, n, last)
	}
	srs, err := sc.SyscallConn()
	if err != nil {
		return err
	}
	drs, err := dc.SyscallConn()
	if err != nil {
		return err
	}
	var p *kpipe
	inPipe := 0
	defer func() {
		if p == nil {
			return
		}
		if inPipe == 0 {
			putPipe(p)
		} else {
			p.close() // bytes nobody will read
		}
	}()
	for {
		// Move what src has into the pipe; when it has nothing, give the
		// pipe back and wait for data (RawConn.Read waits when f says false).
		var serr error
		rerr := srs.Read(func(fd uintptr) bool {
			if p == nil {
				if p, serr = getPipe(); serr != nil {
					return true
				}
			}
			var k int64
			for {
				k, serr = unix.Splice(int(fd), nil, p.w, nil, maxSplice, unix.SPLICE_F_MOVE|unix.SPLICE_F_NONBLOCK)
				if serr != unix.EINTR {
					break
				}
			}
			inPipe = int(k)
			if serr == unix.EAGAIN {
				inPipe, serr = 0, nil
				putPipe(p)
				p = nil
				return false
			}
			if inPipe < 0 {
				inPipe = 0
			}
			return true
		})
		if rerr != nil {
			return rerr
		}
		if serr != nil {
			return serr
		}
		if inPipe == 0 { // EOF
			closeWrite(dst)
			return nil
		}
		last.Store(time.Now().UnixNano())
		for inPipe > 0 {
			var w int64
			var werr error
			err := drs.Write(func(fd uintptr) bool {
				for {
					w, werr = unix.Splice(p.r, nil, int(fd), nil, inPipe, unix.SPLICE_F_MOVE|unix.SPLICE_F_NONBLOCK)
					if werr != unix.EINTR {
						break
					}
				}
				return werr != unix.EAGAIN
			})
			if err != nil {
				return err
			}
			if werr != nil {
				return werr
			}
			if w <= 0 {
				return errSpliceStalled
			}
			inPipe -= int(w)
			n.Add(w)
			last.Store(time.Now().UnixNano())
		}
	}
}
