//go:build linux

package egress

import (
	"net"
	"sync/atomic"
	"time"

	"golang.org/x/sys/unix"
)

// kernelSinceData returns how long ago the kernel last sent or received
// data on c (TCP_INFO), so that a tunnel relayed with splice (no user-space
// reads to observe) can still be closed when idle.
func kernelSinceData(c net.Conn) (time.Duration, bool) {
	tc, ok := c.(*net.TCPConn)
	if !ok {
		return 0, false
	}
	rc, err := tc.SyscallConn()
	if err != nil {
		return 0, false
	}
	var info *unix.TCPInfo
	var gerr error
	if err := rc.Control(func(fd uintptr) {
		info, gerr = unix.GetsockoptTCPInfo(int(fd), unix.IPPROTO_TCP, unix.TCP_INFO)
	}); err != nil || gerr != nil {
		return 0, false
	}
	ms := min(info.Last_data_sent, info.Last_data_recv)
	return time.Duration(ms) * time.Millisecond, true
}

// tcpInfoWorks is set once TCP_INFO has answered on this kernel.
var tcpInfoWorks atomic.Bool

// kernelIdleSupported reports whether kernelSinceData works on c: c is a
// TCP socket and TCP_INFO answers on this kernel. The probe's getsockopt is
// made until it first succeeds, not once per tunnel (it was two system
// calls on every tunnel's connect path).
func kernelIdleSupported(c net.Conn) bool {
	if _, ok := c.(*net.TCPConn); !ok {
		return false
	}
	if tcpInfoWorks.Load() {
		return true
	}
	_, ok := kernelSinceData(c)
	if ok {
		tcpInfoWorks.Store(true)
	}
	return ok
}
