// Package fetch is the gateway's built-in "fetch" tool server: one tool,
// http_fetch, that GETs a URL and returns its text, with HTML converted to
// readable markdown.
//
// Every connection goes through the Guard (netguard), the same code the egress
// proxy dials with: the host must be on the fetch allowlist
// (servers.fetch.allowed_domains) before any DNS lookup, the name is resolved
// once, every address is checked against the private-range rules and the
// checked address is dialed. Redirects are followed by hand, at most
// MaxRedirects of them, and every hop is parsed strictly and checked again.
// The response body, the redirect chain and the whole fetch are capped in
// size and time. Each hop is recorded as an audit.EgressEvent of kind
// "fetch" carrying the tool call's id.
//
// When policy escalated the call and a human approved it, the approved URL's
// own host is also let through (the address rules still apply); a redirect to
// any other host must be on the allowlist.
//
// The server keeps no decide/escalate path of its own: the gate decides
// http_fetch like any tool call and escalates it (the approval reaches the
// server as servers.CallInfo.Approved). Its hop records are built by
// servers.NewEgressEvent (audit.NewEgressEvent, linked to the call); a hop
// whose record fails is a failed call, which the gate records as its
// outcome. A tool server sits below the gate and does not import it.
package fetch

import (
	"context"
	"crypto/tls"
	"crypto/x509"
	"encoding/json"
	"errors"
	"fmt"
	"log/slog"
	"net"
	"net/netip"
	"time"

	"github.com/google/uuid"

	"ironcurtain.dev/gateway/internal/audit"
	"ironcurtain.dev/gateway/internal/servers"
	"ironcurtain.dev/gateway/netpolicy"
	"ironcurtain.dev/gateway/policy"
)

// ServerName is the name the hub exposes the tool under ("fetch__http_fetch").
const ServerName = "fetch"

// ToolName is the one tool of the server (the original's name).
const ToolName = "http_fetch"

// Defaults applied when the corresponding Config field is zero.
const (
	DefaultMaxBodyBytes     = 5 << 20
	DefaultMaxRedirects     = 5
	DefaultTimeout          = 30 * time.Second
	DefaultMaxLength        = 20000
	DefaultMaxLengthCeiling = 200000
	DefaultUserAgent        = "IronCurtain-fetch/1.0 (AI agent gateway)"
)

// Guard is what the server needs of netguard.Guard: the host check made before
// any DNS lookup, the checked dial, and the dial of a host a human approved
// (off the allowlist, every other check applied: one lookup, every address
// checked, only a checked address dialed, the socket-level check).
type Guard interface {
	CheckHost(h netpolicy.Host) error
	Dial(ctx context.Context, h netpolicy.Host, port int) (net.Conn, netip.Addr, error)
	DialApproved(ctx context.Context, h netpolicy.Host, port int) (net.Conn, netip.Addr, error)
}

// Config configures a Server.
type Config struct {
	// MaxBodyBytes caps the bytes read from one response (after decoding
	// Content-Encoding); the rest is dropped and the result marked truncated.
	MaxBodyBytes int64
	// MaxRedirects caps the redirects followed by one call.
	MaxRedirects int
	// Timeout bounds one call: every hop, connection and body read.
	Timeout time.Duration
	// MaxLength is the default of the max_length argument (characters
	// returned); MaxLengthCeiling its upper bound.
	MaxLength        int
	MaxLengthCeiling int
	// UserAgent is sent with every request; the agent cannot change it.
	UserAgent string
	// DialTimeout bounds one dial of an approved host (the lookup and the
	// connection; the Guard also bounds every dial by its own timeout).
	DialTimeout time.Duration
	// AllowedPorts are the destination ports a URL may name; empty means
	// DefaultAllowedPorts.
	AllowedPorts []int
	// RootCAs verifies servers' certificates; nil uses the system roots.
	RootCAs *x509.CertPool
}

// DefaultAllowedPorts are the ports fetch connects to when
// Config.AllowedPorts is empty.
var DefaultAllowedPorts = []int{80, 443}

func (c Config) ports() []int {
	if len(c.AllowedPorts) == 0 {
		return DefaultAllowedPorts
	}
	return c.AllowedPorts
}

func (c Config) tlsConfig() *tls.Config {
	return &tls.Config{RootCAs: c.RootCAs, MinVersion: tls.VersionTLS12}
}

// Deps are the server's collaborators.
type Deps struct {
	// Guard dials every connection (required).
	Guard Guard
	// Sink receives one EgressEvent per hop (required).
	Sink audit.Sink
	// Logger receives failure detail (nil discards).
	Logger *slog.Logger
	// Now and NewID are for tests (defaults: time.Now, uuid).
	Now   func() time.Time
	NewID func() string
}

// Server is the fetch tool server.
type Server struct {
	cfg   Config
	guard Guard
	sink  audit.Sink
	log   *slog.Logger
	now   func() time.Time
	newID func() string
}

var _ servers.Server = (*Server)(nil)

// New returns a Server; zero Config fields take the defaults.
func New(cfg Config, d Deps) (*Server, error) {
	if d.Guard == nil {
		return nil, errors.New("creating fetch server: a Guard is required")
	}
	if d.Sink == nil {
		return nil, errors.New("creating fetch server: an audit sink is required")
	}
	if cfg.MaxBodyBytes < 0 || cfg.MaxRedirects < 0 || cfg.Timeout < 0 || cfg.MaxLength < 0 || cfg.MaxLengthCeiling < 0 {
		return nil, errors.New("creating fetch server: limits must not be negative")
	}
	if cfg.MaxBodyBytes == 0 {
		cfg.MaxBodyBytes = DefaultMaxBodyBytes
	}
	if cfg.MaxRedirects == 0 {
		cfg.MaxRedirects = DefaultMaxRedirects
	}
	if cfg.Timeout == 0 {
		cfg.Timeout = DefaultTimeout
	}
	if cfg.MaxLengthCeiling == 0 {
		cfg.MaxLengthCeiling = DefaultMaxLengthCeiling
	}
	if cfg.MaxLength == 0 {
		cfg.MaxLength = min(DefaultMaxLength, cfg.MaxLengthCeiling)
	}
	if cfg.MaxLength > cfg.MaxLengthCeiling {
		return nil, fmt.Errorf("creating fetch server: max length %d exceeds its ceiling %d", cfg.MaxLength, cfg.MaxLengthCeiling)
	}
	for i, p := range cfg.AllowedPorts {
		if p < 1 || p > 65535 {
			return nil, fmt.Errorf("creating fetch server: allowed port [%d] = %d is not in 1..65535", i, p)
		}
	}
	if cfg.UserAgent == "" {
		cfg.UserAgent = DefaultUserAgent
	}
	if cfg.DialTimeout == 0 {
		cfg.DialTimeout = 10 * time.Second
	}
	s := &Server{cfg: cfg, guard: d.Guard, sink: d.Sink, log: d.Logger, now: d.Now, newID: d.NewID}
	if s.log == nil {
		s.log = slog.New(slog.DiscardHandler)
	}
	if s.now == nil {
		s.now = time.Now
	}
	if s.newID == nil {
		s.newID = func() string { return uuid.NewString() }
	}
	return s, nil
}

// Name implements servers.Server.
func (s *Server) Name() string { return ServerName }

// Tools implements servers.Server.
func (s *Server) Tools() []servers.Tool { return Tools() }

// Tools returns the tool of the fetch server with its annotation; it needs no
// Server (the annotations command lists it without a Guard).
func Tools() []servers.Tool {
	schema := json.RawMessage(`{"type":"object","properties":{` +
		`"url":{"type":"string","description":"The http or https URL to fetch (GET)."},` +
		`"max_length":{"type":"integer","minimum":1,"description":"Maximum number of characters to return (default 20000)."},` +
		`"start_index":{"type":"integer","minimum":0,"description":"Return the content starting at this character, to read a long page in parts."},` +
		`"format":{"type":"string","enum":["markdown","text","html"],"description":"Output for HTML pages: markdown (default), text (no markup) or html (the source)."}` +
		`},"required":["url"],"additionalProperties":false}`)
	return []servers.Tool{{
		Name: ToolName,
		Description: "Fetch a web page or text document with an HTTP GET and return its content; HTML is " +
			"converted to markdown. Only hosts on the gateway's allowlist (or approved by a human) can be " +
			"reached; private and internal addresses never can.",
		InputSchema: schema,
		Annotation: policy.ToolAnnotation{
			Tool:    ToolName,
			Server:  ServerName,
			Comment: "Fetches a URL with an HTTP GET and returns its content as text or markdown.",
			Args: []policy.ArgAnnotation{
				{Name: "url", Spec: policy.Static(policy.RoleFetchURL)},
				{Name: "max_length", Spec: policy.Static(policy.RoleNone)},
				{Name: "start_index", Spec: policy.Static(policy.RoleNone)},
				{Name: "format", Spec: policy.Static(policy.RoleNone)},
			},
			InputSchema: schema,
		},
	}}
}

// Call implements servers.Server.
func (s *Server) Call(ctx context.Context, tool string, args map[string]any) (servers.Result, error) {
	if tool != ToolName {
		return servers.ToolError("unknown tool " + tool), nil
	}
	req, msg := parseArgs(args, s.cfg)
	if msg != "" {
		return servers.ToolError(msg), nil
	}
	ci, _ := servers.CallInfoFrom(ctx)
	ctx, cancel := context.WithTimeout(ctx, s.cfg.Timeout)
	defer cancel()
	page, err := s.get(ctx, req.url, ci)
	if err != nil {
		var ae *agentError
		if errors.As(err, &ae) {
			return servers.ToolError(ae.msg), nil
		}
		return servers.Result{}, err
	}
	return servers.Text(render(page, req)), nil
}

// request holds the checked arguments of one call.
type request struct {
	url        netpolicy.URL
	maxLength  int
	startIndex int
	format     Format
}

func parseArgs(args map[string]any, cfg Config) (request, string) {
	r := request{maxLength: cfg.MaxLength, format: FormatMarkdown}
	for k := range args {
		switch k {
		case "url", "max_length", "start_index", "format":
		default:
			return r, "unknown argument " + quoteArg(k)
		}
	}
	raw, ok := args["url"].(string)
	if !ok || raw == "" {
		return r, "url is required and must be a string"
	}
	u, err := netpolicy.ParseURL(raw)
	if err != nil {
		return r, "invalid url: " + shortErr(err)
	}
	r.url = u
	if v, present := args["max_length"]; present && v != nil {
		n, ok := intArg(v)
		if !ok || n < 1 {
			return r, "max_length must be a positive integer"
		}
		r.maxLength = min(n, cfg.MaxLengthCeiling)
	}
	if v, present := args["start_index"]; present && v != nil {
		n, ok := intArg(v)
		if !ok || n < 0 {
			return r, "start_index must be a non-negative integer"
		}
		r.startIndex = n
	}
	if v, present := args["format"]; present && v != nil {
		f, _ := v.(string)
		switch Format(f) {
		case FormatMarkdown, FormatText, FormatHTML:
			r.format = Format(f)
		default:
			return r, "format must be markdown, text or html"
		}
	}
	return r, ""
}

func intArg(v any) (int, bool) {
	switch n := v.(type) {
	case float64:
		if n != float64(int64(n)) || n > 1<<31 || n < -(1<<31) {
			return 0, false
		}
		return int(n), true
	case int:
		return n, true
	case int64:
		if n > 1<<31 || n < -(1<<31) {
			return 0, false
		}
		return int(n), true
	case json.Number:
		i, err := n.Int64()
		if err != nil || i > 1<<31 || i < -(1<<31) {
			return 0, false
		}
		return int(i), true
	}
	return 0, false
}

// quoteArg quotes an agent-chosen name for a message, cut to a safe length.
func quoteArg(s string) string {
	return fmt.Sprintf("%q", cutUTF8(s, 64))
}

// shortErr is the agent-facing text of a parse error: the netpolicy errors
// name the problem, not host paths; cut them anyway.
func shortErr(err error) string { return cutUTF8(err.Error(), 200) }

// agentError is a failure whose message is safe and useful for the agent
// (a refused host, an HTTP failure); other errors are gateway failures.
type agentError struct{ msg string }

func (e *agentError) Error() string { return e.msg }

func refuse(format string, a ...any) error { return &agentError{msg: fmt.Sprintf(format, a...)} }
