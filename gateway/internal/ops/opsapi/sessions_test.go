package opsapi

import (
	"context"
	"encoding/json"
	"errors"
	"net/http"
	"net/http/httptest"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/prometheus/client_golang/prometheus"

	"ironcurtain.dev/gateway/internal/session/minted"
)

const testSessionID = "sess_abcdefghijklmnopqrstuvwxyz"

type fakeSessions struct {
	mu      sync.Mutex
	minted  []minted.Spec
	by      []string
	revoked []string
	err     error
}

func (f *fakeSessions) Mint(_ context.Context, spec minted.Spec, by string) (minted.Session, minted.Token, error) {
	if err := spec.Validate(time.Now()); err != nil {
		return minted.Session{}, "", err
	}
	if f.err != nil {
		return minted.Session{}, "", f.err
	}
	f.mu.Lock()
	defer f.mu.Unlock()
	f.minted = append(f.minted, spec)
	f.by = append(f.by, by)
	now := time.Now()
	return minted.Session{ID: testSessionID, Name: spec.Name, Status: minted.StatusActive, CreatedAt: now, CreatedBy: by,
		ExpiresAt: spec.Expiry(now), Budget: spec.Budget, Labels: spec.Labels}, minted.Token("icsess_" + strings.Repeat("T", 43)), nil
}

func (f *fakeSessions) Revoke(_ context.Context, id, by, reason string) (minted.Session, []string, error) {
	if err := minted.ValidateReason(reason); err != nil {
		return minted.Session{}, nil, err
	}
	if id != testSessionID {
		return minted.Session{}, nil, minted.ErrNotFound
	}
	f.mu.Lock()
	defer f.mu.Unlock()
	f.revoked = append(f.revoked, id+"|"+by+"|"+reason)
	now := time.Now()
	return minted.Session{ID: id, Status: minted.StatusRevoked, RevokedAt: &now, RevokedBy: by, RevokeReason: reason}, []string{"e9"}, nil
}

func newSessionsAPI(t *testing.T) (http.Handler, *fakeSessions) {
	t.Helper()
	ops, err := NewOperators(map[string]OperatorToken{"alice": opToken})
	if err != nil {
		t.Fatal(err)
	}
	fs := &fakeSessions{}
	reg := prometheus.NewRegistry()
	return New(Deps{Operators: ops, Escalations: &fakeEscalations{}, Data: &fakeData{}, Sessions: fs, Gatherer: reg, Registerer: reg}), fs
}

func do(h http.Handler, method, path, auth, body string) *httptest.ResponseRecorder {
	req := httptest.NewRequest(method, path, strings.NewReader(body))
	if auth != "" {
		req.Header.Set("Authorization", auth)
	}
	if body != "" {
		req.Header.Set("Content-Type", "application/json")
	}
	rec := httptest.NewRecorder()
	h.ServeHTTP(rec, req)
	return rec
}

// TestSessionRoutesOperatorOnly: minting and revoking need an operator
// token; an agent token, a wrong one or none mints and revokes nothing.
func TestSessionRoutesOperatorOnly(t *testing.T) {
	h, fs := newSessionsAPI(t)
	for _, auth := range []string{"", "Bearer " + agentToken, "Bearer " + opToken + "x", "Basic " + opToken, opToken} {
		if rec := do(h, http.MethodPost, "/v1/sessions", auth, `{"name":"run"}`); rec.Code != http.StatusUnauthorized {
			t.Errorf("POST with %q: %d", auth, rec.Code)
		}
		if rec := do(h, http.MethodDelete, "/v1/sessions/"+testSessionID, auth, ""); rec.Code != http.StatusUnauthorized {
			t.Errorf("DELETE with %q: %d", auth, rec.Code)
		}
	}
	if len(fs.minted) != 0 || len(fs.revoked) != 0 {
		t.Fatalf("minted %v, revoked %v without an operator token", fs.minted, fs.revoked)
	}
}

// TestCreateSession: the answer carries the token once, is not cached, and
// records the operator; bad bodies get a 400 naming the field.
func TestCreateSession(t *testing.T) {
	h, fs := newSessionsAPI(t)
	rec := do(h, http.MethodPost, "/v1/sessions", "Bearer "+opToken,
		`{"name":"run-7","ttl":"2h","budget":{"max_tokens":1000,"max_cost_usd":1.5,"max_tool_calls":20},"labels":{"team":"infra"}}`)
	if rec.Code != http.StatusCreated {
		t.Fatalf("status %d: %s", rec.Code, rec.Body)
	}
	if cc := rec.Header().Get("Cache-Control"); cc != "no-store" {
		t.Errorf("Cache-Control = %q, want no-store", cc)
	}
	var out CreatedSession
	if err := json.Unmarshal(rec.Body.Bytes(), &out); err != nil {
		t.Fatal(err)
	}
	if !strings.HasPrefix(out.Token, "icsess_") || out.Session.SessionID != testSessionID || out.Session.Status != "active" ||
		out.Session.Minted == nil || out.Session.Minted.Name != "run-7" || out.Session.Minted.Budget.MaxToolCalls != 20 {
		t.Fatalf("answer = %+v", out)
	}
	if fs.by[0] != "alice" || fs.minted[0].TTL != 2*time.Hour || fs.minted[0].Labels["team"] != "infra" {
		t.Fatalf("store got %+v by %v", fs.minted, fs.by)
	}

	bad := []struct{ body, want string }{
		{`{"name":"<script>alert(1)</script>"}`, "name:"},
		{`{"name":"r","ttl":"forever"}`, "ttl:"},
		{`{"name":"r","ttl":"1s"}`, "ttl: must be between"},
		{`{"name":"r","ttl":"0s"}`, "ttl:"},
		{`{"name":"r","ttl":"1h","expires_at":"2030-01-01T00:00:00Z"}`, "expires_at:"},
		{`{"name":"r","budget":{"max_tokens":-1}}`, "budget.max_tokens"},
		{`{"name":"r","budget":{"max_cost_usd":-1}}`, "budget.max_cost_usd"},
		{`{"name":"r","labels":{"k":"\u202egpj.exe"}}`, `labels[\"k\"]`},
		{`{"name":"r","labels":{"K K":"v"}}`, `labels[\"K K\"]`},
		{`{"name":"r","token":"mine"}`, "body:"}, // no choosing one's own token
		{`{"name":"r","id":"agent"}`, "body:"},   // nor one's id
		{`{"name":"r"} {"name":"s"}`, ""},        // trailing data is ignored by Decode: one session only
		{`not json`, "body:"},
	}
	for _, b := range bad {
		rec := do(h, http.MethodPost, "/v1/sessions", "Bearer "+opToken, b.body)
		if b.want == "" {
			continue
		}
		if rec.Code != http.StatusBadRequest || !strings.Contains(rec.Body.String(), b.want) {
			t.Errorf("%s: %d %s, want 400 naming %s", b.body, rec.Code, rec.Body, b.want)
		}
		if strings.Contains(rec.Body.String(), "invalid session: ") {
			t.Errorf("%s: the message keeps the wrapping prefix: %s", b.body, rec.Body)
		}
	}
	// An oversized body is refused, not read whole.
	big := `{"name":"r","labels":{"k":"` + strings.Repeat("x", maxBody) + `"}}`
	if rec := do(h, http.MethodPost, "/v1/sessions", "Bearer "+opToken, big); rec.Code != http.StatusBadRequest {
		t.Errorf("oversized body: %d", rec.Code)
	}
}

// TestCreateSessionStoreDown: a failing store is a 503 or a 500 with no detail.
func TestCreateSessionStoreDown(t *testing.T) {
	h, fs := newSessionsAPI(t)
	fs.err = errors.New("pq: secret internal detail")
	rec := do(h, http.MethodPost, "/v1/sessions", "Bearer "+opToken, `{"name":"r"}`)
	if rec.Code/100 != 5 || strings.Contains(rec.Body.String(), "secret internal detail") || strings.Contains(rec.Body.String(), "icsess_") {
		t.Fatalf("store down: %d %s", rec.Code, rec.Body)
	}
}

// TestRevokeSession: the operator and reason reach the store, the
// cancelled escalations are listed; a static session is a 409, an unknown
// one a 404, a hostile reason a 400.
func TestRevokeSession(t *testing.T) {
	h, fs := newSessionsAPI(t)
	rec := do(h, http.MethodDelete, "/v1/sessions/"+testSessionID, "Bearer "+opToken, `{"reason":"run over"}`)
	if rec.Code != http.StatusOK {
		t.Fatalf("status %d: %s", rec.Code, rec.Body)
	}
	var out RevokedSession
	if err := json.Unmarshal(rec.Body.Bytes(), &out); err != nil {
		t.Fatal(err)
	}
	if out.Session.Status != "revoked" || len(out.CancelledEscalations) != 1 || fs.revoked[0] != testSessionID+"|alice|run over" {
		t.Fatalf("answer %+v, store %v", out, fs.revoked)
	}
	if rec := do(h, http.MethodDelete, "/v1/sessions/"+testSessionID, "Bearer "+opToken, ""); rec.Code != http.StatusOK {
		t.Errorf("revoke without a body: %d", rec.Code)
	}
	if rec := do(h, http.MethodDelete, "/v1/sessions/s1", "Bearer "+opToken, ""); rec.Code != http.StatusConflict || !strings.Contains(rec.Body.String(), "token file") {
		t.Errorf("static session: %d %s", rec.Code, rec.Body)
	}
	if rec := do(h, http.MethodDelete, "/v1/sessions/nobody", "Bearer "+opToken, ""); rec.Code != http.StatusNotFound {
		t.Errorf("unknown static: %d", rec.Code)
	}
	if rec := do(h, http.MethodDelete, "/v1/sessions/sess_bbbbbbbbbbbbbbbbbbbbbbbbbb", "Bearer "+opToken, ""); rec.Code != http.StatusNotFound {
		t.Errorf("unknown minted: %d", rec.Code)
	}
	if rec := do(h, http.MethodDelete, "/v1/sessions/"+testSessionID, "Bearer "+opToken, `{"reason":"a\u0000b"}`); rec.Code != http.StatusBadRequest || !strings.Contains(rec.Body.String(), "reason:") {
		t.Errorf("hostile reason: %d %s", rec.Code, rec.Body)
	}
	if rec := do(h, http.MethodDelete, "/v1/sessions/"+testSessionID, "Bearer "+opToken, `{"why":"x"}`); rec.Code != http.StatusBadRequest {
		t.Errorf("unknown field: %d", rec.Code)
	}
}

// TestSessionsWithoutStore: without a database there is nothing to mint.
func TestSessionsWithoutStore(t *testing.T) {
	h, _, _ := newTestAPI(t)
	if rec := do(h, http.MethodPost, "/v1/sessions", "Bearer "+opToken, `{"name":"r"}`); rec.Code != http.StatusNotFound {
		t.Errorf("POST without a store: %d", rec.Code)
	}
	if rec := do(h, http.MethodDelete, "/v1/sessions/"+testSessionID, "Bearer "+opToken, ""); rec.Code != http.StatusNotFound {
		t.Errorf("DELETE without a store: %d", rec.Code)
	}
}

// TestSessionJSONInert: operator-given strings that look like markup come
// back JSON-escaped (no raw "<" in the body), never as HTML.
func TestSessionJSONInert(t *testing.T) {
	h, _ := newSessionsAPI(t)
	rec := do(h, http.MethodPost, "/v1/sessions", "Bearer "+opToken, `{"name":"r","labels":{"note":"<script>alert(1)</script>\"><img src=x onerror=alert(1)>"}}`)
	if rec.Code != http.StatusCreated {
		t.Fatalf("status %d: %s", rec.Code, rec.Body)
	}
	if strings.ContainsAny(rec.Body.String(), "<>") || rec.Header().Get("Content-Type") != "application/json" || rec.Header().Get("X-Content-Type-Options") != "nosniff" {
		t.Fatalf("body %s, headers %v", rec.Body, rec.Header())
	}
	var out CreatedSession
	if err := json.Unmarshal(rec.Body.Bytes(), &out); err != nil || out.Session.Minted.Labels["note"] != `<script>alert(1)</script>"><img src=x onerror=alert(1)>` {
		t.Fatalf("labels %v, %v", out.Session.Minted, err)
	}
}

// FuzzCreateSessionBody: whatever the body, the answer is a 201 (a spec
// the validation accepted was minted) or a 400 (nothing was): never a 5xx.
func FuzzCreateSessionBody(f *testing.F) {
	f.Add(`{"name":"run-1","ttl":"2h","budget":{"max_tokens":1,"max_cost_usd":0.5,"max_tool_calls":3},"labels":{"a":"b"}}`)
	f.Add(`{"name":"<x>","ttl":"-1h","budget":{"max_cost_usd":-1e309}}`)
	f.Add(`{"name":"r","expires_at":"1970-01-01T00:00:00Z"}`)
	f.Add(`{"name":"r","labels":{"k":"\u202e"}}`)
	f.Add(`[]`)
	f.Fuzz(func(t *testing.T, body string) {
		h, fs := newSessionsAPI(t)
		rec := do(h, http.MethodPost, "/v1/sessions", "Bearer "+opToken, body)
		switch rec.Code {
		case http.StatusCreated:
			// The fake store mints only what minted.Spec.Validate accepts.
			if len(fs.minted) != 1 {
				t.Fatalf("201 without a mint")
			}
		case http.StatusBadRequest:
			if len(fs.minted) != 0 {
				t.Fatalf("400 after a mint")
			}
		default:
			t.Fatalf("status %d for %q: %s", rec.Code, body, rec.Body)
		}
	})
}
