// Package netwrap finds connections under wrappers. A wrapper exposes the
// connection it wraps through a NetConn method, as crypto/tls.Conn does and
// as the gateway's own wrappers do (netlimit's counted connection, the
// egress proxy's head recorder and buffered connections): the limiter
// finds its connection under what http.Server hands a handler, the proxy
// finds the head it recorded, and the relay finds the socket to splice.
package netwrap

import "net"

// maxDepth bounds the walk: no chain in the gateway is half as deep, and a
// wrapper that (wrongly) returned itself cannot loop forever.
const maxDepth = 8

// Find returns the first connection of type T on the chain from c inwards
// (c itself first), and whether there was one within maxDepth.
func Find[T net.Conn](c net.Conn) (T, bool) {
	for range maxDepth {
		if c == nil {
			break
		}
		if t, ok := c.(T); ok {
			return t, true
		}
		u, ok := c.(interface{ NetConn() net.Conn })
		if !ok {
			break
		}
		c = u.NetConn()
	}
	var zero T
	return zero, false
}

// Raw returns the innermost connection under c: the first one on the chain
// that wraps nothing, or the one maxDepth wrappers in.
func Raw(c net.Conn) net.Conn {
	for range maxDepth {
		u, ok := c.(interface{ NetConn() net.Conn })
		if !ok {
			return c
		}
		inner := u.NetConn()
		if inner == nil {
			return c
		}
		c = inner
	}
	return c
}
