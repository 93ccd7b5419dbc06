//go:build linux

package egress

import (
	"net"
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
