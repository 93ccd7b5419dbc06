//go:build !linux

package egress

import (
	"net"
	"time"
)

// kernelSinceData is only available on Linux; elsewhere the relay copies in
// user space and notes the activity itself.
func kernelSinceData(net.Conn) (time.Duration, bool) { return 0, false }

// kernelIdleSupported is false off Linux.
func kernelIdleSupported(net.Conn) bool { return false }
