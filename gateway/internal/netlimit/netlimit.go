// Package netlimit bounds what a client with nothing but a TCP connection can hold on a
// listener: a cap on open connections per listener and per client address, where an idle
// connection (accepted but with no request under way, or idle between keep-alive requests)
// gives way to a new one instead of making it wait; one that never completed a request goes
// before a kept-alive one that did. So thousands of idle connections cannot keep a real
// request out, and the file descriptors one listener may use are bounded. PlanFiles derives
// the caps of all listeners from the process's open-file limit, so that together they can
// never exhaust it.
//
// Use it with an http.Server: wrap the listener with Limiter.Listener and set the server's
// ConnState to Limiter.ConnState, which tells the limiter which connections are idle.
package netlimit

import (
	"errors"
	"fmt"
	"net"
	"net/http"
	"sync"
	"sync/atomic"
	"time"

	"ironcurtain.dev/gateway/internal/netwrap"
)

// Limits configure a Limiter.
type Limits struct {
	// MaxConns caps the connections open at once on the listener; > 0.
	MaxConns int
	// MaxPerClient caps the connections of one client address (IP); > 0 and <= MaxConns.
	MaxPerClient int
}

// Validate reports the first bad field, named as in gateway.yaml under prefix.
func (l Limits) Validate(prefix string) error {
	switch {
	case l.MaxConns <= 0:
		return fmt.Errorf("%s.max_connections must be > 0, not %d", prefix, l.MaxConns)
	case l.MaxPerClient <= 0:
		return fmt.Errorf("%s.max_connections_per_client must be > 0, not %d", prefix, l.MaxPerClient)
	case l.MaxPerClient > l.MaxConns:
		return fmt.Errorf("%s.max_connections_per_client (%d) must not exceed %s.max_connections (%d)", prefix, l.MaxPerClient, prefix, l.MaxConns)
	}
	return nil
}

// Stats count what a Limiter did.
type Stats struct {
	Open     int    // connections open now
	Evicted  uint64 // idle connections closed to make room
	Refused  uint64 // new connections closed because every connection was busy
	Accepted uint64
}

// A Limiter caps the connections of one listener. Create it with New.
type Limiter struct {
	limits Limits
	// OnRefuse, when set, is called (outside the lock) with the client address of each
	// connection refused because every connection was busy.
	OnRefuse func(client string)

	mu       sync.Mutex
	conns    map[*Conn]struct{}
	byClient map[string]int
	evicted  atomic.Uint64
	refused  atomic.Uint64
	accepted atomic.Uint64
}

// New returns a Limiter; limits must be valid.
func New(limits Limits) (*Limiter, error) {
	if err := limits.Validate("listener"); err != nil {
		return nil, err
	}
	return &Limiter{limits: limits, conns: make(map[*Conn]struct{}), byClient: make(map[string]int)}, nil
}

// Stats returns the counters.
func (l *Limiter) Stats() Stats {
	l.mu.Lock()
	open := len(l.conns)
	l.mu.Unlock()
	return Stats{Open: open, Evicted: l.evicted.Load(), Refused: l.refused.Load(), Accepted: l.accepted.Load()}
}

// Listener wraps ln: its Accept returns only connections within the limits.
func (l *Limiter) Listener(ln net.Listener) net.Listener { return &listener{Listener: ln, l: l} }

// ConnState is the http.Server hook that tells the limiter which connections are idle:
// StateNew (no request yet) and StateIdle (between keep-alive requests) are idle;
// StateActive and StateHijacked are busy.
func (l *Limiter) ConnState(c net.Conn, s http.ConnState) {
	tc := unwrap(c)
	if tc == nil {
		return
	}
	switch s {
	case http.StateNew:
		tc.setIdle(true)
	case http.StateIdle:
		tc.kept.Store(true) // answered and kept open: a client the server serves
		tc.setIdle(true)
	case http.StateActive, http.StateHijacked:
		tc.setIdle(false)
	}
}

type listener struct {
	net.Listener
	l *Limiter
}

func (ln *listener) Accept() (net.Conn, error) {
	for {
		c, err := ln.Listener.Accept()
		if err != nil {
			return nil, err
		}
		if tc := ln.l.admit(c); tc != nil {
			return tc, nil
		}
	}
}

// admit registers c, closing an idle connection to make room when a limit is reached; it
// closes c and returns nil when every connection in the way is busy.
func (l *Limiter) admit(c net.Conn) *Conn {
	client := clientOf(c.RemoteAddr())
	tc := &Conn{Conn: c, l: l, client: client, since: time.Now()}
	tc.idle.Store(true)
	var victims []*Conn
	l.mu.Lock()
	if l.byClient[client] >= l.limits.MaxPerClient {
		if v := l.oldestIdleLocked(client); v != nil {
			victims = append(victims, v)
		}
	}
	if len(l.conns)-len(victims) >= l.limits.MaxConns {
		if v := l.oldestIdleLocked(""); v != nil && (len(victims) == 0 || v != victims[0]) {
			victims = append(victims, v)
		}
	}
	admitted := l.byClient[client]-countClient(victims, client) < l.limits.MaxPerClient &&
		len(l.conns)-len(victims) < l.limits.MaxConns
	if !admitted {
		l.mu.Unlock()
		l.refused.Add(1)
		_ = c.Close()
		if l.OnRefuse != nil {
			l.OnRefuse(client)
		}
		return nil
	}
	for _, v := range victims {
		l.removeLocked(v)
	}
	l.conns[tc] = struct{}{}
	l.byClient[client]++
	l.mu.Unlock()
	for _, v := range victims {
		l.evicted.Add(1)
		_ = v.Conn.Close()
	}
	l.accepted.Add(1)
	return tc
}

func countClient(cs []*Conn, client string) int {
	n := 0
	for _, c := range cs {
		if c.client == client {
			n++
		}
	}
	return n
}

// oldestIdleLocked returns the idle connection to evict, of client when client is not empty;
// nil when there is none. Connections that never completed a request (a stranger's, or one
// still to authenticate) go first, the one idle the longest; then idle keep-alive
// connections, which completed a request and were kept open (refusals close theirs, so these
// are clients the server serves), the one idle the longest.
func (l *Limiter) oldestIdleLocked(client string) *Conn {
	var stranger, kept *Conn
	for c := range l.conns {
		if !c.idle.Load() || (client != "" && c.client != client) {
			continue
		}
		best := &stranger
		if c.kept.Load() {
			best = &kept
		}
		if *best == nil || c.idleSince().Before((*best).idleSince()) {
			*best = c
		}
	}
	if stranger != nil {
		return stranger
	}
	return kept
}

// removeLocked forgets c; it reports whether c was still registered.
func (l *Limiter) removeLocked(c *Conn) bool {
	if _, ok := l.conns[c]; !ok {
		return false
	}
	delete(l.conns, c)
	if l.byClient[c.client]--; l.byClient[c.client] <= 0 {
		delete(l.byClient, c.client)
	}
	return true
}

// Conn is a connection a Limiter admitted. Closing it gives its place back.
type Conn struct {
	net.Conn
	l      *Limiter
	client string

	idle      atomic.Bool
	kept      atomic.Bool // has completed a request and been kept open (StateIdle)
	mu        sync.Mutex
	since     time.Time // when it last became idle
	closeOnce sync.Once
}

func (c *Conn) setIdle(idle bool) {
	c.mu.Lock()
	if idle && !c.idle.Load() {
		c.since = time.Now()
	}
	c.mu.Unlock()
	c.idle.Store(idle)
}

func (c *Conn) idleSince() time.Time {
	c.mu.Lock()
	defer c.mu.Unlock()
	return c.since
}

// Close closes the connection and gives its place back, once.
func (c *Conn) Close() error {
	err := c.Conn.Close()
	c.closeOnce.Do(func() {
		c.l.mu.Lock()
		c.l.removeLocked(c)
		c.l.mu.Unlock()
	})
	if errors.Is(err, net.ErrClosed) {
		return nil // evicted: already closed underneath
	}
	return err
}

// NetConn returns the connection underneath (for code that unwraps to the socket).
func (c *Conn) NetConn() net.Conn { return c.Conn }

// Client returns the client address (IP) the connection counts against.
func (c *Conn) Client() string { return c.client }

// unwrap finds the *Conn under wrappers that expose NetConn (as http.Server passes the
// connection its listener returned, which may wrap ours).
func unwrap(c net.Conn) *Conn {
	tc, _ := netwrap.Find[*Conn](c)
	return tc
}

// clientOf is the IP of addr (the whole string when it has no port).
func clientOf(addr net.Addr) string {
	if addr == nil {
		return ""
	}
	s := addr.String()
	if host, _, err := net.SplitHostPort(s); err == nil {
		return host
	}
	return s
}
