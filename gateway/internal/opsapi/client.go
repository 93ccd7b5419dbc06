package opsapi

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net/http"
	"net/url"
	"strconv"
	"strings"
	"time"

	"ironcurtain.dev/gateway/internal/escalation"
)

// Client talks to the ops API (used by `ironcurtain escalations`).
type Client struct {
	base  *url.URL
	token OperatorToken
	http  *http.Client
}

// NewClient returns a client for the ops API at baseURL (for example
// http://127.0.0.1:8081).
func NewClient(baseURL string, token OperatorToken) (*Client, error) {
	u, err := url.Parse(strings.TrimRight(baseURL, "/"))
	if err != nil || (u.Scheme != "http" && u.Scheme != "https") || u.Host == "" {
		return nil, fmt.Errorf("ops API URL %q: want http(s)://host:port", baseURL)
	}
	if token == "" {
		return nil, errors.New("operator token: not set (use --token-file or IRONCURTAIN_OPERATOR_TOKEN)")
	}
	return &Client{base: u, token: token, http: &http.Client{Timeout: 30 * time.Second}}, nil
}

// APIError is an error answer of the ops API.
type APIError struct {
	Status  int
	Code    string
	Message string
}

func (e *APIError) Error() string {
	return fmt.Sprintf("ops API: %s (%d %s)", e.Message, e.Status, e.Code)
}

func (c *Client) do(ctx context.Context, method, path string, query url.Values, body, out any) error {
	u := *c.base
	u.Path += path
	u.RawQuery = query.Encode()
	var rd io.Reader
	if body != nil {
		b, err := json.Marshal(body)
		if err != nil {
			return fmt.Errorf("encoding request: %w", err)
		}
		rd = bytes.NewReader(b)
	}
	req, err := http.NewRequestWithContext(ctx, method, u.String(), rd)
	if err != nil {
		return fmt.Errorf("building request: %w", err)
	}
	req.Header.Set("Authorization", "Bearer "+string(c.token))
	if body != nil {
		req.Header.Set("Content-Type", "application/json")
	}
	resp, err := c.http.Do(req)
	if err != nil {
		return fmt.Errorf("calling ops API: %w", err)
	}
	defer resp.Body.Close()
	data, err := io.ReadAll(io.LimitReader(resp.Body, 32<<20))
	if err != nil {
		return fmt.Errorf("reading ops API answer: %w", err)
	}
	if resp.StatusCode/100 != 2 {
		var eb ErrorBody
		if json.Unmarshal(data, &eb) == nil && eb.Error.Code != "" {
			return &APIError{Status: resp.StatusCode, Code: eb.Error.Code, Message: eb.Error.Message}
		}
		return &APIError{Status: resp.StatusCode, Code: "http", Message: http.StatusText(resp.StatusCode)}
	}
	if out != nil {
		if err := json.Unmarshal(data, out); err != nil {
			return fmt.Errorf("decoding ops API answer: %w", err)
		}
	}
	return nil
}

// ListEscalations lists escalations (status "" = all).
func (c *Client) ListEscalations(ctx context.Context, f escalation.ListFilter) ([]escalation.Escalation, error) {
	q := url.Values{}
	if f.Status != "" {
		q.Set("status", f.Status)
	}
	if f.Session != "" {
		q.Set("session", f.Session)
	}
	if f.Limit > 0 {
		q.Set("limit", strconv.Itoa(f.Limit))
	}
	var out struct {
		Escalations []escalation.Escalation `json:"escalations"`
	}
	err := c.do(ctx, http.MethodGet, "/v1/escalations", q, nil, &out)
	return out.Escalations, err
}

// GetEscalation returns one escalation.
func (c *Client) GetEscalation(ctx context.Context, id string) (escalation.Escalation, error) {
	var out escalation.Escalation
	err := c.do(ctx, http.MethodGet, "/v1/escalations/"+url.PathEscape(id), nil, nil, &out)
	return out, err
}

// Decide approves or denies an escalation.
func (c *Client) Decide(ctx context.Context, id string, approve bool, r DecideRequest) (escalation.Escalation, error) {
	verb := "deny"
	if approve {
		verb = "approve"
	}
	var out escalation.Escalation
	err := c.do(ctx, http.MethodPost, "/v1/escalations/"+url.PathEscape(id)+"/"+verb, nil, r, &out)
	return out, err
}
