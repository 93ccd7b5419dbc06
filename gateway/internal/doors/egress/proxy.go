package egress

import (
	"bufio"
	"context"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"net"
	"net/http"
	"sync"
	"sync/atomic"
	"time"

	"github.com/elazarl/goproxy"
	"github.com/prometheus/client_golang/prometheus"
	"go.opentelemetry.io/otel/trace"
	"golang.org/x/sync/semaphore"

	"ironcurtain.dev/gateway/internal/audit"
	"ironcurtain.dev/gateway/internal/escalation"
	"ironcurtain.dev/gateway/internal/gate"
	"ironcurtain.dev/gateway/internal/netguard"
	"ironcurtain.dev/gateway/internal/netlimit"
	"ironcurtain.dev/gateway/internal/session"
	"ironcurtain.dev/gateway/internal/tracing"
	"ironcurtain.dev/gateway/netpolicy"
)

// Defaults for ProxyConfig fields left zero.
const (
	DefaultMaxTunnelsPerSession = 64
	DefaultConnectTimeout       = 10 * time.Second
	DefaultIdleTimeout          = 5 * time.Minute
	DefaultReadHeaderTimeout    = 10 * time.Second
	DefaultMaxHeaderBytes       = 32 << 10
	DefaultDrainTimeout         = 30 * time.Second
	DefaultMaxConnections       = 1024
	DefaultMaxConnsPerClient    = 256
)

// DefaultAllowedPorts are the destination ports allowed when
// ProxyConfig.AllowedPorts is empty.
var DefaultAllowedPorts = []int{80, 443}

// ProxyConfig is the validated proxy configuration (see config.EgressConfig
// for the gateway.yaml form).
type ProxyConfig struct {
	// Allow is the deployment allowlist (gateway.yaml egress.allowed_hosts).
	Allow []netpolicy.Pattern
	// AllowedPorts are the destination ports the proxy relays to; empty
	// means DefaultAllowedPorts.
	AllowedPorts []int
	// Addresses refuses non-public resolved addresses; its UnsafeAllow
	// prefixes are gateway.yaml egress.unsafe_allow_addresses.
	Addresses netpolicy.AddressPolicy
	// EscalateUnknownHosts holds a request for a host nobody allowed until a
	// human decides through the Escalator, instead of refusing it.
	EscalateUnknownHosts bool
	// MaxTunnelsPerSession caps the concurrent tunnels and requests of one
	// session.
	MaxTunnelsPerSession int
	// ConnectTimeout bounds the DNS lookup and TCP connect to the target.
	ConnectTimeout time.Duration
	// IdleTimeout closes a tunnel or request with no bytes either way for
	// this long; it also bounds each read of a request or response body.
	IdleTimeout time.Duration
	// ReadHeaderTimeout bounds reading a request head (slowloris) and, for
	// tunnels, the TLS ClientHello when the SNI is checked.
	ReadHeaderTimeout time.Duration
	// MaxHeaderBytes bounds a request head.
	MaxHeaderBytes int
	// MaxConnections caps the client connections open at once, all
	// sessions together; at the cap an idle connection (no request head yet)
	// is closed to make room, and a new one is refused when none is idle.
	MaxConnections int
	// MaxConnectionsPerClient caps the connections of one client address,
	// below MaxConnections.
	MaxConnectionsPerClient int
	// DrainTimeout bounds how long Serve waits for open tunnels on shutdown
	// before it closes them.
	DrainTimeout time.Duration
	// UnsafeSkipSNICheck turns off the check that a tunnel's TLS ClientHello
	// names the CONNECT host (which also refuses non-TLS tunnels).
	UnsafeSkipSNICheck bool
	// MaxScanBodyBytes is how much of a plain-HTTP request body is scanned
	// for secrets (secrets.max_proxy_body_bytes); a longer body is a
	// finding of its own (KindUnscannedBody). Default
	// DefaultMaxScanBodyBytes.
	MaxScanBodyBytes int64
	// Resolver replaces net.DefaultResolver (tests).
	Resolver netguard.Resolver
	// Servers are the proxy identities of image: servers (servers.go).
	Servers []ServerIdentity
}

// Approvals reports hosts a human approved for a session (the escalation
// store's "approve similar for this session").
type Approvals interface {
	Allowed(sessionID string, h netpolicy.Host, port int) bool
}

// Deps are the proxy's collaborators.
type Deps struct {
	Auth       session.Authenticator // required: agent token → session
	Sink       audit.Sink            // required: one EgressEvent per request or tunnel
	Escalator  escalation.Escalator  // for EscalateUnknownHosts; default escalation.Deny{}
	Approvals  Approvals             // optional
	Secrets    SecretSource          // optional: scan what leaves for secrets (docs/egress.md)
	Registerer prometheus.Registerer // optional: nil leaves the metrics unregistered
	Logger     *slog.Logger          // optional
	Tracer     trace.Tracer          // optional: nil is package tracing's (trace.go)
}

// Proxy is the agent's egress proxy. Create it with NewProxy and run it with
// Serve.
type Proxy struct {
	cfg       ProxyConfig
	guard     *netguard.Guard
	auth      session.Authenticator
	sink      audit.Sink
	escalator escalation.Escalator
	approvals Approvals
	secrets   SecretSource
	log       *slog.Logger
	tracer    trace.Tracer
	// tracingOff: tracer is the no-op tracer; requests start no span.
	tracingOff bool
	metrics    *metrics
	gp         *goproxy.ProxyHttpServer
	ports      map[int]bool

	rec *gate.Recorder // writes each request's record; Down: refuse new egress

	mu       sync.Mutex
	draining bool                               // set once by Serve; after it no request joins inflight
	perSess  map[string]int                     // open tunnels/requests per session
	approved map[approvalKey]string             // hosts a human approved (value: rule text)
	pending  map[approvalKey]*pendingEscalation // escalations in flight
	inflight sync.WaitGroup
	conns    map[net.Conn]struct{} // hijacked connections, closed when a drain times out

	bodies        *semaphore.Weighted              // request-body bytes buffered for secret scanning
	limiter       atomic.Pointer[netlimit.Limiter] // set by Serve
	authFails     *authFailures                    // unauthenticated requests, written as one row per source per minute
	authAggWindow time.Duration                    // authAggWindow; shorter in tests
	servers       serverIdentities                 // image: servers' proxy identities
}

// NewProxy validates c and builds the proxy.
func NewProxy(c ProxyConfig, d Deps) (*Proxy, error) {
	if d.Auth == nil {
		return nil, errors.New("creating egress proxy: no authenticator")
	}
	if d.Sink == nil {
		return nil, errors.New("creating egress proxy: no audit sink")
	}
	setDefault(&c.MaxTunnelsPerSession, DefaultMaxTunnelsPerSession)
	setDefault(&c.ConnectTimeout, DefaultConnectTimeout)
	setDefault(&c.IdleTimeout, DefaultIdleTimeout)
	setDefault(&c.ReadHeaderTimeout, DefaultReadHeaderTimeout)
	setDefault(&c.MaxHeaderBytes, DefaultMaxHeaderBytes)
	setDefault(&c.DrainTimeout, DefaultDrainTimeout)
	setDefault(&c.MaxConnections, DefaultMaxConnections)
	if c.MaxScanBodyBytes == 0 {
		c.MaxScanBodyBytes = DefaultMaxScanBodyBytes
	}
	setDefault(&c.MaxConnectionsPerClient, min(DefaultMaxConnsPerClient, c.MaxConnections))
	if c.MaxConnectionsPerClient > c.MaxConnections {
		return nil, fmt.Errorf("creating egress proxy: max_connections_per_client (%d) exceeds max_connections (%d)", c.MaxConnectionsPerClient, c.MaxConnections)
	}
	if len(c.AllowedPorts) == 0 {
		c.AllowedPorts = DefaultAllowedPorts
	}
	if c.MaxTunnelsPerSession < 0 || c.ConnectTimeout < 0 || c.IdleTimeout < 0 || c.ReadHeaderTimeout < 0 ||
		c.MaxHeaderBytes < 0 || c.DrainTimeout < 0 || c.MaxConnections < 0 || c.MaxConnectionsPerClient < 0 || c.MaxScanBodyBytes < 0 {
		return nil, errors.New("creating egress proxy: negative limit")
	}
	ports := make(map[int]bool, len(c.AllowedPorts))
	for _, port := range c.AllowedPorts {
		if port < 1 || port > 65535 {
			return nil, fmt.Errorf("creating egress proxy: allowed port %d out of range", port)
		}
		ports[port] = true
	}
	g, err := netguard.NewGuard(netguard.GuardConfig{Allow: c.Allow, Addresses: c.Addresses, Resolver: c.Resolver, DialTimeout: c.ConnectTimeout, KeepAlive: upstreamKeepAlive})
	if err != nil {
		return nil, fmt.Errorf("creating egress proxy: %w", err)
	}
	m, err := newMetrics(d.Registerer)
	if err != nil {
		return nil, fmt.Errorf("creating egress proxy: %w", err)
	}
	srvIDs, err := newServerIdentities(c.Servers)
	if err != nil {
		return nil, fmt.Errorf("creating egress proxy: %w", err)
	}
	p := &Proxy{
		cfg: c, guard: g, auth: d.Auth, sink: d.Sink, rec: gate.NewRecorder(d.Sink), escalator: d.Escalator, approvals: d.Approvals, secrets: d.Secrets,
		log: d.Logger, tracer: d.Tracer, metrics: m, ports: ports, servers: srvIDs,
		perSess: map[string]int{}, approved: map[approvalKey]string{}, pending: map[approvalKey]*pendingEscalation{},
		conns: map[net.Conn]struct{}{}, authFails: newAuthFailures(), authAggWindow: authAggWindow,
		bodies: semaphore.NewWeighted(max(maxBufferedBodies, c.MaxScanBodyBytes+1)),
	}
	if p.escalator == nil {
		p.escalator = escalation.Deny{}
	}
	if p.log == nil {
		p.log = slog.New(slog.DiscardHandler)
	}
	if p.tracer == nil {
		p.tracer = tracing.Tracer(tracerScope)
	}
	p.tracingOff = tracing.Off(p.tracer)
	for _, pat := range c.Allow {
		if pat.String() == "*" {
			p.log.Warn(`egress: allowed_hosts contains "*": every host name may be reached (addresses are still checked)`)
		}
	}
	p.gp = p.newGoproxy()
	return p, nil
}

func setDefault[T int | time.Duration](v *T, def T) {
	if *v == 0 {
		*v = def
	}
}

// newGoproxy wires goproxy so that nothing is allowed unless our handler
// decided so: our CONNECT and request handlers decide, a catch-all at the end
// of each chain refuses whatever they did not allow (goproxy itself allows
// when no handler decides), and every dial goes through the pinned dialer.
func (p *Proxy) newGoproxy() *goproxy.ProxyHttpServer {
	gp := goproxy.NewProxyHttpServer()
	gp.Logger = slogPrintf{p.log}
	gp.Verbose = false
	gp.KeepAcceptEncoding = true // relay bodies unchanged
	gp.AllowHTTP2 = false
	gp.NonproxyHandler = http.HandlerFunc(p.serveNonProxy)
	// Replace the default transport: it skips TLS verification and honours
	// HTTP_PROXY from the environment.
	gp.Tr = &http.Transport{
		Proxy:                  nil,
		DialContext:            p.pinnedDial,
		ForceAttemptHTTP2:      false,
		DisableCompression:     true,
		MaxResponseHeaderBytes: int64(p.cfg.MaxHeaderBytes) * 4,
		ResponseHeaderTimeout:  p.cfg.IdleTimeout,
		IdleConnTimeout:        30 * time.Second,
		MaxIdleConnsPerHost:    4,
	}
	gp.ConnectDial = nil
	gp.ConnectDialWithReq = func(req *http.Request, network, addr string) (net.Conn, error) {
		return p.pinnedDial(req.Context(), network, addr)
	}
	gp.OnRequest().HandleConnectFunc(p.handleConnect)
	gp.OnRequest().HandleConnectFunc(p.rejectConnect) // catch-all
	gp.OnRequest().DoFunc(p.handleRequest)
	gp.OnRequest().DoFunc(p.rejectRequest) // catch-all
	gp.OnResponse().DoFunc(p.handleResponse)
	return gp
}

// TCP keep-alive probes cost system calls on every connection (Go's default
// sets four options), and a tunnel's system calls are most of its cost.
// Towards the agent the proxy sends none: every state of a client
// connection has its own timer (ReadHeaderTimeout before a request head,
// IdleTimeout between requests and on a tunnel), and the agent reaches the
// gateway without a NAT that could forget it (the same host, a pod network,
// Compose's bridge, whose conntrack keeps established flows for days).
// Towards upstreams probes are kept, for the NATs on the way out (cloud NAT
// gateways drop idle flows after 4-6 minutes, less than a long
// idle_timeout): the first after 60 s of silence, then at the host's
// interval (net.ipv4.tcp_keepalive_intvl, 75 s by default), two options
// set instead of four. Dead peers are not what they are for: the idle
// watchdog cuts a silent tunnel.
var upstreamKeepAlive = net.KeepAliveConfig{Enable: true, Idle: 60 * time.Second, Interval: -1, Count: -1}

// ConnLimits returns the proxy listener's connection caps as NewProxy applies them (the
// defaults for zero fields), for the gateway's open-file plan (netlimit.PlanFiles).
func (c ProxyConfig) ConnLimits() netlimit.Limits {
	l := netlimit.Limits{MaxConns: c.MaxConnections, MaxPerClient: c.MaxConnectionsPerClient}
	if l.MaxConns == 0 {
		l.MaxConns = DefaultMaxConnections
	}
	if l.MaxPerClient == 0 {
		l.MaxPerClient = min(DefaultMaxConnsPerClient, l.MaxConns)
	}
	return l
}

// ListenConfig returns the configuration of the proxy's listener: accepted
// connections get no TCP keep-alive probes (upstreamKeepAlive says why).
func ListenConfig() net.ListenConfig { return net.ListenConfig{KeepAlive: -1} }

// Serve accepts proxy clients on ln until ctx ends, then stops accepting,
// waits up to DrainTimeout for open requests and tunnels, closes the ones
// still open, and returns. It returns nil after a shutdown caused by ctx.
func (p *Proxy) Serve(ctx context.Context, ln net.Listener) error {
	lim, err := netlimit.New(netlimit.Limits{MaxConns: p.cfg.MaxConnections, MaxPerClient: p.cfg.MaxConnectionsPerClient})
	if err != nil {
		return fmt.Errorf("serving egress proxy: %w", err)
	}
	p.limiter.Store(lim)
	srv := &http.Server{
		Handler:           p,
		ReadHeaderTimeout: p.cfg.ReadHeaderTimeout,
		IdleTimeout:       p.cfg.IdleTimeout,
		MaxHeaderBytes:    p.cfg.MaxHeaderBytes,
		ErrorLog:          slog.NewLogLogger(p.log.Handler(), slog.LevelDebug),
		ConnContext:       headConnContext,
		ConnState:         lim.ConnState,
	}
	// The limiter caps connections per client and in all; a connection that has sent no
	// request head (or sits idle between requests) gives way to a new one, so idle
	// connections that never authenticate cannot keep a real CONNECT waiting.
	hl := newHeadListener(lim.Listener(ln), p.cfg.MaxHeaderBytes+4096, 0)
	// The front accepts and serves CONNECTs; the server gets every other
	// connection from it (front.go).
	fr := newFront(p, hl, lim)
	flushCtx, stopFlush := context.WithCancel(context.Background())
	flushed := make(chan struct{})
	go func() { defer close(flushed); p.runAuthFlusher(flushCtx, p.authAggWindow) }()
	defer func() { stopFlush(); <-flushed }()
	errc := make(chan error, 1)
	frontc := make(chan error, 1)
	go func() { errc <- srv.Serve(fr.handoff) }()
	go func() { frontc <- fr.serve() }()
	select {
	case err := <-errc:
		fr.close()
		<-frontc
		return fmt.Errorf("serving egress proxy: %w", err)
	case err := <-frontc:
		fr.close()
		_ = srv.Close()
		<-errc
		if err == nil {
			err = errors.New("listener closed")
		}
		return fmt.Errorf("serving egress proxy: %w", err)
	case <-ctx.Done():
	}
	p.mu.Lock()
	p.draining = true
	p.mu.Unlock()
	drainCtx, cancel := context.WithTimeout(context.Background(), p.cfg.DrainTimeout)
	defer cancel()
	fr.close() // stops accepting; closes connections that sent no head yet
	<-frontc
	_ = srv.Shutdown(drainCtx) // waits for non-hijacked requests
	done := make(chan struct{})
	go func() { p.inflight.Wait(); close(done) }()
	select {
	case <-done:
	case <-drainCtx.Done():
		p.log.Warn("egress: drain timeout; closing open tunnels")
		p.closeTunnels()
		fr.closeAll()
		_ = srv.Close()
		<-done
	}
	if err := <-errc; err != nil && !errors.Is(err, http.ErrServerClosed) && !errors.Is(err, errFrontClosed) {
		return fmt.Errorf("serving egress proxy: %w", err)
	}
	return nil
}

func (p *Proxy) trackConn(c net.Conn) (untrack func()) {
	p.mu.Lock()
	p.conns[c] = struct{}{}
	p.mu.Unlock()
	return func() {
		p.mu.Lock()
		delete(p.conns, c)
		p.mu.Unlock()
	}
}

func (p *Proxy) closeTunnels() {
	p.mu.Lock()
	defer p.mu.Unlock()
	for c := range p.conns {
		_ = c.Close()
	}
}

// ServeHTTP implements http.Handler: it follows the request from arrival to
// its audit event, around goproxy.
func (p *Proxy) ServeHTTP(w http.ResponseWriter, r *http.Request) {
	kind := "http"
	if r.Method == http.MethodConnect {
		kind = "connect"
	}
	st := newState(kind, r.Method)
	st.client = clientHost(r.RemoteAddr)
	ctx := p.startSpan(r.Context(), st)
	p.mu.Lock()
	draining := p.draining
	if !draining {
		p.inflight.Add(1)
	}
	p.mu.Unlock()
	if draining {
		st.deny(ruleShutdown, "the proxy is shutting down")
		w.Header().Set("Connection", "close")
		http.Error(w, "ironcurtain egress: the proxy is shutting down", http.StatusServiceUnavailable)
		p.finish(st)
		return
	}
	p.metrics.active.Inc()
	defer func() {
		if !st.detached { // else the tunnel's goroutine ends it (hijack)
			p.end(st)
		}
	}()
	rw := &respWriter{ResponseWriter: w, st: st, idle: p.cfg.IdleTimeout, closeConn: kind == "http"}
	if kind == "http" && r.Body != nil && r.Body != http.NoBody {
		r.Body = &idleBody{ReadCloser: r.Body, rc: http.NewResponseController(w), idle: p.cfg.IdleTimeout, n: &st.up}
	}
	p.gp.ServeHTTP(rw, r.WithContext(withState(ctx, st)))
}

// end ends a request or tunnel that ServeHTTP counted: its audit event, then
// the drain's count.
func (p *Proxy) end(st *reqState) {
	p.metrics.active.Dec()
	p.finish(st)
	p.inflight.Done()
}

// serveNonProxy answers origin-form requests ("GET / HTTP/1.1"): this port
// only proxies.
func (p *Proxy) serveNonProxy(w http.ResponseWriter, r *http.Request) {
	if st := stateFrom(r.Context()); st != nil {
		st.deny(ruleRequest, "not a proxy request (origin-form request target)")
	}
	http.Error(w, "ironcurtain egress: this is a proxy; send absolute-form requests or CONNECT", http.StatusBadRequest)
}

// respWriter counts response bytes, bounds each write by the idle timeout,
// closes the client connection after a plain HTTP response (so that the
// next request's head can be checked raw), and keeps Hijack for CONNECT.
type respWriter struct {
	http.ResponseWriter
	st        *reqState
	idle      time.Duration
	closeConn bool
	wrote     bool
}

func (w *respWriter) WriteHeader(code int) {
	if !w.wrote {
		w.wrote = true
		if w.closeConn {
			w.Header().Set("Connection", "close")
		}
	}
	w.ResponseWriter.WriteHeader(code)
}

func (w *respWriter) Write(b []byte) (int, error) {
	if !w.wrote {
		w.WriteHeader(http.StatusOK)
	}
	_ = http.NewResponseController(w.ResponseWriter).SetWriteDeadline(time.Now().Add(w.idle))
	n, err := w.ResponseWriter.Write(b)
	w.st.down.Add(int64(n))
	return n, err
}

func (w *respWriter) Flush() {
	_ = http.NewResponseController(w.ResponseWriter).Flush()
}

// Hijack hands the client connection over (for CONNECT). Bytes the client
// sent after its request head, which net/http may already have buffered,
// stay readable: goproxy drops the bufio.ReadWriter, so the connection
// returned reads them first.
func (w *respWriter) Hijack() (net.Conn, *bufio.ReadWriter, error) {
	c, brw, err := http.NewResponseController(w.ResponseWriter).Hijack()
	if err != nil {
		return nil, nil, err
	}
	if brw != nil && brw.Reader.Buffered() > 0 {
		return &bufConn{Conn: c, r: brw.Reader}, brw, nil
	}
	return c, brw, nil
}

// bufConn reads what net/http buffered before reading the connection.
type bufConn struct {
	net.Conn
	r *bufio.Reader
}

func (c *bufConn) Read(b []byte) (int, error) { return c.r.Read(b) }

// NetConn returns the connection under the buffer; call takeBuffered first.
func (c *bufConn) NetConn() net.Conn { return c.Conn }

// takeBuffered returns the bytes still buffered (and consumes them).
func (c *bufConn) takeBuffered() []byte {
	n := c.r.Buffered()
	if n == 0 {
		return nil
	}
	b, _ := c.r.Peek(n)
	out := append([]byte(nil), b...)
	_, _ = c.r.Discard(n)
	return out
}

// Unwrap lets http.ResponseController reach the server's writer.
func (w *respWriter) Unwrap() http.ResponseWriter { return w.ResponseWriter }

// idleBody bounds each read of a request body by the idle timeout and
// counts the bytes.
type idleBody struct {
	io.ReadCloser
	rc   *http.ResponseController
	idle time.Duration
	n    *atomic.Int64
}

func (b *idleBody) Read(p []byte) (int, error) {
	_ = b.rc.SetReadDeadline(time.Now().Add(b.idle))
	n, err := b.ReadCloser.Read(p)
	b.n.Add(int64(n))
	return n, err
}

// slogPrintf adapts goproxy's Printf logger to slog (debug level: goproxy
// logs per-connection noise; our own decisions are logged and audited).
type slogPrintf struct{ l *slog.Logger }

func (s slogPrintf) Printf(format string, v ...any) {
	if s.l.Enabled(context.Background(), slog.LevelDebug) {
		s.l.Debug("goproxy: " + fmt.Sprintf(format, v...))
	}
}
