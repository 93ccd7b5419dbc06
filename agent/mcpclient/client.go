// Package mcpclient connects the agent to the gateway's MCP endpoint
// (streamable HTTP, github.com/mark3labs/mcp-go client) with the agent
// token as a bearer token. It lists the gateway's tools, calls them, and
// turns the gateway's escalation notifications into events, so the runner
// can show which call waits for a human and why.
//
// The HTTP client never uses HTTP(S)_PROXY from the environment: the
// gateway is reached directly on the internal network, and the proxy URL
// carries the agent token.
package mcpclient

import (
	"bytes"
	"context"
	"encoding/base64"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"net/http"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	"github.com/mark3labs/mcp-go/client"
	"github.com/mark3labs/mcp-go/client/transport"
	"github.com/mark3labs/mcp-go/mcp"

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
	cfg    Config
	client *client.Client
	init   *mcp.InitializeResult
	seq    atomic.Int64

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
//
// The session keeps a standalone event stream (HTTP GET) open, reopened
// when it breaks: the gateway sends only on a call's own stream, but an
// open stream marks the MCP session in use, so the gateway does not end it
// as idle while the agent thinks.
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
	refusals := &lastRefusal{}
	httpClient.Transport = bearerTransport{token: cfg.Token, base: rt, refusals: refusals}

	tr, err := transport.NewStreamableHTTP(cfg.URL,
		transport.WithHTTPBasicClient(&httpClient),
		transport.WithHTTPLogger(cfg.Logger),
		//lint:ignore SA1019 the standalone stream keeps the MCP session in use (see above).
		transport.WithContinuousListening(),
	)
	if err != nil {
		return nil, fmt.Errorf("connecting to the gateway MCP endpoint: %w", err)
	}
	c.client = client.NewClient(rawToolsTransport{tr})
	c.client.OnNotification(c.onNotification)
	// The stream outlives ctx (it may be a dial timeout): Close ends it.
	if err := c.client.Start(context.WithoutCancel(ctx)); err != nil {
		_ = c.client.Close()
		return nil, fmt.Errorf("connecting to the gateway MCP endpoint: %w", err)
	}
	init, err := c.client.Initialize(ctx, mcp.InitializeRequest{Params: mcp.InitializeParams{
		ClientInfo: mcp.Implementation{Name: "ironcurtain-agent", Version: "0.1.0"},
	}})
	if err != nil {
		_ = c.client.Close()
		if r := refusals.get(); r != "" && errors.Is(err, transport.ErrLegacySSEServer) {
			// mcp-go reads any 4xx to initialize as "a legacy SSE server";
			// the gateway's answer says what happened (a session cap, ...).
			return nil, fmt.Errorf("connecting to the gateway MCP endpoint: %s", r)
		}
		return nil, fmt.Errorf("connecting to the gateway MCP endpoint: %w", err)
	}
	c.init = init
	if c.client.GetServerCapabilities().Logging != nil {
		// Ask for notice-level messages: escalation notices are sent at "notice".
		//lint:ignore SA1019 the gateway speaks the session protocol (2025-11-25), where logging/setLevel is current.
		if err := c.client.SetLevel(ctx, mcp.SetLevelRequest{Params: mcp.SetLevelParams{Level: mcp.LoggingLevelInfo}}); err != nil {
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
	token    string
	base     http.RoundTripper
	refusals *lastRefusal
}

func (b bearerTransport) RoundTrip(req *http.Request) (*http.Response, error) {
	req = req.Clone(req.Context())
	req.Header.Set("Authorization", "Bearer "+b.token)
	resp, err := b.base.RoundTrip(req)
	if err == nil && req.Method == http.MethodPost && resp.StatusCode >= 400 && b.refusals != nil {
		b.refusals.record(resp)
	}
	return resp, err
}

// maxRefusalBytes bounds how much of a refused request's answer is read.
const maxRefusalBytes = 4 << 10

// lastRefusal keeps the gateway's last refusal of a POST (status and
// JSON-RPC error message), so that a failed initialize can say why.
type lastRefusal struct {
	mu  sync.Mutex
	msg string
}

// record reads the start of resp's body (and leaves the body whole).
func (l *lastRefusal) record(resp *http.Response) {
	head, err := io.ReadAll(io.LimitReader(resp.Body, maxRefusalBytes))
	resp.Body = struct {
		io.Reader
		io.Closer
	}{io.MultiReader(bytes.NewReader(head), resp.Body), resp.Body}
	msg := resp.Status
	var rpc struct {
		Error struct {
			Message string `json:"message"`
		} `json:"error"`
	}
	if err == nil && json.Unmarshal(head, &rpc) == nil && rpc.Error.Message != "" {
		msg += ": " + rpc.Error.Message
	}
	l.mu.Lock()
	l.msg = "the gateway answered " + msg
	l.mu.Unlock()
}

func (l *lastRefusal) get() string {
	l.mu.Lock()
	defer l.mu.Unlock()
	return l.msg
}

// rawToolsTransport keeps the result of every tools/list request made with
// a context from withRawPages. mcp-go decodes a tool's schemas into a
// struct that keeps only some JSON Schema keywords; the declarations the
// model reads are built from the whole schemas the gateway sent.
type rawToolsTransport struct {
	*transport.StreamableHTTP
}

type rawPagesKey struct{}

func withRawPages(ctx context.Context, pages *[]json.RawMessage) context.Context {
	return context.WithValue(ctx, rawPagesKey{}, pages)
}

// SendRequest implements transport.Interface.
func (t rawToolsTransport) SendRequest(ctx context.Context, req transport.JSONRPCRequest) (*transport.JSONRPCResponse, error) {
	resp, err := t.StreamableHTTP.SendRequest(ctx, req)
	if err == nil && resp != nil && resp.Error == nil && req.Method == string(mcp.MethodToolsList) {
		if pages, ok := ctx.Value(rawPagesKey{}).(*[]json.RawMessage); ok {
			*pages = append(*pages, resp.Result)
		}
	}
	return resp, err
}

// rawTool is a tool of a tools/list result with its schemas as sent.
type rawTool struct {
	Name         string `json:"name"`
	InputSchema  any    `json:"inputSchema"`
	OutputSchema any    `json:"outputSchema"`
}

// rawSchemas returns the tools of the tools/list results in pages by name.
func rawSchemas(pages []json.RawMessage) (map[string]rawTool, error) {
	out := map[string]rawTool{}
	for _, page := range pages {
		var res struct {
			Tools []rawTool `json:"tools"`
		}
		if err := json.Unmarshal(page, &res); err != nil {
			return nil, fmt.Errorf("decoding a tools/list result: %w", err)
		}
		for _, t := range res.Tools {
			out[t.Name] = t
		}
	}
	return out, nil
}

// ServerName returns the name the gateway gave in initialize.
func (c *Client) ServerName() string {
	if c.init != nil {
		return c.init.ServerInfo.Name
	}
	return ""
}

// Tools lists every tool of the gateway (all pages).
func (c *Client) Tools(ctx context.Context) ([]tsdecl.Tool, error) {
	var pages []json.RawMessage
	res, err := c.client.ListTools(withRawPages(ctx, &pages), mcp.ListToolsRequest{})
	if err != nil {
		return nil, fmt.Errorf("listing gateway tools: %w", err)
	}
	raw, err := rawSchemas(pages)
	if err != nil {
		return nil, fmt.Errorf("listing gateway tools: %w", err)
	}
	var out []tsdecl.Tool
	for _, t := range res.Tools {
		tool := tsdecl.Tool{Name: t.Name, Description: t.Description}
		r := raw[t.Name]
		if r.InputSchema != nil {
			if tool.InputSchema, err = json.Marshal(r.InputSchema); err != nil {
				return nil, fmt.Errorf("listing gateway tools: encoding the input schema of %s: %w", t.Name, err)
			}
		}
		if r.OutputSchema != nil {
			if tool.OutputSchema, err = json.Marshal(r.OutputSchema); err != nil {
				return nil, fmt.Errorf("listing gateway tools: encoding the output schema of %s: %w", t.Name, err)
			}
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
	defer c.finish(token, tool)

	req := mcp.CallToolRequest{}
	req.Params.Name = tool
	req.Params.Arguments = args
	req.Params.Meta = &mcp.Meta{ProgressToken: token}
	res, err := c.client.CallTool(ctx, req)
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

// finish moves the call of token from in flight to recent.
func (c *Client) finish(token, tool string) {
	c.mu.Lock()
	defer c.mu.Unlock()
	delete(c.inflight, token)
	c.recent[token] = tool
	c.recentOrder = append(c.recentOrder, token)
	if len(c.recentOrder) > recentTokens {
		delete(c.recent, c.recentOrder[0])
		c.recentOrder = c.recentOrder[1:]
	}
}

// Close ends the session.
func (c *Client) Close() error {
	if err := c.client.Close(); err != nil {
		return fmt.Errorf("closing the MCP session: %w", err)
	}
	return nil
}

func (c *Client) onNotification(n mcp.JSONRPCNotification) {
	switch n.Method {
	case string(mcp.MethodNotificationMessage):
		c.onLog(n.Params.AdditionalFields)
	case string(mcp.MethodNotificationProgress):
		c.onProgress(n.Params.AdditionalFields)
	}
}

func (c *Client) onLog(params map[string]any) {
	if logger, _ := params["logger"].(string); logger != EscalationLogger {
		return
	}
	esc, ok := parseEscalation(params["data"])
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

func (c *Client) onProgress(params map[string]any) {
	message, _ := params["message"].(string)
	token, hasToken := params["progressToken"]
	if message == "" || !hasToken || c.cfg.OnProgress == nil {
		return
	}
	key := fmt.Sprint(token)
	c.mu.Lock()
	tool, ok := c.recent[key]
	if cl, in := c.inflight[key]; in {
		tool, ok = cl.tool, true
	}
	c.mu.Unlock()
	if ok {
		c.cfg.OnProgress(tool, message)
	}
}

// contentText renders MCP content as text for the script.
func contentText(content []mcp.Content) string {
	var parts []string
	for _, c := range content {
		if s, ok := contentPart(c); ok {
			parts = append(parts, s)
		}
	}
	return strings.Join(parts, "\n")
}

// contentPart renders one content item; ok is false for kinds the script
// does not see.
func contentPart(c mcp.Content) (string, bool) {
	switch x := c.(type) {
	case mcp.TextContent:
		return x.Text, true
	case *mcp.TextContent:
		return x.Text, true
	case mcp.ImageContent:
		return fmt.Sprintf("[image %s, %d bytes]", x.MIMEType, decodedLen(x.Data)), true
	case *mcp.ImageContent:
		return fmt.Sprintf("[image %s, %d bytes]", x.MIMEType, decodedLen(x.Data)), true
	case mcp.AudioContent:
		return fmt.Sprintf("[audio %s, %d bytes]", x.MIMEType, decodedLen(x.Data)), true
	case *mcp.AudioContent:
		return fmt.Sprintf("[audio %s, %d bytes]", x.MIMEType, decodedLen(x.Data)), true
	case mcp.ResourceLink:
		return "[resource " + x.URI + "]", true
	case *mcp.ResourceLink:
		return "[resource " + x.URI + "]", true
	case mcp.EmbeddedResource:
		return resourceText(x.Resource)
	case *mcp.EmbeddedResource:
		return resourceText(x.Resource)
	}
	return "", false
}

// resourceText renders embedded resource contents: their text, or a
// reference to them.
func resourceText(r mcp.ResourceContents) (string, bool) {
	switch x := r.(type) {
	case mcp.TextResourceContents:
		return textOrURI(x.Text, x.URI), true
	case *mcp.TextResourceContents:
		return textOrURI(x.Text, x.URI), true
	case mcp.BlobResourceContents:
		return "[resource " + x.URI + "]", true
	case *mcp.BlobResourceContents:
		return "[resource " + x.URI + "]", true
	}
	return "", false
}

func textOrURI(text, uri string) string {
	if text != "" {
		return text
	}
	return "[resource " + uri + "]"
}

// decodedLen is the size of base64 data (MCP sends images and audio as
// base64); data that is not base64 counts as its length.
func decodedLen(data string) int {
	b, err := base64.StdEncoding.DecodeString(data)
	if err != nil {
		return len(data)
	}
	return len(b)
}

// Ping checks that the session answers, within timeout.
func (c *Client) Ping(ctx context.Context, timeout time.Duration) error {
	ctx, cancel := context.WithTimeout(ctx, timeout)
	defer cancel()
	//lint:ignore SA1019 the gateway speaks the session protocol (2025-11-25), where ping is current.
	if err := c.client.Ping(ctx); err != nil {
		return fmt.Errorf("pinging the gateway: %w", err)
	}
	return nil
}
