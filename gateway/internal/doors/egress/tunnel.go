package egress

import (
	"bytes"
	"context"
	"crypto/tls"
	"errors"
	"io"
	"net"
	"net/http"
	"strings"
	"sync"
	"sync/atomic"
	"syscall"
	"time"

	"github.com/elazarl/goproxy"

	"ironcurtain.dev/gateway/internal/netwrap"
	"ironcurtain.dev/gateway/netpolicy"
)

// relayBuf is the size of a relay direction's copy buffer.
const relayBuf = 32 << 10

var (
	errIdle          = errors.New("tunnel idle timeout")
	errNotHello      = errors.New("the tunnel did not start with a TLS ClientHello")
	errHelloCaptured = errors.New("client hello captured")
)

// hijack runs an allowed CONNECT tunnel: dial the decided address, answer
// 200, check the TLS server name, then relay until both sides are done or
// idle. The relay runs on a goroutine of its own, which ends the tunnel
// (audit event, drain count: Proxy.end) when it is done, so that net/http's
// serving goroutine, its buffers and the handler chain's stack are released
// while the tunnel is open; everything before the relay, and a refusal,
// stays on the request's goroutine.
func (p *Proxy) hijack(req *http.Request, client net.Conn, _ *goproxy.ProxyCtx) {
	detached := false
	untrackClient := p.trackConn(client)
	defer func() {
		if !detached {
			untrackClient()
			_ = client.Close()
		}
	}()
	st := stateFrom(req.Context())
	if st == nil || !st.isAllowed() {
		if st == nil {
			st = newState("connect", req.Method)
		}
		p.writeRefusal(client, req, st, p.refuse(st, &refusal{http.StatusForbidden, ruleCatchAll, "no rule allowed this request"}))
		return
	}
	target, err := p.pinnedDialRaw(req.Context(), st)
	if err != nil {
		st.fail(err)
		p.writeRefusal(client, req, st, p.dialRefusal(st, err))
		return
	}
	untrackTarget := p.trackConn(target)
	defer func() {
		if !detached {
			untrackTarget()
			_ = target.Close()
		}
	}()

	_ = client.SetDeadline(time.Time{})
	_ = client.SetWriteDeadline(time.Now().Add(p.cfg.IdleTimeout))
	if _, err := io.WriteString(client, "HTTP/1.1 200 Connection established\r\n\r\n"); err != nil {
		st.fail(err)
		return
	}
	_ = client.SetWriteDeadline(time.Time{})
	if !p.cfg.UnsafeSkipSNICheck {
		_ = client.SetReadDeadline(time.Now().Add(p.cfg.ReadHeaderTimeout))
		hello, sni, err := readClientHello(client)
		_ = client.SetReadDeadline(time.Time{})
		if err != nil {
			st.fail(err)
			p.refuse(st, &refusal{http.StatusForbidden, ruleSNI, errNotHello.Error()})
			return
		}
		if !sniMatches(sni, st.host, st.rawHost) {
			p.refuse(st, &refusal{http.StatusForbidden, ruleSNI, "the TLS server name does not match the CONNECT host"})
			st.fail(errors.New("TLS server name " + quoteShort(sni)))
			return
		}
		_ = target.SetWriteDeadline(time.Now().Add(p.cfg.IdleTimeout))
		n, err := target.Write(hello)
		st.up.Add(int64(n))
		if err != nil {
			st.fail(err)
			return
		}
	}
	if bc, ok := client.(*bufConn); ok {
		// Bytes the client sent early and the parser above did not need:
		// pass them on before relaying the raw sockets.
		if rest := bc.takeBuffered(); len(rest) > 0 {
			_ = target.SetWriteDeadline(time.Now().Add(p.cfg.IdleTimeout))
			n, err := target.Write(rest)
			st.up.Add(int64(n))
			if err != nil {
				st.fail(err)
				return
			}
		}
	}
	_ = client.SetDeadline(time.Time{})
	_ = target.SetDeadline(time.Time{}) // the relay's watchdog bounds idleness from here
	detached, st.detached = true, true
	go func() {
		defer p.end(st)
		defer func() {
			untrackClient()
			_ = client.Close()
			untrackTarget()
			_ = target.Close()
		}()
		if err := p.relay(st, client, target); err != nil {
			st.fail(err)
		}
	}()
}

// pinnedDialRaw dials the decided destination of a tunnel (through the same
// check as pinnedDial, without the per-read deadline wrapper: the relay
// manages deadlines itself).
func (p *Proxy) pinnedDialRaw(ctx context.Context, st *reqState) (net.Conn, error) {
	c, err := p.pinnedDial(ctx, "tcp", st.host.HostPort(st.port))
	if err != nil {
		return nil, err
	}
	return c.(*idleConn).Conn, nil
}

func (p *Proxy) writeRefusal(client net.Conn, req *http.Request, st *reqState, ref *refusal) {
	_ = client.SetWriteDeadline(time.Now().Add(p.cfg.ReadHeaderTimeout))
	_ = refusalResponse(req, st, ref).Write(client)
}

// sniMatches: a name host needs a ClientHello naming exactly it, spelled
// as the CONNECT spelled it (raw, less one trailing dot) or in canonical
// form: the ClientHello is relayed as it arrived, so a name that differs
// from the scanned one in case would carry unscanned bits upstream. An IP
// host needs a ClientHello without a server name (an IP literal is not
// allowed in SNI).
func sniMatches(sni string, h netpolicy.Host, raw string) bool {
	if h.IsIP() {
		return sni == ""
	}
	if sni == "" {
		return false
	}
	if sni != h.String() && sni != strings.TrimSuffix(raw, ".") {
		return false
	}
	sh, err := netpolicy.ParseHost(sni)
	return err == nil && sh == h
}

// readClientHello reads the client's first TLS flight far enough for the
// standard library to parse the ClientHello, and returns every byte read
// (to be replayed to the target) and the server name. Nothing is written to
// the client.
func readClientHello(c net.Conn) ([]byte, string, error) {
	var buf bytes.Buffer
	rc := &replayConn{Conn: c, r: io.TeeReader(c, &buf)}
	var sni string
	got := false
	err := tls.Server(rc, &tls.Config{
		GetConfigForClient: func(h *tls.ClientHelloInfo) (*tls.Config, error) {
			sni, got = h.ServerName, true
			return nil, errHelloCaptured
		},
	}).Handshake()
	if !got {
		if err == nil {
			err = errNotHello
		}
		return nil, "", errors.Join(errNotHello, err)
	}
	return buf.Bytes(), sni, nil
}

// replayConn feeds the TLS parser from a tee and swallows what it writes (an
// alert after we abort the handshake).
type replayConn struct {
	net.Conn
	r io.Reader
}

func (c *replayConn) Read(b []byte) (int, error)  { return c.r.Read(b) }
func (c *replayConn) Write(b []byte) (int, error) { return len(b), nil }
func (c *replayConn) Close() error                { return nil }

// relay copies both ways until both directions end. A direction ends at EOF
// (the other side's write half is then closed) or at an error, which closes
// both. A watchdog closes both when no data moved either way for
// IdleTimeout, which also ends a write blocked on a peer that stopped
// reading.
//
// TCP to TCP on Linux a direction is socketRelay (a pooled pipe to splice
// through, or a buffer, held only while bytes are in flight); elsewhere it
// is pipe. Both note the activity after every read and write.
func (p *Proxy) relay(st *reqState, client, target net.Conn) error {
	// One allocation holds the relay's shared state (the activity clock,
	// the watchdog, the directions' outcomes) rather than one per variable
	// the closures would capture.
	r := &tunnelRelay{c: rawConn(client), t: rawConn(target), idle: p.cfg.IdleTimeout, errs: make(chan error, 2)}
	r.last.Store(time.Now().UnixNano())
	r.watchdog = time.AfterFunc(r.idle, r.expire)
	defer r.watchdog.Stop()
	r.copyFn = pipe
	if isTCP(r.c) && isTCP(r.t) {
		r.copyFn = socketRelay
	}
	// The download direction runs on this goroutine: an idle tunnel costs
	// one goroutine less.
	go r.direction(r.t, r.c, &st.up)
	r.direction(r.c, r.t, &st.down)
	err := tunnelErr(<-r.errs, <-r.errs)
	if r.idled.Load() {
		return errIdle
	}
	return err
}

// tunnelRelay is one tunnel's relay (Proxy.relay).
type tunnelRelay struct {
	c, t     net.Conn // client and target, unwrapped
	idle     time.Duration
	last     atomic.Int64 // UnixNano of the last read or write either way
	idled    atomic.Bool
	watchdog *time.Timer
	copyFn   func(dst, src net.Conn, n, last *atomic.Int64) error
	errs     chan error // each direction's outcome, in the order they end
}

// expire is the watchdog: it closes both sockets once no data moved
// either way for idle, and otherwise waits for the rest of it.
func (r *tunnelRelay) expire() {
	if since := time.Since(time.Unix(0, r.last.Load())); since < r.idle {
		r.watchdog.Reset(r.idle - since)
		return
	}
	r.idled.Store(true)
	_ = r.c.Close()
	_ = r.t.Close()
}

// direction relays src to dst. One that fails closes both sockets (after
// queueing its error, so that the other direction's "closed" error comes
// second).
func (r *tunnelRelay) direction(dst, src net.Conn, n *atomic.Int64) {
	err := r.copyFn(dst, src, n, &r.last)
	r.errs <- err
	if err != nil {
		_ = r.c.Close()
		_ = r.t.Close()
	}
}

// tunnelErr is a tunnel's outcome from its two directions' ends, in the
// order they were reported: the first error, except that a reset beside the
// other direction's clean end is the peer tearing down a finished tunnel (a
// TLS server answering the client's close_notify after we half-closed), not
// a failure. The reset can be reported before the clean end: the half-close
// that causes it happens before the clean direction reports.
func tunnelErr(e1, e2 error) error {
	first := e1
	if first == nil {
		first = e2
	}
	if (e1 == nil || e2 == nil) && isReset(first) {
		return nil
	}
	return first
}

// isReset reports whether err is the peer resetting the connection.
func isReset(err error) bool {
	return errors.Is(err, syscall.ECONNRESET) || errors.Is(err, syscall.EPIPE)
}

// isTCP reports whether c is a TCP socket.
func isTCP(c net.Conn) bool {
	_, ok := c.(*net.TCPConn)
	return ok
}

// pipe copies src to dst in user space, noting the activity after every
// read and write.
func pipe(dst, src net.Conn, n, last *atomic.Int64) error {
	bp := relayBufs.Get().(*[]byte)
	defer relayBufs.Put(bp)
	buf := *bp
	for {
		k, rerr := src.Read(buf)
		if k > 0 {
			last.Store(time.Now().UnixNano())
			w, werr := dst.Write(buf[:k])
			n.Add(int64(w))
			if werr != nil {
				return werr
			}
			last.Store(time.Now().UnixNano())
		}
		switch {
		case rerr == nil:
		case errors.Is(rerr, io.EOF):
			closeWrite(dst)
			return nil
		default:
			return rerr
		}
	}
}

var relayBufs = sync.Pool{New: func() any { b := make([]byte, relayBuf); return &b }}

// closeWrite passes an EOF on: it half-closes dst, or closes it when dst
// cannot half-close (then the other direction ends too).
func closeWrite(c net.Conn) {
	if cw, ok := c.(interface{ CloseWrite() error }); ok {
		_ = cw.CloseWrite()
		return
	}
	_ = c.Close()
}

// rawConn unwraps our connection wrappers (the relay reads the socket
// directly; the head recorder is only needed for the request head).
func rawConn(c net.Conn) net.Conn { return netwrap.Raw(c) }

func quoteShort(s string) string {
	if len(s) > 80 {
		s = s[:80] + "…"
	}
	return "\"" + s + "\""
}
