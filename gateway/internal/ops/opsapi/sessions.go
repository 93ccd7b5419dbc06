package opsapi

import (
	"context"
	"errors"
	"net/http"
	"strings"
	"time"

	"github.com/go-chi/chi/v5"

	"ironcurtain.dev/gateway/internal/session/minted"
)

// SessionStore mints and revokes per-run sessions (*minted.Store).
type SessionStore interface {
	Mint(ctx context.Context, spec minted.Spec, by string) (minted.Session, minted.Token, error)
	Revoke(ctx context.Context, id, by, reason string) (minted.Session, []string, error)
}

var _ SessionStore = (*minted.Store)(nil)

// CreateSessionRequest is the body of POST /v1/sessions. Give TTL (a Go
// duration such as "2h") or ExpiresAt, not both; neither: minted.DefaultTTL.
type CreateSessionRequest struct {
	Name      string            `json:"name"`
	TTL       string            `json:"ttl,omitempty"`
	ExpiresAt *time.Time        `json:"expires_at,omitempty"`
	Budget    minted.Budget     `json:"budget"`
	Labels    map[string]string `json:"labels,omitempty"`
}

// Spec converts the request (the error names the field).
func (r CreateSessionRequest) Spec() (minted.Spec, error) {
	spec := minted.Spec{Name: r.Name, Budget: r.Budget, Labels: r.Labels}
	if r.TTL != "" {
		d, err := time.ParseDuration(r.TTL)
		if err != nil {
			return spec, errors.New("ttl: want a duration such as 30m or 8h")
		}
		if d == 0 {
			return spec, errors.New("ttl: must not be zero")
		}
		spec.TTL = d
	}
	if r.ExpiresAt != nil {
		spec.ExpiresAt = *r.ExpiresAt
	}
	return spec, nil
}

// CreatedSession is the answer of POST /v1/sessions. Token is shown here
// once and never again.
type CreatedSession struct {
	Session SessionSummary `json:"session"`
	Token   string         `json:"token"`
}

// RevokeSessionRequest is the optional body of DELETE /v1/sessions/{id}.
type RevokeSessionRequest struct {
	Reason string `json:"reason,omitempty"`
}

// RevokedSession is the answer of DELETE /v1/sessions/{id}.
type RevokedSession struct {
	Session              SessionSummary `json:"session"`
	CancelledEscalations []string       `json:"cancelled_escalations"`
}

func mintedSummary(s minted.Session) SessionSummary {
	return SessionSummary{SessionID: s.ID, FirstSeen: s.CreatedAt, LastSeen: s.CreatedAt, Status: s.Status, Minted: &s}
}

func (a *api) createSession(w http.ResponseWriter, r *http.Request) {
	if a.deps.Sessions == nil {
		writeError(w, http.StatusNotFound, CodeNotFound, "minted sessions need the database")
		return
	}
	var body CreateSessionRequest
	if err := decodeBody(w, r, &body); err != nil {
		writeError(w, http.StatusBadRequest, CodeBadRequest, "body: "+err.Error()+`; want {"name": "...", "ttl": "8h", "budget": {...}, "labels": {...}}`)
		return
	}
	spec, err := body.Spec()
	if err != nil {
		writeError(w, http.StatusBadRequest, CodeBadRequest, err.Error())
		return
	}
	operator, _ := r.Context().Value(operatorKey{}).(string)
	s, tok, err := a.deps.Sessions.Mint(r.Context(), spec, operator)
	if err != nil {
		a.fail(w, err)
		return
	}
	a.log.Info("session minted", "session", s.ID, "name", s.Name, "by", operator, "expires_at", s.ExpiresAt,
		"max_tokens", s.Budget.MaxTokens, "max_cost_usd", s.Budget.MaxCostUSD, "max_tool_calls", s.Budget.MaxToolCalls)
	writeJSON(w, http.StatusCreated, CreatedSession{Session: mintedSummary(s), Token: string(tok)})
}

func (a *api) revokeSession(w http.ResponseWriter, r *http.Request) {
	id := chi.URLParam(r, "id")
	if !minted.ValidID(id) {
		// A static session (token file) or no session at all.
		if _, err := a.deps.Data.Session(r.Context(), id); err != nil {
			a.fail(w, err)
			return
		}
		writeError(w, http.StatusConflict, CodeConflict, "a session from a token file is revoked by removing its token file and restarting the gateway")
		return
	}
	if a.deps.Sessions == nil {
		writeError(w, http.StatusNotFound, CodeNotFound, "minted sessions need the database")
		return
	}
	var body RevokeSessionRequest
	if r.ContentLength != 0 {
		if err := decodeBody(w, r, &body); err != nil {
			writeError(w, http.StatusBadRequest, CodeBadRequest, "body: "+err.Error()+`; want {"reason": "..."}`)
			return
		}
	}
	operator, _ := r.Context().Value(operatorKey{}).(string)
	s, cancelled, err := a.deps.Sessions.Revoke(r.Context(), id, operator, body.Reason)
	if err != nil {
		a.fail(w, err)
		return
	}
	a.log.Info("session revoked", "session", s.ID, "name", s.Name, "by", operator, "cancelled_escalations", len(cancelled))
	out := RevokedSession{Session: mintedSummary(s), CancelledEscalations: cancelled}
	if out.CancelledEscalations == nil {
		out.CancelledEscalations = []string{}
	}
	if sum, err := a.deps.Data.Session(r.Context(), id); err == nil {
		out.Session = sum
	}
	writeJSON(w, http.StatusOK, out)
}

// sessionError maps the minted store's errors (nil: not one of them).
func sessionError(w http.ResponseWriter, err error) bool {
	switch {
	case errors.Is(err, minted.ErrInvalid):
		msg := err.Error()
		// Joined errors: one line per field, each "invalid session: field: why".
		msg = strings.ReplaceAll(msg, minted.ErrInvalid.Error()+": ", "")
		writeError(w, http.StatusBadRequest, CodeBadRequest, strings.ReplaceAll(msg, "\n", "; "))
	case errors.Is(err, minted.ErrNotFound):
		writeError(w, http.StatusNotFound, CodeNotFound, "not found")
	default:
		return false
	}
	return true
}
