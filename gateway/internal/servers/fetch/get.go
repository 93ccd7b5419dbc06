package fetch

import (
	"context"
	"errors"
	"fmt"
	"io"
	"mime"
	"net"
	"net/http"
	"net/http/httptrace"
	"net/netip"
	"net/url"
	"strings"
	"time"

	"ironcurtain.dev/gateway/internal/audit"
	"ironcurtain.dev/gateway/internal/netguard"
	"ironcurtain.dev/gateway/internal/servers"
	"ironcurtain.dev/gateway/netpolicy"
)

// Limits that are not configurable.
const (
	maxResponseHeaderBytes = 64 << 10
	maxRedirectBodyBytes   = 64 << 10 // read from a redirect response before it is closed
	tlsHandshakeTimeout    = 10 * time.Second
)

// Rule names recorded in egress events.
const (
	ruleAllowlist = "fetch-allowlist"
	ruleApproved  = "fetch-human-approved"
	ruleAddress   = "fetch-address-policy"
	rulePort      = "fetch-port"
)

// page is a fetched document.
type page struct {
	url         netpolicy.URL // the final URL, after redirects
	first       netpolicy.URL // the URL asked for
	status      string        // "200 OK"
	contentType string
	body        []byte
	cut         bool // the body was longer than MaxBodyBytes
}

// get fetches u, following redirects, and records every hop.
func (s *Server) get(ctx context.Context, u netpolicy.URL, ci servers.CallInfo) (*page, error) {
	var approved netpolicy.Host
	if ci.Approved {
		approved = u.Host
	}
	tr := s.transport(approved)
	defer tr.CloseIdleConnections()
	client := &http.Client{
		Transport:     tr,
		CheckRedirect: func(*http.Request, []*http.Request) error { return http.ErrUseLastResponse },
	}
	first := u
	for hop := 0; ; hop++ {
		p, next, err := s.hop(ctx, client, u, approved, ci)
		if err != nil {
			return nil, err
		}
		if next == nil {
			p.first = first
			return p, nil
		}
		if hop >= s.cfg.MaxRedirects {
			return nil, refuse("fetch stopped: more than %d redirects", s.cfg.MaxRedirects)
		}
		u = *next
	}
}

// transport returns a one-call transport that dials only through the Guard
// (or, for the host a human approved, through the Guard's address checks).
// It never uses an environment proxy and keeps no cookies.
func (s *Server) transport(approved netpolicy.Host) *http.Transport {
	return &http.Transport{
		Proxy: nil,
		DialContext: func(ctx context.Context, network, addr string) (net.Conn, error) {
			if network != "tcp" && network != "tcp4" && network != "tcp6" {
				return nil, netguard.ErrBadNetwork
			}
			h, port, err := netpolicy.ParseAuthority(addr, 0)
			if err != nil {
				return nil, fmt.Errorf("parsing dial address: %w", err)
			}
			if !approved.IsZero() && h == approved {
				return s.dialApproved(ctx, h, port)
			}
			conn, _, err := s.guard.Dial(ctx, h, port)
			return conn, err
		},
		ForceAttemptHTTP2:      true,
		TLSHandshakeTimeout:    tlsHandshakeTimeout,
		ResponseHeaderTimeout:  s.cfg.Timeout,
		MaxResponseHeaderBytes: maxResponseHeaderBytes,
		MaxIdleConns:           2,
		IdleConnTimeout:        s.cfg.Timeout,
		TLSClientConfig:        s.cfg.tlsConfig(),
	}
}

// dialApproved dials a host a human approved for this call through the
// Guard's one path for it (netguard.Guard.DialApproved): it is not on the
// allowlist, but it is looked up once, every address must pass the Guard's
// address policy, and only a checked address is dialed (checked again at
// the socket).
func (s *Server) dialApproved(ctx context.Context, h netpolicy.Host, port int) (net.Conn, error) {
	ctx, cancel := context.WithTimeout(ctx, s.cfg.DialTimeout)
	defer cancel()
	c, _, err := s.guard.DialApproved(ctx, h, port)
	if err != nil {
		return nil, fmt.Errorf("dialing approved host %s: %w", h, err)
	}
	return c, nil
}

// hop makes one request. It returns the page, or the next URL for a
// redirect, and records the egress event of the hop.
func (s *Server) hop(ctx context.Context, client *http.Client, u netpolicy.URL, approved netpolicy.Host, ci servers.CallInfo) (*page, *netpolicy.URL, error) {
	start := s.now()
	ev := servers.NewEgressEvent(servers.WithCallInfo(ctx, ci), servers.Egress{
		ID: s.newID(), Start: start, Kind: "fetch", Method: http.MethodGet, Host: u.Host.String(), Port: u.Port,
	})
	host := u.Host.String()

	// Decide on the name before anything is sent anywhere.
	if !s.portAllowed(u.Port) {
		ev.Decision, ev.Rule, ev.Reason = "deny", rulePort, fmt.Sprintf("port %d is not allowed for fetch", u.Port)
		return nil, nil, s.refused(ctx, ev, start, "fetch refused: port %d is not allowed (only %s)", u.Port, s.portList())
	}
	if approved.IsZero() || u.Host != approved {
		if err := s.guard.CheckHost(u.Host); err != nil {
			ev.Decision, ev.Rule = "deny", ruleAllowlist
			if errors.Is(err, netpolicy.ErrAddressDenied) {
				ev.Rule, ev.Reason = ruleAddress, "the address is not public"
				return nil, nil, s.refused(ctx, ev, start, "fetch refused: %s is a private or internal address", host)
			}
			ev.Reason = "host is not on the fetch allowlist"
			return nil, nil, s.refused(ctx, ev, start, "fetch refused: %s is not on the fetch allowlist (servers.fetch.allowed_domains)", host)
		}
		ev.Rule, ev.Reason = ruleAllowlist, "host is on the fetch allowlist"
	} else {
		ev.Rule, ev.Reason = ruleApproved, "a human approved this fetch"
	}

	req, err := http.NewRequestWithContext(ctx, http.MethodGet, u.String(), nil)
	if err != nil {
		return nil, nil, fmt.Errorf("building request: %w", err)
	}
	req.Header.Set("User-Agent", s.cfg.UserAgent)
	req.Header.Set("Accept", "text/html,application/xhtml+xml,text/plain,text/markdown,application/json;q=0.9,*/*;q=0.5")
	var remote net.Addr
	req = req.WithContext(httptrace.WithClientTrace(ctx, &httptrace.ClientTrace{
		GotConn: func(info httptrace.GotConnInfo) { remote = info.Conn.RemoteAddr() },
	}))

	resp, err := client.Do(req)
	if err != nil {
		ev.Duration = s.now().Sub(start)
		ev.Error = cutUTF8(err.Error(), 500)
		msg := s.dialFailure(ev, err, host)
		if rerr := s.record(ctx, ev); rerr != nil {
			return nil, nil, rerr
		}
		return nil, nil, &agentError{msg: msg}
	}
	defer resp.Body.Close()
	if remote != nil {
		if ap, err := netip.ParseAddrPort(remote.String()); err == nil {
			ev.ResolvedIP = ap.Addr().Unmap().String()
		}
	}
	ev.Decision = "allow"

	if isRedirect(resp.StatusCode) {
		n, _ := io.Copy(io.Discard, io.LimitReader(resp.Body, maxRedirectBodyBytes))
		ev.BytesDown = n
		ev.Duration = s.now().Sub(start)
		next, msg := redirectTarget(u, resp.Header.Get("Location"))
		if msg != "" {
			ev.Error = msg
		}
		if err := s.record(ctx, ev); err != nil {
			return nil, nil, err
		}
		if msg != "" {
			return nil, nil, &agentError{msg: "fetch stopped: " + msg}
		}
		return nil, &next, nil
	}

	ct := resp.Header.Get("Content-Type")
	if !textual(ct) {
		ev.Duration = s.now().Sub(start)
		ev.Error = "content type not text: " + cutUTF8(ct, 100)
		if err := s.record(ctx, ev); err != nil {
			return nil, nil, err
		}
		return nil, nil, refuse("fetch refused: %s returned %s content, which is not text", host, mediaType(ct))
	}
	body, err := io.ReadAll(io.LimitReader(resp.Body, s.cfg.MaxBodyBytes+1))
	ev.BytesDown = int64(len(body))
	ev.Duration = s.now().Sub(start)
	if err != nil {
		ev.Error = cutUTF8(err.Error(), 500)
		if rerr := s.record(ctx, ev); rerr != nil {
			return nil, nil, rerr
		}
		if ctx.Err() != nil {
			return nil, nil, refuse("fetch failed: %s: timed out after %s", host, s.cfg.Timeout)
		}
		return nil, nil, refuse("fetch failed: %s: the connection broke while reading the response", host)
	}
	if err := s.record(ctx, ev); err != nil {
		return nil, nil, err
	}
	p := &page{url: u, status: resp.Status, contentType: ct, body: body}
	if int64(len(body)) > s.cfg.MaxBodyBytes {
		p.body, p.cut = body[:s.cfg.MaxBodyBytes], true
	}
	return p, nil, nil
}

// refused records a hop refused before any connection and returns the
// agent's message (or the recording failure).
func (s *Server) refused(ctx context.Context, ev *audit.EgressEvent, start time.Time, format string, a ...any) error {
	ev.Duration = s.now().Sub(start)
	if err := s.record(ctx, ev); err != nil {
		return err
	}
	return refuse(format, a...)
}

// record writes ev. A fetch whose record cannot be written does not return
// its content: the failure is a gateway error (the hub reports it shortly).
func (s *Server) record(ctx context.Context, ev *audit.EgressEvent) error {
	if err := s.sink.Record(context.WithoutCancel(ctx), ev); err != nil {
		return fmt.Errorf("recording fetch egress event: %w", err)
	}
	return nil
}

// dialFailure classifies a failed request for the audit event and returns
// the agent's message (no addresses, no internal detail).
func (s *Server) dialFailure(ev *audit.EgressEvent, err error, host string) string {
	var he *netguard.HostError
	switch {
	case errors.Is(err, netpolicy.ErrAddressDenied) || errors.Is(err, netguard.ErrUncheckedAddress):
		ev.Decision, ev.Rule, ev.Reason = "deny", ruleAddress, "the host resolves to a non-public address"
		return "fetch refused: " + host + " resolves to a private or internal address"
	case errors.As(err, &he) || errors.Is(err, netguard.ErrHostNotAllowed):
		ev.Decision, ev.Rule, ev.Reason = "deny", ruleAllowlist, "host is not on the fetch allowlist"
		return "fetch refused: " + host + " is not on the fetch allowlist (servers.fetch.allowed_domains)"
	case errors.Is(err, netguard.ErrResolve):
		ev.Decision = "allow"
		return "fetch failed: " + host + " does not resolve"
	case errors.Is(err, context.DeadlineExceeded):
		ev.Decision = "allow"
		return fmt.Sprintf("fetch failed: %s: timed out after %s", host, s.cfg.Timeout)
	default:
		ev.Decision = "allow"
		return "fetch failed: could not get a response from " + host
	}
}

func (s *Server) portAllowed(port int) bool {
	for _, p := range s.cfg.ports() {
		if p == port {
			return true
		}
	}
	return false
}

func (s *Server) portList() string {
	ps := s.cfg.ports()
	out := make([]string, len(ps))
	for i, p := range ps {
		out[i] = fmt.Sprint(p)
	}
	return strings.Join(out, ", ")
}

func isRedirect(code int) bool {
	switch code {
	case http.StatusMovedPermanently, http.StatusFound, http.StatusSeeOther,
		http.StatusTemporaryRedirect, http.StatusPermanentRedirect:
		return true
	}
	return false
}

// redirectTarget resolves a Location header against the current URL and
// parses the result strictly; msg is set (agent-safe) when it is refused.
func redirectTarget(cur netpolicy.URL, loc string) (next netpolicy.URL, msg string) {
	if loc == "" {
		return next, "a redirect without a Location"
	}
	if strings.ContainsAny(loc, "\\\x00\r\n\t") {
		return next, "the redirect target is not an acceptable URL"
	}
	base, err := url.Parse(cur.String())
	if err != nil {
		return next, "the redirect target is not an acceptable URL"
	}
	ref, err := url.Parse(loc)
	if err != nil {
		return next, "the redirect target is not an acceptable URL"
	}
	next, err = netpolicy.ParseURL(base.ResolveReference(ref).String())
	if err != nil {
		return next, "the redirect target is not an acceptable URL (" + shortErr(err) + ")"
	}
	return next, ""
}

// textual reports whether a Content-Type names text the tool may return.
// A missing type is treated as text (the body is checked for UTF-8 later).
func textual(ct string) bool {
	if ct == "" {
		return true
	}
	mt := mediaType(ct)
	switch {
	case strings.HasPrefix(mt, "text/"),
		mt == "application/json", mt == "application/xml", mt == "application/xhtml+xml",
		mt == "application/javascript", mt == "application/ecmascript",
		mt == "application/x-yaml", mt == "application/yaml", mt == "application/toml",
		strings.HasSuffix(mt, "+json"), strings.HasSuffix(mt, "+xml"):
		return true
	}
	return false
}

func mediaType(ct string) string {
	mt, _, err := mime.ParseMediaType(ct)
	if err != nil {
		return "unparsable"
	}
	return cutUTF8(mt, 100)
}

func isHTML(ct string) bool {
	mt := mediaType(ct)
	return mt == "text/html" || mt == "application/xhtml+xml"
}
