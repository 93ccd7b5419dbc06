package external

import (
	"context"
	"crypto/tls"
	"crypto/x509"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"net"
	"net/http"
	"net/http/httptrace"
	"net/netip"
	"sync"
	"time"

	"github.com/google/uuid"
	"github.com/mark3labs/mcp-go/client/transport"
	"github.com/mark3labs/mcp-go/mcp"

	"ironcurtain.dev/gateway/internal/audit"
	"ironcurtain.dev/gateway/internal/netguard"
	"ironcurtain.dev/gateway/internal/servers"
	"ironcurtain.dev/gateway/netpolicy"
)

// EgressKind is the kind of the egress events recorded for the requests
// made to a url: server.
const EgressKind = "mcp-url"

// Limits of the url: transport that are not configurable.
const (
	remoteResponseHeaderBytes = 64 << 10
	remoteTLSHandshakeTimeout = 10 * time.Second
	remoteIdleTimeout         = 90 * time.Second
	// MaxRemoteResponseBytes caps one HTTP response of a url: server (a
	// JSON answer, or an SSE stream over its whole life): past it the read
	// fails and the run ends (the hub caps results far lower anyway).
	MaxRemoteResponseBytes = 64 << 20
)

// ErrResponseTooLarge is the read error past MaxRemoteResponseBytes.
var ErrResponseTooLarge = errors.New("the url: server's response is larger than the gateway accepts")

// Dialer dials every connection of a url: server: the Guard
// (*netguard.Guard), which checks the host against the server's allowlist
// before any lookup, resolves once, checks every address (SSRF-safe) and
// dials exactly a checked address.
type Dialer interface {
	DialContext(ctx context.Context, network, addr string) (net.Conn, error)
}

// HTTPConfig is a url: server: a remote or sidecar MCP server reached over
// streamable HTTP.
type HTTPConfig struct {
	// Name is the server name; it is in every egress record.
	Name string
	// URL is the server's MCP endpoint (http or https).
	URL netpolicy.URL
	// Headers are sent with every request (an Authorization bearer token,
	// an API key header). Their values are secrets: they are never logged,
	// recorded, or put in an error.
	Headers map[string]string
	// RootCAs verifies the server's certificate; nil uses the system roots.
	RootCAs *x509.CertPool
}

// HTTPDeps are the url: transport's collaborators.
type HTTPDeps struct {
	// Dialer dials every connection (required; a *netguard.Guard).
	Dialer Dialer
	// Sink receives one EgressEvent per HTTP request (required).
	Sink audit.Sink
	// Logger receives the client's own messages (nil discards); they
	// never carry a header.
	Logger *slog.Logger
	// Now and NewID are for tests (defaults: time.Now, uuid).
	Now   func() time.Time
	NewID func() string
}

// HTTPTransport is the url: mode: each run is one streamable-HTTP MCP
// session. Every connection is dialed through the Dialer, redirects are
// never followed, no environment proxy is used, and every request is
// recorded as an audit.EgressEvent of kind EgressKind naming the server and,
// during a tool call, the call's id.
type HTTPTransport struct {
	cfg    HTTPConfig
	log    *slog.Logger
	client *http.Client
	rt     *http.Transport
}

var _ Transport = (*HTTPTransport)(nil)

// ErrRedirect is returned when a url: server answers with a redirect: the
// gateway never follows one (it could lead anywhere, a private address
// included); configure the URL the server answers at.
var ErrRedirect = errors.New("the url: server answered with a redirect, which the gateway does not follow")

// NewHTTPTransport returns the transport of a url: server.
func NewHTTPTransport(cfg HTTPConfig, d HTTPDeps) (*HTTPTransport, error) {
	if cfg.Name == "" {
		return nil, errors.New("creating url: transport: a name is required")
	}
	if cfg.URL.Host.IsZero() || (cfg.URL.Scheme != "http" && cfg.URL.Scheme != "https") {
		return nil, fmt.Errorf("creating url: transport for %s: an http or https URL is required", cfg.Name)
	}
	if d.Dialer == nil {
		return nil, fmt.Errorf("creating url: transport for %s: a dialer (the egress guard) is required", cfg.Name)
	}
	if d.Sink == nil {
		return nil, fmt.Errorf("creating url: transport for %s: an audit sink is required", cfg.Name)
	}
	if d.Logger == nil {
		d.Logger = slog.New(slog.DiscardHandler)
	}
	if d.Now == nil {
		d.Now = time.Now
	}
	if d.NewID == nil {
		d.NewID = func() string { return uuid.NewString() }
	}
	rt := &http.Transport{
		Proxy:                  nil,
		DialContext:            d.Dialer.DialContext,
		ForceAttemptHTTP2:      true,
		TLSHandshakeTimeout:    remoteTLSHandshakeTimeout,
		MaxResponseHeaderBytes: remoteResponseHeaderBytes,
		IdleConnTimeout:        remoteIdleTimeout,
		TLSClientConfig:        &tls.Config{RootCAs: cfg.RootCAs, MinVersion: tls.VersionTLS12},
	}
	rec := &recorder{name: cfg.Name, base: rt, sink: d.Sink, now: d.Now, newID: d.NewID}
	t := &HTTPTransport{cfg: cfg, log: d.Logger, rt: rt, client: &http.Client{
		Transport:     rec,
		CheckRedirect: func(*http.Request, []*http.Request) error { return ErrRedirect },
	}}
	return t, nil
}

// Open implements Transport: it starts one streamable-HTTP session (the
// initialize request is sent by the server's client).
func (t *HTTPTransport) Open(ctx context.Context) (*Conn, error) {
	headers := make(map[string]string, len(t.cfg.Headers))
	for k, v := range t.cfg.Headers {
		headers[k] = v
	}
	st, err := transport.NewStreamableHTTP(t.cfg.URL.String(),
		transport.WithHTTPBasicClient(t.client),
		transport.WithHTTPHeaders(headers),
		transport.WithContinuousListening(),
		transport.WithHTTPLogger(t.log),
	)
	if err != nil {
		// The error names the URL at most, never a header.
		return nil, fmt.Errorf("creating the streamable-HTTP client: %w", err)
	}
	w := &watched{Interface: st, done: make(chan struct{})}
	return &Conn{
		MCP:  w,
		Done: w.done,
		Err:  w.reason,
		Stop: func() { w.end(errors.New("stopped")); _ = st.Close() },
	}, nil
}

// Close implements Transport.
func (t *HTTPTransport) Close() error {
	t.rt.CloseIdleConnections()
	return nil
}

// watched is a streamable-HTTP client whose run ends (Done closes) when a
// request fails below JSON-RPC: the session was lost (404), the server is
// unreachable or answered with an HTTP error. The server then starts a new
// session after its back-off.
type watched struct {
	transport.Interface
	once sync.Once
	done chan struct{}
	err  error
}

func (w *watched) end(err error) {
	w.once.Do(func() {
		w.err = err
		close(w.done)
	})
}

func (w *watched) reason() error {
	<-w.done
	return fmt.Errorf("the remote session ended: %w", w.err)
}

// SendRequest passes the request on; a failure that is not the caller's
// cancellation ends the run and is returned as a *transport.Error.
func (w *watched) SendRequest(ctx context.Context, req transport.JSONRPCRequest) (*transport.JSONRPCResponse, error) {
	resp, err := w.Interface.SendRequest(ctx, req)
	if err != nil && ctx.Err() == nil {
		w.end(err)
		var te *transport.Error
		if !errors.As(err, &te) {
			err = transport.NewError(err)
		}
	}
	return resp, err
}

// SendNotification passes the notification on (a failure ends the run).
func (w *watched) SendNotification(ctx context.Context, n mcp.JSONRPCNotification) error {
	err := w.Interface.SendNotification(ctx, n)
	if err != nil && ctx.Err() == nil {
		w.end(err)
	}
	return err
}

// recorder records every request to a url: server as an egress event.
type recorder struct {
	max   int64 // response cap (0: MaxRemoteResponseBytes; tests)
	name  string
	base  http.RoundTripper
	sink  audit.Sink
	now   func() time.Time
	newID func() string
}

// RoundTrip implements http.RoundTripper. The event is written once the
// response headers are in (or the request failed); a response whose record
// cannot be written is dropped and the request fails.
func (r *recorder) RoundTrip(req *http.Request) (*http.Response, error) {
	ctx := req.Context()
	start := r.now()
	h, port, perr := netpolicy.ParseAuthority(req.URL.Host, defaultPort(req.URL.Scheme))
	ev := servers.NewEgressEvent(ctx, servers.Egress{ID: r.newID(), Start: start, Kind: EgressKind, Method: req.Method, Host: h.String(), Port: port})
	ev.Rule, ev.Reason = "servers."+r.name+".url", "request to the url: MCP server "+r.name
	if req.ContentLength > 0 {
		ev.BytesUp = req.ContentLength
	}
	if perr != nil {
		ev.Decision, ev.Error = "deny", "unparsable host"
		return nil, r.fail(ctx, ev, start, fmt.Errorf("request to %s: parsing its host: %w", r.name, perr))
	}
	var remote net.Addr
	req = req.WithContext(httptrace.WithClientTrace(ctx, &httptrace.ClientTrace{
		GotConn: func(info httptrace.GotConnInfo) { remote = info.Conn.RemoteAddr() },
	}))
	resp, err := r.base.RoundTrip(req)
	if remote != nil {
		if ap, perr := netip.ParseAddrPort(remote.String()); perr == nil {
			ev.ResolvedIP = ap.Addr().Unmap().String()
		}
	}
	if err != nil {
		ev.Decision = "allow"
		if errors.Is(err, netpolicy.ErrAddressDenied) || isHostRefusal(err) {
			ev.Decision, ev.Reason = "deny", "the url: server's host or address is not allowed"
		}
		ev.Error = cut(err.Error(), maxErrorText)
		return nil, r.fail(ctx, ev, start, err)
	}
	ev.Decision = "allow"
	ev.Duration = r.now().Sub(start)
	if resp.StatusCode >= 300 && resp.StatusCode < 400 {
		ev.Error = "redirect refused"
	}
	if err := r.sink.Record(context.WithoutCancel(ctx), ev); err != nil {
		resp.Body.Close()
		return nil, fmt.Errorf("recording the egress event of a request to %s: %w", r.name, err)
	}
	resp.Body = &cappedBody{ReadCloser: resp.Body, left: r.maxBytes()}
	return resp, nil
}

func (r *recorder) maxBytes() int64 {
	if r.max > 0 {
		return r.max
	}
	return MaxRemoteResponseBytes
}

// cappedBody fails a read past its budget.
type cappedBody struct {
	io.ReadCloser
	left int64
}

func (b *cappedBody) Read(p []byte) (int, error) {
	if b.left <= 0 {
		return 0, ErrResponseTooLarge
	}
	if int64(len(p)) > b.left {
		p = p[:b.left]
	}
	n, err := b.ReadCloser.Read(p)
	b.left -= int64(n)
	return n, err
}

// fail records ev for a request that got no response and returns err (or
// the recording failure).
func (r *recorder) fail(ctx context.Context, ev *audit.EgressEvent, start time.Time, err error) error {
	ev.Duration = r.now().Sub(start)
	if rerr := r.sink.Record(context.WithoutCancel(ctx), ev); rerr != nil {
		return fmt.Errorf("recording the egress event of a request to %s: %w (the request failed: %w)", r.name, rerr, err)
	}
	return err
}

func defaultPort(scheme string) int {
	if scheme == "https" {
		return 443
	}
	return 80
}

// isHostRefusal reports whether err is the Guard refusing the host (not on
// the allowlist) or an address it resolved to.
func isHostRefusal(err error) bool {
	var he *netguard.HostError
	return errors.As(err, &he) || errors.Is(err, netguard.ErrHostNotAllowed) || errors.Is(err, netguard.ErrUncheckedAddress)
}
