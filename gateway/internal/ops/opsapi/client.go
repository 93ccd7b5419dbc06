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

	"ironcurtain.dev/gateway/internal/audit"
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

// send makes a request and returns the response of a 2xx answer (the
// caller closes its body); any other answer is returned as an *APIError.
func (c *Client) send(ctx context.Context, method, path string, query url.Values, body any) (*http.Response, error) {
	u := *c.base
	u.Path += path
	u.RawQuery = query.Encode()
	var rd io.Reader
	if body != nil {
		b, err := json.Marshal(body)
		if err != nil {
			return nil, fmt.Errorf("encoding request: %w", err)
		}
		rd = bytes.NewReader(b)
	}
	req, err := http.NewRequestWithContext(ctx, method, u.String(), rd)
	if err != nil {
		return nil, fmt.Errorf("building request: %w", err)
	}
	req.Header.Set("Authorization", "Bearer "+string(c.token))
	if body != nil {
		req.Header.Set("Content-Type", "application/json")
	}
	resp, err := c.http.Do(req)
	if err != nil {
		return nil, fmt.Errorf("calling ops API: %w", err)
	}
	if resp.StatusCode/100 == 2 {
		return resp, nil
	}
	defer resp.Body.Close()
	data, _ := io.ReadAll(io.LimitReader(resp.Body, 64<<10))
	var eb ErrorBody
	if json.Unmarshal(data, &eb) == nil && eb.Error.Code != "" {
		return nil, &APIError{Status: resp.StatusCode, Code: eb.Error.Code, Message: eb.Error.Message}
	}
	return nil, &APIError{Status: resp.StatusCode, Code: "http", Message: http.StatusText(resp.StatusCode)}
}

// do makes a request and decodes its JSON answer into out (nil: ignored).
// One escalation with its whole arguments is the largest answer.
func (c *Client) do(ctx context.Context, method, path string, query url.Values, body, out any) error {
	resp, err := c.send(ctx, method, path, query, body)
	if err != nil {
		return err
	}
	defer resp.Body.Close()
	if out == nil {
		return nil
	}
	if err := json.NewDecoder(io.LimitReader(resp.Body, 32<<20)).Decode(out); err != nil {
		return fmt.Errorf("decoding ops API answer: %w", err)
	}
	return nil
}

// ListEscalations lists escalations (status "" = all), at most f.Limit
// (0: one page of the server's default size). It collects them: use
// EachEscalation where they are printed as they come.
func (c *Client) ListEscalations(ctx context.Context, f escalation.ListFilter) ([]escalation.Escalation, error) {
	var out []escalation.Escalation
	err := c.EachEscalation(ctx, f, func(e *escalation.Escalation) error {
		out = append(out, *e)
		return nil
	})
	return out, err
}

// EachEscalation calls fn with each escalation matching f (status "" =
// all), decoding each page as it arrives, one escalation at a time, and
// following "next" tokens until f.Limit escalations were seen or none are
// left (f.Limit 0: one page of the server's default size). Arguments are
// in the listing form (escalation.ListArgsBytes): GetEscalation shows them
// whole. fn may return audit.ErrStop to end early. The *Escalation is
// reused: copy what you keep.
func (c *Client) EachEscalation(ctx context.Context, f escalation.ListFilter, fn func(*escalation.Escalation) error) error {
	seen := 0
	cursor := f.Cursor.String()
	for {
		q := url.Values{}
		if f.Status != "" {
			q.Set("status", f.Status)
		}
		if f.Session != "" {
			q.Set("session", f.Session)
		}
		if f.Limit > 0 {
			q.Set("limit", strconv.Itoa(f.Limit-seen))
		}
		if cursor != "" {
			q.Set("cursor", cursor)
		}
		n, next, err := c.escalationPage(ctx, q, fn)
		seen += n
		if err != nil {
			if errors.Is(err, audit.ErrStop) {
				return nil
			}
			return err
		}
		if next == "" || n == 0 || f.Limit <= 0 || seen >= f.Limit {
			return nil
		}
		cursor = next
	}
}

// escalationPage reads one page of GET /v1/escalations, calling fn with
// each escalation as it is decoded. It returns how many it saw and the
// page's next token.
func (c *Client) escalationPage(ctx context.Context, q url.Values, fn func(*escalation.Escalation) error) (int, string, error) {
	return readPage(ctx, c, "/v1/escalations", "escalations", q, fn)
}

// readPage reads one page of a listing (GET path: {key: [...], next,
// error}), calling fn with each row as it is decoded; fn may not keep the
// pointer, which points at the same variable each time. It returns how
// many rows it saw and the page's next token.
func readPage[T any](ctx context.Context, c *Client, path, key string, q url.Values, fn func(*T) error) (int, string, error) {
	resp, err := c.send(ctx, http.MethodGet, path, q, nil)
	if err != nil {
		return 0, "", err
	}
	defer resp.Body.Close()
	dec := json.NewDecoder(resp.Body)
	bad := func(err error) error { return fmt.Errorf("decoding ops API answer: %w", err) }
	if err := expectDelim(dec, '{'); err != nil {
		return 0, "", bad(err)
	}
	var (
		n      int
		next   string
		failed *ErrorDetail
		row    T
	)
	for dec.More() {
		tok, err := dec.Token()
		if err != nil {
			return n, "", bad(err)
		}
		switch tok {
		case key:
			if err := expectDelim(dec, '['); err != nil {
				return n, "", bad(err)
			}
			for dec.More() {
				var zero T
				row = zero
				if err := dec.Decode(&row); err != nil {
					return n, "", bad(err)
				}
				n++
				if err := fn(&row); err != nil {
					return n, "", err
				}
			}
			if err := expectDelim(dec, ']'); err != nil {
				return n, "", bad(err)
			}
		case "next":
			err = dec.Decode(&next)
		case "error":
			err = dec.Decode(&failed)
		default:
			var skip json.RawMessage
			err = dec.Decode(&skip)
		}
		if err != nil {
			return n, "", bad(err)
		}
	}
	if failed != nil {
		return n, "", &APIError{Status: resp.StatusCode, Code: failed.Code, Message: failed.Message}
	}
	return n, next, nil
}

func expectDelim(dec *json.Decoder, want json.Delim) error {
	tok, err := dec.Token()
	if err != nil {
		return err
	}
	if d, ok := tok.(json.Delim); !ok || d != want {
		return fmt.Errorf("want %q, got %v", want, tok)
	}
	return nil
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

// CreateSession mints a session; the answer holds its token, shown once.
func (c *Client) CreateSession(ctx context.Context, r CreateSessionRequest) (CreatedSession, error) {
	var out CreatedSession
	err := c.do(ctx, http.MethodPost, "/v1/sessions", nil, r, &out)
	return out, err
}

// ListSessions lists sessions (minted and static), the most recently active
// first, at most limit (0: one page of the server's default size, 100).
func (c *Client) ListSessions(ctx context.Context, limit int) ([]SessionSummary, error) {
	var out []SessionSummary
	err := c.EachSession(ctx, SessionFilter{Limit: limit}, func(s *SessionSummary) error {
		out = append(out, *s)
		return nil
	})
	return out, err
}

// EachSession calls fn with each session of the listing as it is decoded,
// following the server's next tokens until f.Limit rows (0: one page).
func (c *Client) EachSession(ctx context.Context, f SessionFilter, fn func(*SessionSummary) error) error {
	total, cursor := 0, f.Cursor.String()
	for {
		q := url.Values{}
		if f.Status != "" {
			q.Set("status", f.Status)
		}
		if f.Limit > 0 {
			q.Set("limit", strconv.Itoa(min(f.Limit-total, MaxSessionLimit)))
		}
		if cursor != "" {
			q.Set("cursor", cursor)
		}
		n, next, err := c.sessionPage(ctx, q, fn)
		total += n
		if err != nil || next == "" || f.Limit <= 0 || total >= f.Limit || n == 0 {
			return err
		}
		cursor = next
	}
}

// sessionPage reads one page of GET /v1/sessions (readPage).
func (c *Client) sessionPage(ctx context.Context, q url.Values, fn func(*SessionSummary) error) (int, string, error) {
	return readPage(ctx, c, "/v1/sessions", "sessions", q, fn)
}

// GetSession shows one session with its usage.
func (c *Client) GetSession(ctx context.Context, id string) (SessionSummary, error) {
	var out SessionSummary
	err := c.do(ctx, http.MethodGet, "/v1/sessions/"+url.PathEscape(id), nil, nil, &out)
	return out, err
}

// RevokeSession revokes a minted session and cancels its pending escalations.
func (c *Client) RevokeSession(ctx context.Context, id, reason string) (RevokedSession, error) {
	var out RevokedSession
	var body any
	if reason != "" {
		body = RevokeSessionRequest{Reason: reason}
	}
	err := c.do(ctx, http.MethodDelete, "/v1/sessions/"+url.PathEscape(id), nil, body, &out)
	return out, err
}
