//go:build !linux

package egress

import (
	"context"
	"net"
)

// watchPeer does not watch elsewhere than Linux (the gateway's images): a
// CONNECT whose client hangs up during an escalation waits for the decision.
func watchPeer(ctx context.Context, _ net.Conn) (context.Context, func()) { return ctx, func() {} }
