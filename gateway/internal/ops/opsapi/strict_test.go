package opsapi

import (
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"

	"ironcurtain.dev/gateway/internal/audit"
)

// TestStrictBodies: the ops API reads JSON bodies as an exact-key reader
// does. Before strictjson, encoding/json took "Reason" for reason and let
// a later duplicate win, so an approval recorded one reason while a body
// said two; "Similar" widened an approval that a reviewer of the body read
// as exact. Each is refused (400, naming what), and nothing is decided or
// minted.
func TestStrictBodies(t *testing.T) {
	tests := []struct {
		name, method, path, body, want string
	}{
		{name: "approve case-variant name", method: "POST", path: "/v1/escalations/e1/approve", body: `{"Similar":"domain"}`, want: "unknown name"},
		{name: "approve duplicate similar", method: "POST", path: "/v1/escalations/e1/approve", body: `{"similar":"exact","similar":"domain"}`, want: "twice"},
		{name: "approve duplicate reason", method: "POST", path: "/v1/escalations/e1/approve", body: `{"reason":"a","reason":"b"}`, want: "twice"},
		{name: "deny trailing value", method: "POST", path: "/v1/escalations/e1/deny", body: `{"reason":"a"}{"reason":"b"}`, want: "after"},
		{name: "deny invalid UTF-8", method: "POST", path: "/v1/escalations/e1/deny", body: "{\"reason\":\"\xff\"}", want: "not valid"},
		{name: "mint case-variant name", method: "POST", path: "/v1/sessions", body: `{"name":"r","TTL":"87600h"}`, want: "unknown name"},
		{name: "mint duplicate ttl", method: "POST", path: "/v1/sessions", body: `{"name":"r","ttl":"1h","ttl":"87600h"}`, want: "twice"},
		{name: "mint duplicate budget field", method: "POST", path: "/v1/sessions", body: `{"name":"r","budget":{"max_tool_calls":1,"max_tool_calls":0}}`, want: "twice"},
		{name: "mint duplicate label", method: "POST", path: "/v1/sessions", body: `{"name":"r","labels":{"team":"a","team":"b"}}`, want: "twice"},
		{name: "revoke duplicate reason", method: "DELETE", path: "/v1/sessions/" + testSessionID, body: `{"reason":"a","reason":"b"}`, want: "twice"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			h, fs := newSessionsAPI(t)
			hEsc, esc, _ := newTestAPI(t)
			target := h
			if strings.HasPrefix(tt.path, "/v1/escalations") {
				target = hEsc
			}
			rec := do(target, tt.method, tt.path, "Bearer "+opToken, tt.body)
			if rec.Code != http.StatusBadRequest || !strings.Contains(rec.Body.String(), tt.want) || !strings.Contains(rec.Body.String(), CodeBadRequest) {
				t.Fatalf("status %d body %s, want 400 naming %q", rec.Code, rec.Body, tt.want)
			}
			if len(esc.decided) != 0 || len(fs.minted) != 0 || len(fs.revoked) != 0 {
				t.Fatalf("decided %+v minted %+v revoked %+v", esc.decided, fs.minted, fs.revoked)
			}
		})
	}
	// The exact names still work.
	h, fs := newSessionsAPI(t)
	if rec := do(h, "POST", "/v1/sessions", "Bearer "+opToken, `{"name":"r","ttl":"1h","budget":{"max_tool_calls":3},"labels":{"team":"a"}}`); rec.Code != http.StatusCreated {
		t.Fatalf("mint: %d %s", rec.Code, rec.Body)
	}
	if len(fs.minted) != 1 || fs.minted[0].Budget.MaxToolCalls != 3 || fs.minted[0].Labels["team"] != "a" {
		t.Fatalf("minted %+v", fs.minted)
	}
}

// TestStrictQueries: a query parameter given twice, a ';' separator, and a
// parameter the route does not take are refused (400, naming it): the
// handler and any other reader (a proxy, a log) would otherwise disagree
// on which filter was asked.
func TestStrictQueries(t *testing.T) {
	h, _, data := newTestAPI(t)
	tests := []struct{ name, path, want string }{
		{name: "repeated session", path: "/v1/audit/tool-calls?session=s1&session=s2", want: "session: given more than once"},
		{name: "repeated via escape", path: "/v1/audit/tool-calls?session=s1&%73ession=s2", want: "session: given more than once"},
		{name: "semicolon", path: "/v1/audit/tool-calls?session=s1;decision=allow", want: "';'"},
		{name: "unknown parameter", path: "/v1/audit/tool-calls?Session=s1", want: "Session: not a parameter"},
		{name: "escalations repeated status", path: "/v1/escalations?status=pending&status=all", want: "status: given more than once"},
		{name: "escalations unknown", path: "/v1/escalations?state=pending", want: "state: not a parameter"},
		{name: "sessions repeated limit", path: "/v1/sessions?limit=1&limit=1000", want: "limit: given more than once"},
		{name: "sessions unknown", path: "/v1/sessions?since=1h", want: "since: not a parameter"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			data.got = audit.Filter{}
			rec := do(h, "GET", tt.path, "Bearer "+opToken, "")
			if rec.Code != http.StatusBadRequest || !strings.Contains(rec.Body.String(), tt.want) {
				t.Fatalf("status %d body %s, want 400 naming %q", rec.Code, rec.Body, tt.want)
			}
			if data.got != (audit.Filter{}) {
				t.Fatalf("a refused query reached the store: %+v", data.got)
			}
		})
	}
	if rec := do(h, "GET", "/v1/audit/tool-calls?session=s1&decision=allow", "Bearer "+opToken, ""); rec.Code != http.StatusOK || data.got.Session != "s1" || data.got.Decision != "allow" {
		t.Fatalf("a plain query: %d %s %+v", rec.Code, rec.Body, data.got)
	}
}

// TestAuthorizationOnce: two Authorization headers are refused (401) on
// every authenticated route and on /metrics, even when one holds a valid
// token: a proxy in front may check one and the API read the other.
func TestAuthorizationOnce(t *testing.T) {
	h, esc, _ := newTestAPI(t)
	for _, tt := range []struct{ method, path string }{
		{"GET", "/v1/escalations"}, {"POST", "/v1/escalations/e1/approve"}, {"GET", "/v1/audit/tool-calls"}, {"GET", "/metrics"},
	} {
		for _, pair := range [][]string{{"Bearer " + opToken, "Bearer nope"}, {"Bearer nope", "Bearer " + opToken}, {"Bearer " + opToken, "Bearer " + opToken}} {
			req := httptest.NewRequest(tt.method, tt.path, nil)
			req.Header["Authorization"] = pair
			rec := httptest.NewRecorder()
			h.ServeHTTP(rec, req)
			if rec.Code != http.StatusUnauthorized {
				t.Fatalf("%s %s with %d Authorization headers: %d %s", tt.method, tt.path, len(pair), rec.Code, rec.Body)
			}
		}
	}
	if len(esc.decided) != 0 {
		t.Fatalf("decided %+v", esc.decided)
	}
}
