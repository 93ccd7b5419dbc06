package main

import (
	"bufio"
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net/http"
	"strings"
	"sync"
	"sync/atomic"
	"time"
)

// mcpPlan is the input of `ic-e2e-probe mcp` (JSON on stdin): tool calls
// of one agent session spread over several gateway endpoints (replicas).
// The probe opens one MCP session per endpoint (an MCP session lives in
// the memory of the replica that opened it) with the agent token of
// $IRONCURTAIN_AGENT_TOKEN, then runs the calls with Workers concurrent
// workers, each call on its endpoint. A call that fails in transport (a
// replica killed) is reported and the plan goes on.
type mcpPlan struct {
	Endpoints []string  `json:"endpoints"`
	Calls     []mcpCall `json:"calls"`
	Workers   int       `json:"workers"`
	// TimeoutSec bounds each call (default 120).
	TimeoutSec int `json:"timeout_sec"`
	// SkipAfterError: once a call to an endpoint failed in transport (the
	// replica is gone), later calls to it are not sent (Err says skipped).
	SkipAfterError bool `json:"skip_after_error"`
	// SwapSessions: after opening the MCP sessions, each endpoint's calls
	// carry the session id another endpoint (the next) handed out, as a
	// client that moved to another replica without a new initialize.
	SwapSessions bool `json:"swap_sessions"`
	// ListTools: the report names the tools endpoint 0 lists.
	ListTools bool `json:"list_tools"`
}

// mcpCall is one tools/call.
type mcpCall struct {
	Endpoint int             `json:"endpoint"`
	Tool     string          `json:"tool"` // server__tool
	Args     json.RawMessage `json:"args"`
}

// mcpReport is the output of `ic-e2e-probe mcp`.
type mcpReport struct {
	// Start and End bracket the whole plan (Unix nanoseconds, the
	// container's clock: the host's clock).
	Start int64           `json:"start_ns"`
	End   int64           `json:"end_ns"`
	Calls []mcpCallResult `json:"calls"`
	Tools []string        `json:"tools,omitempty"`
}

// mcpCallResult is what one call did.
type mcpCallResult struct {
	Endpoint int    `json:"endpoint"`
	Start    int64  `json:"start_ns"`
	End      int64  `json:"end_ns"`
	IsError  bool   `json:"is_error"` // the tool result's isError
	Text     string `json:"text"`     // the result's text content
	Err      string `json:"err"`      // transport or JSON-RPC error ("" when the call was answered)
}

const (
	mcpProtocolVersion = "2025-06-18"
	mcpMaxWorkers      = 64
	mcpMaxBody         = 4 << 20
	// mcpSkipped is the Err of a call not sent (SkipAfterError).
	mcpSkipped = "skipped: an earlier call to this endpoint failed in transport"
)

// mcpCmd runs a plan read from stdin.
func mcpCmd(stdin io.Reader, getenv func(string) string) (mcpReport, error) {
	var plan mcpPlan
	if err := json.NewDecoder(io.LimitReader(stdin, 16<<20)).Decode(&plan); err != nil {
		return mcpReport{}, fmt.Errorf("reading the plan: %w", err)
	}
	if len(plan.Endpoints) == 0 {
		return mcpReport{}, errors.New("the plan names no endpoint")
	}
	for i, c := range plan.Calls {
		if c.Endpoint < 0 || c.Endpoint >= len(plan.Endpoints) {
			return mcpReport{}, fmt.Errorf("call %d: endpoint %d out of range", i, c.Endpoint)
		}
	}
	if plan.Workers < 1 {
		plan.Workers = 1
	}
	plan.Workers = min(plan.Workers, mcpMaxWorkers)
	if plan.TimeoutSec <= 0 {
		plan.TimeoutSec = 120
	}
	token := getenv("IRONCURTAIN_AGENT_TOKEN")
	if token == "" {
		return mcpReport{}, errors.New("IRONCURTAIN_AGENT_TOKEN is not set")
	}
	clients := make([]*mcpClient, len(plan.Endpoints))
	for i, u := range plan.Endpoints {
		c := &mcpClient{url: u, token: token, http: &http.Client{Transport: &http.Transport{MaxIdleConnsPerHost: mcpMaxWorkers}}}
		ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
		err := c.initialize(ctx)
		cancel()
		if err != nil {
			return mcpReport{}, fmt.Errorf("opening an MCP session on %s: %w", u, err)
		}
		clients[i] = c
		defer c.close()
	}
	if plan.SwapSessions && len(clients) > 1 {
		sids := make([]string, len(clients))
		for i, c := range clients {
			sids[i] = c.sid
		}
		for i, c := range clients {
			c.sid = sids[(i+1)%len(sids)]
		}
	}
	rep := mcpReport{Calls: make([]mcpCallResult, len(plan.Calls)), Start: time.Now().UnixNano()}
	if plan.ListTools {
		ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
		tools, err := clients[0].listTools(ctx)
		cancel()
		rep.Tools = tools
		if err != nil {
			return mcpReport{}, err
		}
	}
	next := make(chan int)
	failed := make([]atomic.Bool, len(plan.Endpoints))
	var wg sync.WaitGroup
	for range plan.Workers {
		wg.Go(func() {
			for i := range next {
				c := plan.Calls[i]
				ctx, cancel := context.WithTimeout(context.Background(), time.Duration(plan.TimeoutSec)*time.Second)
				res := mcpCallResult{Endpoint: c.Endpoint, Start: time.Now().UnixNano()}
				if plan.SkipAfterError && failed[c.Endpoint].Load() {
					cancel()
					res.End, res.Err = res.Start, mcpSkipped
					rep.Calls[i] = res
					continue
				}
				isErr, text, err := clients[c.Endpoint].callTool(ctx, c.Tool, c.Args)
				cancel()
				res.End = time.Now().UnixNano()
				res.IsError, res.Text = isErr, text
				if err != nil {
					res.Err = err.Error()
					failed[c.Endpoint].Store(true)
				}
				rep.Calls[i] = res
			}
		})
	}
	for i := range plan.Calls {
		next <- i
	}
	close(next)
	wg.Wait()
	rep.End = time.Now().UnixNano()
	return rep, nil
}

// mcpClient is a minimal client of the streamable HTTP transport: one
// MCP session, JSON-RPC requests answered as JSON or as an event stream.
type mcpClient struct {
	url, token string
	http       *http.Client

	mu  sync.Mutex
	sid string
	id  int64
}

func (c *mcpClient) nextID() int64 {
	c.mu.Lock()
	defer c.mu.Unlock()
	c.id++
	return c.id
}

func (c *mcpClient) initialize(ctx context.Context) error {
	params := map[string]any{
		"protocolVersion": mcpProtocolVersion,
		"capabilities":    map[string]any{},
		"clientInfo":      map[string]string{"name": "ic-e2e-probe", "version": "1"},
	}
	if _, err := c.rpc(ctx, "initialize", params, true); err != nil {
		return err
	}
	if c.sid == "" {
		return errors.New("initialize answered without Mcp-Session-Id")
	}
	_, err := c.rpc(ctx, "notifications/initialized", nil, false)
	return err
}

// close ends the MCP session (HTTP DELETE), so that repeated plans do not
// pile up sessions on the gateway; errors are ignored.
func (c *mcpClient) close() {
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
	defer cancel()
	req, err := http.NewRequestWithContext(ctx, http.MethodDelete, c.url, nil)
	if err != nil || c.sid == "" {
		return
	}
	req.Header.Set("Authorization", "Bearer "+c.token)
	req.Header.Set("Mcp-Session-Id", c.sid)
	if resp, err := c.http.Do(req); err == nil {
		resp.Body.Close()
	}
}

// listTools runs tools/list (one page) and returns the tool names.
func (c *mcpClient) listTools(ctx context.Context) ([]string, error) {
	raw, err := c.rpc(ctx, "tools/list", map[string]any{}, true)
	if err != nil {
		return nil, err
	}
	var res struct {
		Tools []struct {
			Name string `json:"name"`
		} `json:"tools"`
	}
	if err := json.Unmarshal(raw, &res); err != nil {
		return nil, fmt.Errorf("decoding the tools/list result: %w", err)
	}
	names := make([]string, 0, len(res.Tools))
	for _, t := range res.Tools {
		names = append(names, t.Name)
	}
	return names, nil
}

// callTool runs tools/call and returns the result's isError and text.
func (c *mcpClient) callTool(ctx context.Context, tool string, args json.RawMessage) (bool, string, error) {
	if len(args) == 0 {
		args = json.RawMessage(`{}`)
	}
	raw, err := c.rpc(ctx, "tools/call", map[string]any{"name": tool, "arguments": args}, true)
	if err != nil {
		return false, "", err
	}
	var res struct {
		IsError bool `json:"isError"`
		Content []struct {
			Type string `json:"type"`
			Text string `json:"text"`
		} `json:"content"`
	}
	if err := json.Unmarshal(raw, &res); err != nil {
		return false, "", fmt.Errorf("decoding the tools/call result: %w", err)
	}
	var parts []string
	for _, p := range res.Content {
		if p.Type == "text" {
			parts = append(parts, p.Text)
		}
	}
	return res.IsError, strings.Join(parts, "\n"), nil
}

// rpc sends one JSON-RPC request (or notification, without an id) and
// returns the result of the answer with its id.
func (c *mcpClient) rpc(ctx context.Context, method string, params any, request bool) (json.RawMessage, error) {
	msg := map[string]any{"jsonrpc": "2.0", "method": method}
	if params != nil {
		msg["params"] = params
	}
	var id int64
	if request {
		id = c.nextID()
		msg["id"] = id
	}
	body, err := json.Marshal(msg)
	if err != nil {
		return nil, err
	}
	req, err := http.NewRequestWithContext(ctx, http.MethodPost, c.url, bytes.NewReader(body))
	if err != nil {
		return nil, err
	}
	req.Header.Set("Content-Type", "application/json")
	req.Header.Set("Accept", "application/json, text/event-stream")
	req.Header.Set("Authorization", "Bearer "+c.token)
	if c.sid != "" {
		req.Header.Set("Mcp-Session-Id", c.sid)
		req.Header.Set("Mcp-Protocol-Version", mcpProtocolVersion)
	}
	resp, err := c.http.Do(req)
	if err != nil {
		return nil, fmt.Errorf("%s: %w", method, err)
	}
	defer resp.Body.Close()
	if method == "initialize" {
		c.sid = resp.Header.Get("Mcp-Session-Id")
	}
	if resp.StatusCode == http.StatusAccepted && !request {
		return nil, nil
	}
	if resp.StatusCode != http.StatusOK {
		b, _ := io.ReadAll(io.LimitReader(resp.Body, 4096))
		return nil, fmt.Errorf("%s: HTTP %d: %s", method, resp.StatusCode, strings.TrimSpace(string(b)))
	}
	if !request {
		return nil, nil
	}
	return readRPCAnswer(resp.Header.Get("Content-Type"), io.LimitReader(resp.Body, mcpMaxBody), id)
}

// rpcMessage is a JSON-RPC answer or notification.
type rpcMessage struct {
	ID     *int64          `json:"id"`
	Result json.RawMessage `json:"result"`
	Error  *struct {
		Code    int    `json:"code"`
		Message string `json:"message"`
	} `json:"error"`
}

// readRPCAnswer reads the answer with id from a JSON body or an event
// stream (whose other messages, notifications, are skipped).
func readRPCAnswer(contentType string, body io.Reader, id int64) (json.RawMessage, error) {
	answer := func(data []byte) (json.RawMessage, bool, error) {
		var m rpcMessage
		if err := json.Unmarshal(data, &m); err != nil {
			return nil, false, fmt.Errorf("decoding a JSON-RPC message: %w", err)
		}
		if m.ID == nil || *m.ID != id {
			return nil, false, nil
		}
		if m.Error != nil {
			return nil, true, fmt.Errorf("JSON-RPC error %d: %s", m.Error.Code, m.Error.Message)
		}
		return m.Result, true, nil
	}
	if !strings.HasPrefix(contentType, "text/event-stream") {
		b, err := io.ReadAll(body)
		if err != nil {
			return nil, err
		}
		res, ok, err := answer(b)
		if err == nil && !ok {
			err = fmt.Errorf("the answer does not carry id %d", id)
		}
		return res, err
	}
	sc := bufio.NewScanner(body)
	sc.Buffer(make([]byte, 64<<10), mcpMaxBody)
	var data []byte
	for sc.Scan() {
		line := sc.Text()
		switch {
		case strings.HasPrefix(line, "data:"):
			data = append(data, strings.TrimPrefix(strings.TrimPrefix(line, "data:"), " ")...)
		case line == "":
			if len(data) > 0 {
				res, ok, err := answer(data)
				if err != nil || ok {
					return res, err
				}
			}
			data = data[:0]
		}
	}
	if err := sc.Err(); err != nil {
		return nil, fmt.Errorf("reading the event stream: %w", err)
	}
	if len(data) > 0 {
		if res, ok, err := answer(data); err != nil || ok {
			return res, err
		}
	}
	return nil, fmt.Errorf("the event stream ended without the answer to id %d", id)
}
