package console

import (
	"context"
	"errors"
	"fmt"
	"net/http"
	"strconv"
	"strings"
	"time"

	"ironcurtain.dev/gateway/internal/ops/opsapi"
)

// SessionAdmin lists, mints and revokes per-run sessions (the sessions
// store); the wiring adapts it.
type SessionAdmin interface {
	List(ctx context.Context, limit int) ([]SessionRow, error)
	// Mint creates a session and returns it with its token (shown once).
	Mint(ctx context.Context, m MintRequest, by string) (SessionRow, string, error)
	Revoke(ctx context.Context, id, by, reason string) error
}

// SessionRow is one session as the sessions page lists it.
type SessionRow struct {
	opsapi.SessionSummary
	Name      string
	Status    string // static | active | expired | revoked
	Minted    bool
	ExpiresAt *time.Time
	// Budget in words ("" = none), e.g. "12/100 tool calls".
	Budget string
	Labels map[string]string
	// Revoked says who revoked the session, when and why ("" when not).
	Revoked string
}

// MintRequest is the create form.
type MintRequest struct {
	Name         string
	TTL          time.Duration
	MaxTokens    int64
	MaxCostUSD   float64
	MaxToolCalls int64
	Labels       map[string]string
}

type sessionsBody struct {
	Rows      []SessionRow
	Now       time.Time
	CanMint   bool
	Minted    *SessionRow
	Token     string
	Truncated bool
}

const sessionRows = 200

func (c *Console) sessionsPage(w http.ResponseWriter, r *http.Request) {
	c.showSessions(w, r, http.StatusOK, sessionsBody{}, "")
}

func (c *Console) showSessions(w http.ResponseWriter, r *http.Request, status int, body sessionsBody, msg string) {
	body.Now = c.now()
	body.CanMint = c.deps.Sessions != nil
	var err error
	if c.deps.Sessions != nil {
		body.Rows, err = c.deps.Sessions.List(r.Context(), sessionRows+1)
	} else {
		var sums []opsapi.SessionSummary
		sums, err = c.deps.Store.Summaries(r.Context(), sessionRows+1)
		for _, s := range sums {
			body.Rows = append(body.Rows, SessionRow{SessionSummary: s, Status: "static"})
		}
	}
	if err != nil {
		c.fail(w, r, err)
		return
	}
	if len(body.Rows) > sessionRows {
		body.Rows, body.Truncated = body.Rows[:sessionRows], true
	}
	if body.Token != "" {
		w.Header().Set("Cache-Control", "no-store")
	}
	c.render(w, r, status, "sessions", page{Title: "Sessions", Nav: "sessions", Body: body, Error: msg})
}

func (c *Console) createSession(w http.ResponseWriter, r *http.Request) {
	if c.deps.Sessions == nil {
		c.fail(w, r, ErrUnavailable)
		return
	}
	m, err := parseMint(r)
	if err != nil {
		c.showSessions(w, r, http.StatusBadRequest, sessionsBody{}, err.Error())
		return
	}
	op := current(r).operator
	row, token, err := c.deps.Sessions.Mint(r.Context(), m, op)
	if err != nil {
		if msg, ok := userError(err); ok {
			c.showSessions(w, r, http.StatusBadRequest, sessionsBody{}, msg)
			return
		}
		c.fail(w, r, err)
		return
	}
	c.log.Info("console: session minted", "session", row.SessionID, "by", op)
	// The token is in this response only: no redirect (it would need the
	// token in a URL or a store).
	c.showSessions(w, r, http.StatusOK, sessionsBody{Minted: &row, Token: token}, "")
}

func (c *Console) revokeSession(w http.ResponseWriter, r *http.Request) {
	if c.deps.Sessions == nil {
		c.fail(w, r, ErrUnavailable)
		return
	}
	id := r.PostFormValue("id")
	reason := r.PostFormValue("reason")
	if !validID(id) || len(reason) > maxReason {
		c.errorPage(w, r, http.StatusBadRequest, "The revoke form is not valid.")
		return
	}
	op := current(r).operator
	if err := c.deps.Sessions.Revoke(r.Context(), id, op, reason); err != nil {
		if msg, ok := userError(err); ok {
			c.showSessions(w, r, http.StatusBadRequest, sessionsBody{}, msg)
			return
		}
		c.fail(w, r, err)
		return
	}
	c.log.Info("console: session revoked", "session", id, "by", op)
	http.Redirect(w, r, "/ui/sessions", http.StatusSeeOther)
}

// UserError marks an error whose message is safe and useful to show the
// operator (a validation message naming the field).
type UserError struct{ Err error }

func (e UserError) Error() string { return e.Err.Error() }
func (e UserError) Unwrap() error { return e.Err }

func userError(err error) (string, bool) {
	var u UserError
	if errors.As(err, &u) {
		return u.Error(), true
	}
	return "", false
}

// parseMint reads the create form: name, ttl (a duration such as 2h),
// max_tokens, max_cost_usd, max_tool_calls, labels (k=v, one a line).
func parseMint(r *http.Request) (MintRequest, error) {
	m := MintRequest{Name: strings.TrimSpace(r.PostFormValue("name"))}
	var err error
	if s := strings.TrimSpace(r.PostFormValue("ttl")); s != "" {
		if m.TTL, err = time.ParseDuration(s); err != nil || m.TTL <= 0 {
			return m, fmt.Errorf("ttl: want a duration such as 2h")
		}
	}
	ints := []struct {
		name string
		dst  *int64
	}{{"max_tokens", &m.MaxTokens}, {"max_tool_calls", &m.MaxToolCalls}}
	for _, f := range ints {
		if s := strings.TrimSpace(r.PostFormValue(f.name)); s != "" {
			if *f.dst, err = strconv.ParseInt(s, 10, 64); err != nil || *f.dst < 0 {
				return m, fmt.Errorf("%s: want a non-negative whole number", f.name)
			}
		}
	}
	if s := strings.TrimSpace(r.PostFormValue("max_cost_usd")); s != "" {
		if m.MaxCostUSD, err = strconv.ParseFloat(s, 64); err != nil || m.MaxCostUSD < 0 || m.MaxCostUSD != m.MaxCostUSD {
			return m, fmt.Errorf("max_cost_usd: want a non-negative number")
		}
	}
	if s := strings.TrimSpace(r.PostFormValue("labels")); s != "" {
		m.Labels = map[string]string{}
		for i, line := range strings.Split(s, "\n") {
			line = strings.TrimSpace(line)
			if line == "" {
				continue
			}
			k, v, ok := strings.Cut(line, "=")
			if !ok {
				return m, fmt.Errorf("labels: line %d: want key=value", i+1)
			}
			m.Labels[strings.TrimSpace(k)] = strings.TrimSpace(v)
		}
	}
	return m, nil
}
