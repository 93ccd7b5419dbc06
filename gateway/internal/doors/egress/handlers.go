package egress

import (
	"context"
	"errors"
	"fmt"
	"net"
	"net/http"
	"net/http/httptrace"
	"net/netip"
	"net/url"
	"time"

	"github.com/elazarl/goproxy"

	"ironcurtain.dev/gateway/internal/netguard"
	"ironcurtain.dev/gateway/netpolicy"
)

// errNotDecided is returned by the pinned dialer for a request no handler
// allowed, or for an address other than the one decided.
var errNotDecided = errors.New("egress: dial refused: no decision for this destination")

// handleConnect decides a CONNECT request. The target is the raw request
// target, parsed with the strict authority parser; a port is required.
func (p *Proxy) handleConnect(_ string, ctx *goproxy.ProxyCtx) (*goproxy.ConnectAction, string) {
	r := ctx.Req
	st := stateFrom(r.Context())
	if st == nil {
		return nil, "" // the catch-all refuses
	}
	h, port, err := netpolicy.ParseAuthority(r.RequestURI, 0)
	if err != nil {
		st.fail(err)
		ref := p.refuse(st, &refusal{http.StatusBadRequest, ruleRequest, "invalid CONNECT target (host:port required)"})
		ctx.Resp = refusalResponse(r, st, ref)
		return goproxy.RejectConnect, r.RequestURI
	}
	// The scan sees the host as it arrived: lower-casing hides the
	// case-sensitive formats.
	st.rawHost = netpolicy.AuthorityHost(r.RequestURI)
	if ref := p.decide(r.Context(), r, st, h, port, scanHost(h, st.rawHost)); ref != nil {
		ctx.Resp = refusalResponse(r, st, ref)
		return goproxy.RejectConnect, h.HostPort(port)
	}
	return &goproxy.ConnectAction{Action: goproxy.ConnectHijack, Hijack: p.hijack}, h.HostPort(port)
}

// rejectConnect ends the CONNECT chain: goproxy accepts a tunnel when no
// handler decides, so this refuses whatever handleConnect did not allow.
func (p *Proxy) rejectConnect(_ string, ctx *goproxy.ProxyCtx) (*goproxy.ConnectAction, string) {
	st := stateFrom(ctx.Req.Context())
	if st == nil {
		st = newState("connect", ctx.Req.Method)
	}
	ref := p.refuse(st, &refusal{http.StatusForbidden, ruleCatchAll, "no rule allowed this request"})
	ctx.Resp = refusalResponse(ctx.Req, st, ref)
	return goproxy.RejectConnect, ""
}

// handleRequest decides a plain HTTP (absolute-form) request.
func (p *Proxy) handleRequest(r *http.Request, _ *goproxy.ProxyCtx) (*http.Request, *http.Response) {
	st := stateFrom(r.Context())
	if st == nil {
		return r, nil // the catch-all refuses
	}
	u, err := netpolicy.ParseURL(r.RequestURI)
	if err != nil {
		st.fail(err)
		return r, refusalResponse(r, st, p.refuse(st, &refusal{http.StatusBadRequest, ruleRequest, "invalid request URL"}))
	}
	st.host, st.port = u.Host, u.Port
	if u.Scheme != "http" {
		return r, refusalResponse(r, st, p.refuse(st, &refusal{http.StatusBadRequest, ruleRequest, "use CONNECT for https"}))
	}
	hostHeader, ref := p.checkHostHeader(r, u)
	if ref != nil {
		return r, refusalResponse(r, st, p.refuse(st, ref))
	}
	if r.Header.Get("Upgrade") != "" {
		return r, refusalResponse(r, st, p.refuse(st, &refusal{http.StatusForbidden, ruleRequest, "protocol upgrades are only relayed through CONNECT"}))
	}
	// The host as it arrived, for the scan (ParseURL checked that Go's
	// parser reads the same authority, so its Host is the raw text).
	rawHosts := []string{netpolicy.AuthorityHost(hostHeader)}
	if gu, err := url.Parse(r.RequestURI); err == nil {
		rawHosts = append(rawHosts, netpolicy.AuthorityHost(gu.Host))
	}
	if ref := p.decide(r.Context(), r, st, u.Host, u.Port, p.scanRequest(r, st, u, rawHosts)); ref != nil {
		return r, refusalResponse(r, st, ref)
	}
	// Forward to the canonical authority we decided on.
	r.URL.Host = u.Host.HostPort(u.Port)
	r.Host = u.Host.URLHost()
	if u.Port != 80 {
		r.Host = u.Host.HostPort(u.Port)
	}
	trace := &httptrace.ClientTrace{GotConn: func(info httptrace.GotConnInfo) {
		if ap, err := netip.ParseAddrPort(info.Conn.RemoteAddr().String()); err == nil {
			st.setResolved(ap.Addr().Unmap())
		}
	}}
	return r.WithContext(httptrace.WithClientTrace(r.Context(), trace)), nil
}

// checkHostHeader refuses an absolute-form request whose Host header names
// another authority than its URL (read from the raw head: net/http drops it).
// It returns the Host header as it arrived ("" when there is none), for the
// secret scan.
func (p *Proxy) checkHostHeader(r *http.Request, u netpolicy.URL) (string, *refusal) {
	hc, _ := r.Context().Value(headConnKey{}).(*headConn)
	if hc == nil {
		return "", &refusal{http.StatusBadRequest, ruleRequest, "request head unavailable"}
	}
	head, ok := hc.takeHead()
	if !ok {
		return "", &refusal{http.StatusBadRequest, ruleRequest, "one request per connection"}
	}
	hosts := rawHost(head)
	switch len(hosts) {
	case 0:
		return "", nil // HTTP/1.0 without Host: the URL is the only authority
	case 1:
	default:
		return "", &refusal{http.StatusBadRequest, ruleRequest, "several Host headers"}
	}
	h, port, err := netpolicy.ParseAuthority(hosts[0], 80)
	if err != nil || h != u.Host || port != u.Port {
		return "", &refusal{http.StatusBadRequest, ruleRequest, "the Host header does not match the request URL"}
	}
	return hosts[0], nil
}

// rejectRequest ends the request chain: it refuses every request that
// handleRequest did not allow.
func (p *Proxy) rejectRequest(r *http.Request, _ *goproxy.ProxyCtx) (*http.Request, *http.Response) {
	st := stateFrom(r.Context())
	if st != nil && st.isAllowed() {
		return r, nil
	}
	if st == nil {
		st = newState("http", r.Method)
	}
	return r, refusalResponse(r, st, p.refuse(st, &refusal{http.StatusForbidden, ruleCatchAll, "no rule allowed this request"}))
}

// handleResponse replaces goproxy's answer to a failed round trip (a 500
// carrying the raw error) with a short, safe one; the detail goes to audit.
func (p *Proxy) handleResponse(resp *http.Response, ctx *goproxy.ProxyCtx) *http.Response {
	if resp != nil {
		return resp
	}
	st := stateFrom(ctx.Req.Context())
	if st == nil {
		st = newState("http", ctx.Req.Method)
	}
	st.fail(ctx.Error)
	return refusalResponse(ctx.Req, st, p.dialRefusal(st, ctx.Error))
}

// dialRefusal classifies a dial or round-trip error for the client.
func (p *Proxy) dialRefusal(st *reqState, err error) *refusal {
	var ae *netpolicy.AddressError
	switch {
	case errors.As(err, &ae):
		return p.refuse(st, addressRefusal(err))
	case errors.Is(err, netguard.ErrResolve):
		return &refusal{http.StatusBadGateway, ruleDial, "the host does not resolve"}
	case errors.Is(err, context.DeadlineExceeded), isTimeout(err):
		return &refusal{http.StatusGatewayTimeout, ruleDial, "the upstream connection timed out"}
	default:
		return &refusal{http.StatusBadGateway, ruleDial, "the upstream connection failed"}
	}
}

func isTimeout(err error) bool {
	var ne net.Error
	return errors.As(err, &ne) && ne.Timeout()
}

// pinnedDial is the only dialer goproxy has (Tr.DialContext and
// ConnectDialWithReq). It dials only the host and port that the request's
// decision allowed, resolving once through the Guard and connecting to the
// checked address; anything else is refused.
func (p *Proxy) pinnedDial(ctx context.Context, network, addr string) (net.Conn, error) {
	st := stateFrom(ctx)
	if st == nil || !st.isAllowed() {
		return nil, errNotDecided
	}
	h, port, err := netpolicy.ParseAuthority(addr, 0)
	if err != nil || h != st.host || port != st.port {
		return nil, fmt.Errorf("%w (asked for %q)", errNotDecided, addr)
	}
	start := time.Now()
	c, a, err := p.guard.DialHost(ctx, network, h, port)
	p.metrics.dial.Observe(time.Since(start).Seconds())
	if err != nil {
		return nil, err
	}
	st.setResolved(a)
	return &idleConn{Conn: c, idle: p.cfg.IdleTimeout}, nil
}

// idleConn bounds every read and write of an upstream HTTP connection by the
// idle timeout.
type idleConn struct {
	net.Conn
	idle time.Duration
}

func (c *idleConn) Read(b []byte) (int, error) {
	_ = c.Conn.SetReadDeadline(time.Now().Add(c.idle))
	return c.Conn.Read(b)
}

func (c *idleConn) Write(b []byte) (int, error) {
	_ = c.Conn.SetWriteDeadline(time.Now().Add(c.idle))
	return c.Conn.Write(b)
}
