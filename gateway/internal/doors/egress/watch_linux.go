//go:build linux

package egress

import (
	"context"
	"net"
	"time"

	"golang.org/x/sys/unix"
)

// watchPeer returns a context that ends when the client closes or resets
// c, and a stop function that ends the watch (and the context) and leaves
// c as it was. It reads nothing: it waits for c to become readable and
// peeks. Bytes the client sent early end the watch without ending the
// context, as net/http's background read does after its one byte.
func watchPeer(ctx context.Context, c net.Conn) (context.Context, func()) {
	tc, ok := rawConn(c).(*net.TCPConn)
	if !ok {
		return ctx, func() {}
	}
	rc, err := tc.SyscallConn()
	if err != nil {
		return ctx, func() {}
	}
	ctx, cancel := context.WithCancel(ctx)
	done := make(chan struct{})
	go func() {
		defer close(done)
		gone := false
		err := rc.Read(func(fd uintptr) bool {
			var b [1]byte
			for {
				n, _, err := unix.Recvfrom(int(fd), b[:], unix.MSG_PEEK|unix.MSG_DONTWAIT)
				switch {
				case err == unix.EINTR:
					continue
				case err == unix.EAGAIN:
					return false // nothing yet: wait for readability
				}
				gone = n == 0 || err != nil // EOF, or a reset
				return true
			}
		})
		if err == nil && gone {
			cancel()
		}
	}()
	return ctx, func() {
		_ = tc.SetReadDeadline(time.Unix(1, 0)) // wakes the wait
		<-done
		_ = tc.SetReadDeadline(time.Time{})
		cancel()
	}
}
