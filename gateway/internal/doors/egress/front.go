package egress

import (
	"bufio"
	"bytes"
	"context"
	"errors"
	"fmt"
	"io"
	"net"
	"net/http"
	"net/textproto"
	"runtime"
	"strconv"
	"sync"
	"time"

	"golang.org/x/net/http/httpguts"

	"ironcurtain.dev/gateway/internal/netlimit"
	"ironcurtain.dev/gateway/internal/netwrap"
)

// The proxy's front reads the first request head of every client
// connection itself, with net/http's own parser (http.ReadRequest, the
// function http.Server reads heads with) under the same limits, and keeps
// only what it is sure of: a well-formed HTTP/1.x CONNECT that passes every
// check http.Server adds to the parser's (Host header, header names and
// values, no Expect, no body). Such a request goes through the same handler
// (Proxy.ServeHTTP, goproxy, the CONNECT handlers, hijack) as before, on
// the goroutine that read it. Everything else (another method, a head the
// parser or the checks refuse, an HTTP/2 preface) is handed to the
// http.Server with the bytes already read put back in front of the
// connection: it reads them again and answers exactly as it would have.
//
// Why: a tunnel through http.Server pays for its connection machinery and,
// for a CONNECT, a background read that net/http starts before the handler
// runs and stops again when the handler hijacks: a goroutine, a system call
// and two hand-offs between threads. Without them a tunnel costs the proxy
// 11-15 % less CPU with 32 clients connecting at once (docs/egress.md,
// "The front").
//
// The front does not decide anything: it chooses which code serves a
// connection whose request both would parse identically
// (FuzzFrontMatchesServer feeds the same bytes to both and compares).

// frontHeadBufSize is the front's read buffer (net/http's is 4 KiB too).
const frontHeadBufSize = 4 << 10

var frontReaders = sync.Pool{New: func() any { return bufio.NewReaderSize(nil, frontHeadBufSize) }}

// errFrontClosed is Accept's error on the hand-off listener after Close.
var errFrontClosed = errors.New("egress: proxy front closed")

// front accepts client connections for the proxy (Proxy.Serve).
type front struct {
	p       *Proxy
	ln      net.Listener // the capped, head-recording listener
	lim     *netlimit.Limiter
	handoff *handoffListener

	mu     sync.Mutex
	closed bool
	conns  map[net.Conn]*frontConn // connections the front serves
}

// frontConn is a connection the front serves: reading its head, then its
// CONNECT until the handler returns.
type frontConn struct {
	reading bool
	cancel  context.CancelFunc // the request's context, once read
}

func newFront(p *Proxy, ln net.Listener, lim *netlimit.Limiter) *front {
	return &front{p: p, ln: ln, lim: lim, handoff: newHandoffListener(ln.Addr()), conns: map[net.Conn]*frontConn{}}
}

// serve accepts connections until the listener is closed; accept errors
// that may pass (too many open files) are retried with a back-off, as
// http.Server does.
func (f *front) serve() error {
	var delay time.Duration
	for {
		c, err := f.ln.Accept()
		if err != nil {
			if f.isClosed() {
				return nil
			}
			var ne net.Error
			if errors.As(err, &ne) && ne.Temporary() { //nolint:staticcheck // http.Server's rule for accept errors
				delay = min(max(2*delay, 5*time.Millisecond), time.Second)
				f.p.log.Warn("egress: accept failed; retrying", "error", err.Error(), "delay", delay)
				time.Sleep(delay)
				continue
			}
			return err
		}
		delay = 0
		go f.serveConn(c)
	}
}

func (f *front) isClosed() bool {
	f.mu.Lock()
	defer f.mu.Unlock()
	return f.closed
}

// close stops accepting, closes the connections still sending their first
// head (as http.Server.Shutdown closes idle ones) and the hand-off listener.
func (f *front) close() {
	f.mu.Lock()
	f.closed = true
	for c, fc := range f.conns {
		if fc.reading {
			_ = c.Close()
		}
	}
	f.mu.Unlock()
	_ = f.ln.Close()
	_ = f.handoff.Close()
}

// closeAll closes every connection the front serves and ends their
// requests (a drain that timed out, as http.Server.Close).
func (f *front) closeAll() {
	f.mu.Lock()
	defer f.mu.Unlock()
	for c, fc := range f.conns {
		_ = c.Close()
		if fc.cancel != nil {
			fc.cancel()
		}
	}
}

// track adds c (reading its head); it reports false after close.
func (f *front) track(c net.Conn) bool {
	f.mu.Lock()
	defer f.mu.Unlock()
	if f.closed {
		return false
	}
	f.conns[c] = &frontConn{reading: true}
	return true
}

// read notes that c's head has been read and its request's cancel.
func (f *front) read(c net.Conn, cancel context.CancelFunc) {
	f.mu.Lock()
	defer f.mu.Unlock()
	if fc := f.conns[c]; fc != nil {
		fc.reading, fc.cancel = false, cancel
	}
}

func (f *front) untrack(c net.Conn) {
	f.mu.Lock()
	defer f.mu.Unlock()
	delete(f.conns, c)
}

// serveConn reads c's first request head and serves it (a CONNECT) or
// hands c to the http.Server.
func (f *front) serveConn(c net.Conn) {
	if !f.track(c) {
		_ = c.Close()
		return
	}
	defer func() {
		// As http.Server: a panic ends this connection, not the gateway.
		if v := recover(); v != nil {
			_ = c.Close()
			f.untrack(c)
			if v != http.ErrAbortHandler { //nolint:errorlint // the sentinel itself, as net/http compares it
				buf := make([]byte, 64<<10)
				buf = buf[:runtime.Stack(buf, false)]
				f.p.log.Error("egress: panic serving a connection", "client", c.RemoteAddr().String(), "panic", fmt.Sprint(v), "stack", string(buf))
			}
		}
	}()
	limit := int64(f.p.cfg.MaxHeaderBytes) + 4096 // http.Server's initial read limit
	lr := &limitReader{r: c, n: limit}
	br := frontReaders.Get().(*bufio.Reader)
	br.Reset(lr)
	_ = c.SetReadDeadline(time.Now().Add(f.p.cfg.ReadHeaderTimeout))
	req, err := http.ReadRequest(br)
	if lr.n != limit {
		f.lim.ConnState(c, http.StateActive) // bytes arrived: not idle
	}
	var ne net.Error
	if err != nil && (errors.Is(err, io.EOF) || errors.As(err, &ne) && ne.Timeout() || errors.Is(err, net.ErrClosed)) {
		// Nothing (more) will come, or not in time: http.Server closes such
		// a connection without an answer too.
		f.untrack(c)
		f.release(br)
		_ = c.Close()
		return
	}
	if err != nil || !frontServes(req, lr.read) || f.isClosed() {
		f.untrack(c)
		f.release(br)
		f.handOff(c, lr.read)
		return
	}
	lr.n, lr.read = -1, nil // the tunnel's bytes are not bounded by the head's limit
	_ = c.SetReadDeadline(time.Time{})
	delete(req.Header, "Host")
	ctx := context.WithValue(context.Background(), headConnKey{}, headConnOf(c))
	ctx = context.WithValue(ctx, watchKey{}, c)
	ctx, cancel := context.WithCancel(ctx)
	f.read(c, cancel)
	req = req.WithContext(ctx)
	req.RemoteAddr = c.RemoteAddr().String()
	w := &frontWriter{c: c, br: br, header: http.Header{}, lim: f.lim, idle: f.p.cfg.IdleTimeout}
	f.p.ServeHTTP(w, req)
	cancel()
	switch {
	case !w.hijacked:
		w.finish()
		f.release(br)
		_ = c.Close()
	case !w.keptReader:
		// The handler took the connection with nothing buffered: it never
		// got br (Hijack), so br goes back to the pool.
		f.release(br)
	}
	f.untrack(c)
}

// frontServes reports whether the front serves req (read from head)
// itself: a CONNECT that http.Server would hand to its handler unchanged
// (conn.readRequest's and conn.serve's checks), with no body and no
// Expect to answer.
func frontServes(req *http.Request, head []byte) bool {
	if req.Method != http.MethodConnect || req.ProtoMajor != 1 || req.Body != http.NoBody {
		return false
	}
	if _, ok := req.Header["Expect"]; ok {
		return false
	}
	for k, vv := range req.Header {
		if !httpguts.ValidHeaderFieldName(k) {
			return false
		}
		for _, v := range vv {
			if !httpguts.ValidHeaderFieldValue(v) {
				return false
			}
		}
	}
	// http.ReadRequest drops the Host header fields (a CONNECT's host is
	// its target); http.Server checks them first. Read them from the head
	// with the parser that read the other fields.
	br := frontReaders.Get().(*bufio.Reader)
	br.Reset(bytes.NewReader(head))
	defer func() {
		br.Reset(nil)
		frontReaders.Put(br)
	}()
	tp := textproto.NewReader(br)
	if _, err := tp.ReadLine(); err != nil {
		return false
	}
	h, err := tp.ReadMIMEHeader()
	if err != nil {
		return false
	}
	hosts := h["Host"]
	return len(hosts) == 0 || len(hosts) == 1 && httpguts.ValidHostHeader(hosts[0])
}

// handOff gives c to the http.Server, with the bytes the front read from
// it put back first: the server reads the same bytes, under the same
// limit, as if the front had not been there.
func (f *front) handOff(c net.Conn, read []byte) {
	_ = c.SetReadDeadline(time.Time{})
	if !f.handoff.give(&prefixConn{Conn: c, rest: read}) {
		_ = c.Close()
	}
}

func (f *front) release(br *bufio.Reader) {
	br.Reset(nil)
	frontReaders.Put(br)
}

// headConnOf finds the head-recording connection under c.
func headConnOf(c net.Conn) *headConn {
	hc, _ := netwrap.Find[*headConn](c)
	return hc
}

// limitReader reads at most n bytes (n < 0: no limit) and then reports
// EOF, like net/http's connection reader while it reads a head. While
// limited it keeps a copy of what it read (for a hand-off).
type limitReader struct {
	r    io.Reader
	n    int64
	read []byte
}

func (l *limitReader) Read(b []byte) (int, error) {
	if l.n == 0 {
		return 0, io.EOF
	}
	if l.n > 0 && int64(len(b)) > l.n {
		b = b[:l.n]
	}
	k, err := l.r.Read(b)
	if l.n > 0 {
		l.n -= int64(k)
		l.read = append(l.read, b[:k]...)
	}
	return k, err
}

// prefixConn reads rest before the connection.
type prefixConn struct {
	net.Conn
	rest []byte
}

func (c *prefixConn) Read(b []byte) (int, error) {
	if len(c.rest) > 0 {
		n := copy(b, c.rest)
		c.rest = c.rest[n:]
		return n, nil
	}
	return c.Conn.Read(b)
}

// NetConn returns the connection under the replayed bytes (the limiter's
// and the head recorder's unwrapping).
func (c *prefixConn) NetConn() net.Conn { return c.Conn }

// handoffListener is the http.Server's listener: the connections the
// front handed over.
type handoffListener struct {
	addr  net.Addr
	conns chan net.Conn
	once  sync.Once
	done  chan struct{}
}

func newHandoffListener(addr net.Addr) *handoffListener {
	return &handoffListener{addr: addr, conns: make(chan net.Conn), done: make(chan struct{})}
}

// give hands c to Accept; it reports false once the listener is closed.
func (l *handoffListener) give(c net.Conn) bool {
	select {
	case l.conns <- c:
		return true
	case <-l.done:
		return false
	}
}

func (l *handoffListener) Accept() (net.Conn, error) {
	select {
	case c := <-l.conns:
		return c, nil
	case <-l.done:
		return nil, errFrontClosed
	}
}

func (l *handoffListener) Close() error {
	l.once.Do(func() { close(l.done) })
	return nil
}

func (l *handoffListener) Addr() net.Addr { return l.addr }

// frontWriter is the http.ResponseWriter of a CONNECT the front serves: the
// handler hijacks the connection, or its answer is written, with
// "Connection: close", when it returns.
type frontWriter struct {
	c        net.Conn
	br       *bufio.Reader
	lim      *netlimit.Limiter
	idle     time.Duration // bounds the answer's write
	header   http.Header
	code     int
	body     bytes.Buffer
	hijacked bool
	// keptReader: br held bytes the client sent after its head when the
	// handler hijacked, so the handler reads them from br, which is then
	// its own (not pooled again).
	keptReader bool
}

func (w *frontWriter) Header() http.Header { return w.header }

func (w *frontWriter) WriteHeader(code int) {
	if w.code == 0 && !w.hijacked {
		w.code = code
	}
}

func (w *frontWriter) Write(b []byte) (int, error) {
	if w.hijacked {
		return 0, http.ErrHijacked
	}
	if w.code == 0 {
		w.code = http.StatusOK
	}
	if w.body.Len()+len(b) > maxFrontBody {
		return 0, errors.New("egress: answer too long")
	}
	return w.body.Write(b)
}

// maxFrontBody bounds an answer the handler writes without hijacking (the
// proxy's own short refusals).
const maxFrontBody = 64 << 10

// SetWriteDeadline bounds the answer's write.
func (w *frontWriter) SetWriteDeadline(t time.Time) error { return w.c.SetWriteDeadline(t) }

// Hijack hands the connection over; bytes the client sent after its head
// stay readable first.
func (w *frontWriter) Hijack() (net.Conn, *bufio.ReadWriter, error) {
	if w.hijacked {
		return nil, nil, http.ErrHijacked
	}
	w.hijacked = true
	w.lim.ConnState(w.c, http.StateHijacked)
	r := w.br
	if w.br.Buffered() == 0 {
		// Nothing buffered: the handler reads the connection itself, and
		// br, which no one else holds, goes back to the pool (serveConn).
		r = bufio.NewReaderSize(w.c, 16)
	} else {
		w.keptReader = true
	}
	return w.c, bufio.NewReadWriter(r, bufio.NewWriterSize(w.c, 64)), nil
}

// finish writes the answer of a handler that did not hijack.
func (w *frontWriter) finish() {
	if w.code == 0 {
		w.code = http.StatusOK
	}
	var b bytes.Buffer
	b.WriteString("HTTP/1.1 " + strconv.Itoa(w.code) + " " + http.StatusText(w.code) + "\r\n")
	w.header.Del("Content-Length")
	w.header.Set("Connection", "close")
	_ = w.header.Write(&b)
	b.WriteString("Content-Length: " + strconv.Itoa(w.body.Len()) + "\r\n\r\n")
	b.Write(w.body.Bytes())
	_ = w.c.SetWriteDeadline(time.Now().Add(w.idle))
	_, _ = w.c.Write(b.Bytes())
}

// watchKey is the context key of the client connection of a request the
// front serves. net/http ends a request's context when its client hangs
// up, with a read it keeps pending under every request; the front does
// not (a tunnel's first bytes are the relay's), and watches only while a
// request waits for a human (watchClient).
type watchKey struct{}

// watchClient returns a context that also ends when the client of the
// request behind ctx hangs up, and the function that stops watching. A
// request that http.Server serves needs no watch: its context ends already.
func watchClient(ctx context.Context) (context.Context, func()) {
	c, ok := ctx.Value(watchKey{}).(net.Conn)
	if !ok {
		return ctx, func() {}
	}
	return watchPeer(ctx, c)
}
