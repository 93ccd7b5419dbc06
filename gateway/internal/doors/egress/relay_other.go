//go:build !linux

package egress

import (
	"net"
	"sync/atomic"
)

// socketRelay is relay_linux.go's; elsewhere TCP tunnels are copied by pipe.
func socketRelay(dst, src net.Conn, n, last *atomic.Int64) error {
	return pipe(dst, src, n, last)
}
