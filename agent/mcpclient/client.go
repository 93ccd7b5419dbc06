// Package mcpclient connects the agent to the gateway's MCP endpoint
// (streamable HTTP, official modelcontextprotocol/go-sdk client) with the
// agent token as a bearer token. It lists the gateway's tools, calls them,
// and turns the gateway's escalation notifications into events, so the
// runner can show which call waits for a human and why.
//
// The HTTP client never uses HTTP(S)_PROXY from the environment: the
// gateway is reached directly on the internal network, and the proxy URL
// carries the agent token.
package mcpclient

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"log/slog"
	"net/http"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	"github.com/modelcontextprotocol/go-sdk/mcp"

	"ironcurtain.dev/agent/tsdecl"
)

// EscalationLogger is the logger name of the gateway's escalation notifications.
const EscalationLogger = "ironcurtain.escalation"

// Escalation is one escalation notification from the gateway.
type Escalation struct {
	ID     string `json:"escalation_id"`
	Tool   string `json:"tool"`
	Status string `json:"status"` // pending | approved | denied | expired
	Reason string `json:"reason"`
}

// Final reports whether the escalation has been decided.
func (e Escalation) Final() bool { return e.Status != "" && e.Status != "pending" }

// Config configures Connect.
type Config struct {
	URL   string // the gateway MCP endpoint, e.g. http://gateway:8080/mcp
	Token string // the agent token (sent as Authorization: Bearer)
	// HTTPClient, when set, is used as the base client (its transport is
	// wrapped to add the token). The default transport ignores proxy
	// settings from the environment.
	HTTPClient *http.Client
	// OnEscalation is called for every escalation notification (from a
	// notification goroutine; keep it short).
	OnEscalation func(Escalation)
	// OnProgress is called with progress messages of in-flight calls.
	OnProgress func(tool, message string)
	Logger     *slog.Logger
}

// Result is a tool's answer.
type Result struct {
	Text       string // text items joined by newlines; other content is described
	Structured any    // structuredContent, if any
	IsError    bool
	Escalation *Escalation // the escalation this call went through, if any
}

// Client is a connected MCP client session.
type Client struct {
	cfg     Config
	session *mcp.ClientSession
	seq     atomic.Int64

	mu       sync.Mutex
	inflight map[string]*call // by progress token
	// recent maps the tokens of recently finished calls to their tool, so
	// a progress notice handled after the response still names its call.
	recent      map[string]string
	recentOrder []string
}

const recentTokens = 64

type call struct {
	tool       string
	escalation *Escalation
	notified   chan struct{} // signalled by the first escalation notice
}

// noticeGrace is how long a refused call waits for an escalation notice
// that may still be queued behind the response (notifications are handled
// on their own goroutine). Only refused calls without a notice wait.
const noticeGrace = 25 * time.Millisecond

// Connect opens a session (initialize) with the gateway.
func Connect(ctx context.Context, cfg Config) (*Client, error) {
	if strings.TrimSpace(cfg.URL) == "" {
		return nil, errors.New("connecting to the gateway: the MCP URL is empty")
	}
	if cfg.Logger == nil {
		cfg.Logger = slog.New(slog.DiscardHandler)
	}
	c := &Client{cfg: cfg, inflight: map[string]*call{}, recent: map[string]string{}}
	base := cfg.HTTPClient
	if base == nil {
		base = &http.Client{Transport: DirectTransport()}
	}
	rt := base.Transport
	if rt == nil {
		rt = DirectTransport()
	}
	httpClient := *base
	httpClient.Transport = bearerTransport{token: cfg.Token, base: rt}

	client := mcp.NewClient(&mcp.Implementation{Name: "ironcurtain-agent", Version: "0.1.0"}, &mcp.ClientOptions{
		Logger:                      cfg.Logger,
		LoggingMessageHandler:       c.onLog,
		ProgressNotificationHandler: c.onProgress,
	})
	session, err := client.Connect(ctx, &mcp.StreamableClientTransport{
		Endpoint:   cfg.URL,
		HTTPClient: &httpClient,
		MaxRetries: 2,
	}, nil)
	if err != nil {
		return nil, fmt.Errorf("connecting to the gateway MCP endpoint: %w", err)
	}
	c.session = session
	if init := session.InitializeResult(); init != nil && init.Capabilities != nil && init.Capabilities.Logging != nil {
		// Ask for notice-level messages: escalation notices are sent at "notice".
		if err := session.SetLoggingLevel(ctx, &mcp.SetLoggingLevelParams{Level: "info"}); err != nil {
			cfg.Logger.Warn("setting the MCP logging level", "err", err)
		}
	}
	return c, nil
}

// DirectTransport returns an HTTP transport that never uses a proxy.
func DirectTransport() *http.Transport {
	t := http.DefaultTransport.(*http.Transport).Clone()
	t.Proxy = nil
	return t
}

type bearerTransport struct {
	token string
	base  http.RoundTripper
}

func (b bearerTransport) RoundTrip(req *http.Request) (*http.Response, error) {
	req = req.Clone(req.Context())
	req.Header.Set("Authorization", "Bearer "+b.token)
	return b.base.RoundTrip(req)
}

// ServerName returns the name the gateway gave in initialize.
func (c *Client) ServerName() string {
	if init := c.session.InitializeResult(); init != nil && init.ServerInfo != nil {
		return init.ServerInfo.Name
	}
	return ""
}

// Tools lists every tool of the gateway (all pages).
func (c *Client) Tools(ctx context.Context) ([]tsdecl.Tool, error) {
	var out []tsdecl.Tool
	for t, err := range c.session.Tools(ctx, nil) {
		if err != nil {
			return nil, fmt.Errorf("listing gateway tools: %w", err)
		}
		tool := tsdecl.Tool{Name: t.Name, Description: t.Description}
		if t.InputSchema != nil {
			raw, err := json.Marshal(t.InputSchema)
			if err != nil {
				return nil, fmt.Errorf("listing gateway tools: encoding the input schema of %s: %w", t.Name, err)
			}
			tool.InputSchema = raw
		}
		if t.OutputSchema != nil {
			raw, err := json.Marshal(t.OutputSchema)
			if err != nil {
				return nil, fmt.Errorf("listing gateway tools: encoding the output schema of %s: %w", t.Name, err)
			}
			tool.OutputSchema = raw
		}
		out = append(out, tool)
	}
	return out, nil
}

// Call calls tool with args. Refusals and tool failures are results with
// IsError set; an error means the gateway could not be asked.
func (c *Client) Call(ctx context.Context, tool string, args map[string]any) (Result, error) {
	token := "ic-" + strconv.FormatInt(c.seq.Add(1), 10)
	cl := &call{tool: tool, notified: make(chan struct{}, 1)}
	c.mu.Lock()
	c.inflight[token] = cl
	c.mu.Unlock()
	defer func() {
		c.mu.Lock()
		delete(c.inflight, token)
		c.recent[token] = tool
		c.recentOrder = append(c.recentOrder, token)
		if len(c.recentOrder) > recentTokens {
			delete(c.recent, c.recentOrder[0])
			c.recentOrder = c.recentOrder[1:]
		}
		c.mu.Unlock()
	}()

	params := &mcp.CallToolParams{Name: tool, Arguments: args}
	params.SetProgressToken(token)
	res, err := c.session.CallTool(ctx, params)
	if err != nil {
		return Result{}, fmt.Errorf("calling %s: %w", tool, err)
	}
	out := Result{Text: contentText(res.Content), Structured: res.StructuredContent, IsError: res.IsError}
	c.mu.Lock()
	seen := cl.escalation != nil
	c.mu.Unlock()
	if res.IsError && !seen {
		select {
		case <-cl.notified:
		case <-time.After(noticeGrace):
		}
	}
	c.mu.Lock()
	if cl.escalation != nil {
		esc := *cl.escalation
		if !esc.Final() {
			// The final notice may still be queued behind the response.
			if res.IsError {
				esc.Status = "not approved"
			} else {
				esc.Status = "approved"
			}
		}
		out.Escalation = &esc
	}
	c.mu.Unlock()
	return out, nil
}

// Close ends the session.
func (c *Client) Close() error {
	if err := c.session.Close(); err != nil {
		return fmt.Errorf("closing the MCP session: %w", err)
	}
	return nil
}

func (c *Client) onLog(_ context.Context, req *mcp.LoggingMessageRequest) {
	if req.Params == nil || req.Params.Logger != EscalationLogger {
		return
	}
	esc, ok := parseEscalation(req.Params.Data)
	if !ok {
		c.cfg.Logger.Warn("ignoring an escalation notice that cannot be read")
		return
	}
	c.mu.Lock()
	for _, cl := range c.inflight {
		if cl.tool == esc.Tool {
			e := esc
			cl.escalation = &e
			select {
			case cl.notified <- struct{}{}:
			default:
			}
		}
	}
	c.mu.Unlock()
	if c.cfg.OnEscalation != nil {
		c.cfg.OnEscalation(esc)
	}
}

func parseEscalation(data any) (Escalation, bool) {
	raw, err := json.Marshal(data)
	if err != nil {
		return Escalation{}, false
	}
	if s, ok := data.(string); ok { // a JSON object sent as a string
		raw = []byte(s)
	}
	var esc Escalation
	if err := json.Unmarshal(raw, &esc); err != nil || esc.ID == "" {
		return Escalation{}, false
	}
	return esc, true
}

func (c *Client) onProgress(_ context.Context, req *mcp.ProgressNotificationClientRequest) {
	if req.Params == nil || req.Params.Message == "" || c.cfg.OnProgress == nil {
		return
	}
	token := fmt.Sprint(req.Params.ProgressToken)
	c.mu.Lock()
	tool, ok := c.recent[token]
	if cl, in := c.inflight[token]; in {
		tool, ok = cl.tool, true
	}
	c.mu.Unlock()
	if ok {
		c.cfg.OnProgress(tool, req.Params.Message)
	}
}

// contentText renders MCP content as text for the script.
func contentText(content []mcp.Content) string {
	var parts []string
	for _, c := range content {
		switch x := c.(type) {
		case *mcp.TextContent:
			parts = append(parts, x.Text)
		case *mcp.ImageContent:
			parts = append(parts, fmt.Sprintf("[image %s, %d bytes]", x.MIMEType, len(x.Data)))
		case *mcp.AudioContent:
			parts = append(parts, fmt.Sprintf("[audio %s, %d bytes]", x.MIMEType, len(x.Data)))
		case *mcp.ResourceLink:
			parts = append(parts, "[resource "+x.URI+"]")
		case *mcp.EmbeddedResource:
			if x.Resource != nil && x.Resource.Text != "" {
				parts = append(parts, x.Resource.Text)
			} else if x.Resource != nil {
				parts = append(parts, "[resource "+x.Resource.URI+"]")
			}
		}
	}
	return strings.Join(parts, "\n")
}

// Ping checks that the session answers, within timeout.
func (c *Client) Ping(ctx context.Context, timeout time.Duration) error {
	ctx, cancel := context.WithTimeout(ctx, timeout)
	defer cancel()
	if err := c.session.Ping(ctx, nil); err != nil {
		return fmt.Errorf("pinging the gateway: %w", err)
	}
	return nil
}
