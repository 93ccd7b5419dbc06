package egress

import (
	"bytes"
	"context"
	"net"
	"strings"
	"sync"
)

// net/http drops the Host header of an absolute-form request before the
// handler runs (RFC 9112 says to ignore it), so a request such as
//
//	GET http://allowed.example/ HTTP/1.1
//	Host: evil.example
//
// would look clean. The proxy refuses such requests outright, so it keeps a
// raw copy of the first request head of every connection and answers plain
// HTTP requests with "Connection: close": every request it checks is the
// first one on its connection.

// headListener wraps accepted connections in headConn and caps the number
// of open connections (a slot is taken before Accept and given back when the
// connection is closed). It does the capping itself, rather than through
// netutil.LimitListener, so that a hijacked tunnel can still unwrap its
// connection to the *net.TCPConn (socketRelay).
type headListener struct {
	net.Listener
	limit int           // head recording limit
	slots chan struct{} // nil: no cap

	closeOnce sync.Once
	done      chan struct{}
}

func newHeadListener(ln net.Listener, headLimit, maxConns int) *headListener {
	l := &headListener{Listener: ln, limit: headLimit, done: make(chan struct{})}
	if maxConns > 0 {
		l.slots = make(chan struct{}, maxConns)
	}
	return l
}

func (l *headListener) Accept() (net.Conn, error) {
	release := func() {}
	if l.slots != nil {
		select {
		case l.slots <- struct{}{}:
		case <-l.done:
			return nil, net.ErrClosed
		}
		release = func() { <-l.slots }
	}
	c, err := l.Listener.Accept()
	if err != nil {
		release()
		return nil, err
	}
	return &headConn{Conn: c, limit: l.limit, release: release}, nil
}

func (l *headListener) Close() error {
	l.closeOnce.Do(func() { close(l.done) })
	return l.Listener.Close()
}

// headConn records the bytes read from the connection until the end of the
// first request head ("\r\n\r\n") or limit bytes.
type headConn struct {
	net.Conn
	limit   int
	release func() // gives the listener slot back, once

	closeOnce sync.Once

	mu       sync.Mutex
	head     []byte
	complete bool
	taken    bool
}

func (c *headConn) Read(b []byte) (int, error) {
	n, err := c.Conn.Read(b)
	if n > 0 {
		c.mu.Lock()
		if !c.complete {
			c.record(b[:n])
		}
		c.mu.Unlock()
	}
	return n, err
}

func (c *headConn) record(b []byte) {
	start := len(c.head) - 3
	if start < 0 {
		start = 0
	}
	room := c.limit - len(c.head)
	if room < len(b) {
		b = b[:room]
	}
	c.head = append(c.head, b...)
	if i := bytes.Index(c.head[start:], []byte("\r\n\r\n")); i >= 0 {
		c.head = c.head[:start+i+4]
		c.complete = true
	} else if len(c.head) >= c.limit {
		c.complete = true // too long: takeHead reports it as incomplete
		c.head = nil
	}
}

// Close closes the connection and gives its listener slot back.
func (c *headConn) Close() error {
	err := c.Conn.Close()
	c.closeOnce.Do(func() {
		if c.release != nil {
			c.release()
		}
	})
	return err
}

// NetConn returns the underlying connection (for splicing tunnels).
func (c *headConn) NetConn() net.Conn { return c.Conn }

// takeHead returns the first request head once; ok is false when it is not
// available (not complete, too long, or already taken by an earlier request).
func (c *headConn) takeHead() (head []byte, ok bool) {
	c.mu.Lock()
	defer c.mu.Unlock()
	if c.taken || !c.complete || c.head == nil {
		c.taken = true
		return nil, false
	}
	c.taken = true
	h := c.head
	c.head = nil
	return h, true
}

type headConnKey struct{}

func headConnContext(ctx context.Context, c net.Conn) context.Context {
	if hc := headConnOf(c); hc != nil {
		return context.WithValue(ctx, headConnKey{}, hc)
	}
	return ctx
}

// rawHost returns the values of the Host header fields of a raw request
// head (field names are case-insensitive; obsolete line folding is not
// accepted by net/http, so a field is one line).
func rawHost(head []byte) []string {
	var hosts []string
	lines := strings.Split(string(head), "\r\n")
	for _, line := range lines[1:] {
		name, value, ok := strings.Cut(line, ":")
		if !ok {
			continue
		}
		if strings.EqualFold(name, "host") {
			hosts = append(hosts, strings.Trim(value, " \t"))
		}
	}
	return hosts
}
