package opsapi

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"net/http"
	"net/http/httptest"
	"sort"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/prometheus/client_golang/prometheus"

	"ironcurtain.dev/gateway/internal/audit"
	"ironcurtain.dev/gateway/internal/escalation"
	"ironcurtain.dev/gateway/internal/session"
)

const (
	opToken    = "operator-token-0123456789abcdef"
	agentToken = "agent-token-0123456789abcdef"
)

type fakeEscalations struct {
	err error // returned by every call when set
	// listErr, when set, fails ListEach after listErrAfter rows.
	listErr      error
	listErrAfter int
	gotList      escalation.ListFilter
	mu           sync.Mutex
	items        map[string]escalation.Escalation
	decided      []escalation.Decision
}

func (f *fakeEscalations) ListEach(_ context.Context, lf escalation.ListFilter, fn func(*escalation.Escalation) error) error {
	if f.err != nil {
		return f.err
	}
	if lf.Status == "weird" {
		return fmt.Errorf("listing escalations: %w: status %q", escalation.ErrInvalidFilter, lf.Status)
	}
	f.mu.Lock()
	f.gotList = lf
	var out []escalation.Escalation
	for _, e := range f.items {
		if lf.Status == "" || e.Status == lf.Status {
			out = append(out, e)
		}
	}
	f.mu.Unlock()
	sort.Slice(out, func(i, j int) bool { return out[i].ID < out[j].ID })
	limit := lf.Limit
	if limit == 0 {
		limit = escalation.DefaultListLimit
	}
	for i := range out[:min(len(out), limit)] {
		if f.listErr != nil && i == f.listErrAfter {
			return f.listErr
		}
		if err := fn(&out[i]); err != nil {
			if errors.Is(err, audit.ErrStop) {
				return nil
			}
			return err
		}
	}
	return nil
}

func (f *fakeEscalations) Get(_ context.Context, id string) (escalation.Escalation, error) {
	if f.err != nil {
		return escalation.Escalation{}, f.err
	}
	f.mu.Lock()
	defer f.mu.Unlock()
	e, ok := f.items[id]
	if !ok {
		return e, fmt.Errorf("reading escalation %s: %w", id, escalation.ErrNotFound)
	}
	return e, nil
}

func (f *fakeEscalations) Decide(_ context.Context, id string, d escalation.Decision) (escalation.Escalation, error) {
	if f.err != nil {
		return escalation.Escalation{}, f.err
	}
	f.mu.Lock()
	defer f.mu.Unlock()
	e, ok := f.items[id]
	if !ok {
		return e, fmt.Errorf("deciding escalation %s: %w", id, escalation.ErrNotFound)
	}
	if e.Status != escalation.StatusPending {
		return e, fmt.Errorf("deciding escalation %s: %w (%s by %s)", id, escalation.ErrAlreadyDecided, e.Status, e.DecidedBy)
	}
	if d.Similar == "bogus" {
		return e, fmt.Errorf("deciding escalation %s: %w: similar scope", id, escalation.ErrInvalidDecision)
	}
	f.decided = append(f.decided, d)
	e.Status, e.DecidedBy, e.DecisionReason = escalation.StatusDenied, d.By, d.Reason
	if d.Approve {
		e.Status = escalation.StatusApproved
	}
	f.items[id] = e
	return e, nil
}

type fakeData struct {
	ready error
	calls []audit.ToolCall
	got   audit.Filter
	err   error // returned by every read
	// errAfter, when set with err, fails ToolCalls after that many rows.
	errAfter int
}

func (f *fakeData) ToolCalls(_ context.Context, flt audit.Filter, fn func(*audit.ToolCall) error) error {
	f.got = flt
	limit := flt.Limit
	if limit == 0 {
		limit = audit.DefaultQueryLimit
	}
	for i := range f.calls {
		if i == limit {
			return nil
		}
		if f.err != nil && i == f.errAfter {
			return f.err
		}
		if err := fn(&f.calls[i]); err != nil {
			if errors.Is(err, audit.ErrStop) {
				return nil
			}
			return err
		}
	}
	if f.err != nil && f.errAfter >= len(f.calls) {
		return f.err
	}
	return nil
}
func (f *fakeData) Sessions(context.Context, int) ([]SessionSummary, error) {
	if f.err != nil {
		return nil, f.err
	}
	return []SessionSummary{{SessionID: "s1", ToolCalls: 3}}, nil
}
func (f *fakeData) Session(_ context.Context, id string) (SessionSummary, error) {
	if f.err != nil {
		return SessionSummary{}, f.err
	}
	if id != "s1" {
		return SessionSummary{}, ErrNotFound
	}
	return SessionSummary{SessionID: "s1"}, nil
}
func (f *fakeData) Ready(context.Context) error { return f.ready }

func newTestAPI(t testing.TB) (http.Handler, *fakeEscalations, *fakeData) {
	t.Helper()
	ops, err := NewOperators(map[string]OperatorToken{"alice": opToken})
	if err != nil {
		t.Fatal(err)
	}
	esc := &fakeEscalations{items: map[string]escalation.Escalation{
		"e1": {ID: "e1", Status: escalation.StatusPending, SessionID: "s1", Server: "git", Tool: "push"},
		"e2": {ID: "e2", Status: escalation.StatusApproved, DecidedBy: "bob"},
	}}
	scrapers, err := NewScrapers(map[string]OperatorToken{"prometheus": metricsToken})
	if err != nil {
		t.Fatal(err)
	}
	data := &fakeData{}
	reg := prometheus.NewRegistry()
	return New(Deps{Operators: ops, Scrapers: scrapers, Escalations: esc, Data: data, Gatherer: reg, Registerer: reg}), esc, data
}

// metricsToken is the test API's metrics token (Deps.Scrapers).
const metricsToken = "metrics-token-0123456789abcdef"

// TestMetricsTokenOpensMetricsOnly: a metrics token reads /metrics and is
// refused (401, nothing decided, nothing minted) on every other route.
func TestMetricsTokenOpensMetricsOnly(t *testing.T) {
	h, esc, _ := newTestAPI(t)
	do := func(method, path string) *httptest.ResponseRecorder {
		req := httptest.NewRequest(method, path, strings.NewReader(`{"reason":"x"}`))
		req.Header.Set("Authorization", "Bearer "+metricsToken)
		rec := httptest.NewRecorder()
		h.ServeHTTP(rec, req)
		return rec
	}
	if rec := do(http.MethodGet, "/metrics"); rec.Code != http.StatusOK || !strings.Contains(rec.Body.String(), "ironcurtain_ops_auth_failures_total") {
		t.Fatalf("GET /metrics with the metrics token: %d %.200s", rec.Code, rec.Body)
	}
	routes := append([]opsRoute{
		{http.MethodPost, "/v1/sessions"},
		{http.MethodDelete, "/v1/sessions/s1"},
		{http.MethodGet, "/v1/policy"},
		{http.MethodPost, "/v1/policy/reload"},
		{http.MethodPost, "/metrics"},
	}, protectedRoutes...)
	for _, route := range routes {
		if route.path == "/metrics" && route.method == http.MethodGet {
			continue
		}
		t.Run(route.method+" "+route.path, func(t *testing.T) {
			rec := do(route.method, route.path)
			if rec.Code == http.StatusOK || (rec.Code != http.StatusUnauthorized && rec.Code != http.StatusNotFound && rec.Code != http.StatusMethodNotAllowed) {
				t.Fatalf("status = %d, want 401 (or 404/405 for a route this API does not serve): %.200s", rec.Code, rec.Body)
			}
		})
	}
	if len(esc.decided) != 0 {
		t.Fatalf("a metrics token decided: %+v", esc.decided)
	}
}

func TestMetricsAllowed(t *testing.T) {
	ops, _ := NewOperators(map[string]OperatorToken{"alice": opToken})
	scrapers, _ := NewScrapers(map[string]OperatorToken{"prometheus": metricsToken})
	tests := []struct {
		name     string
		header   string
		scrapers *Operators
		want     bool
	}{
		{"operator token", "Bearer " + opToken, scrapers, true},
		{"metrics token", "Bearer " + metricsToken, scrapers, true},
		{"metrics token, no scrapers configured", "Bearer " + metricsToken, nil, false},
		{"operator token, no scrapers configured", "Bearer " + opToken, nil, true},
		{"agent token", "Bearer " + agentToken, scrapers, false},
		{"prefix of the metrics token", "Bearer " + metricsToken[:len(metricsToken)-1], scrapers, false},
		{"no scheme", metricsToken, scrapers, false},
		{"basic scheme", "Basic " + metricsToken, scrapers, false},
		{"empty bearer", "Bearer ", scrapers, false},
		{"lowercase scheme", "bearer " + metricsToken, scrapers, true},
		{"trailing junk", "Bearer " + metricsToken + " x", scrapers, false},
		{"none", "", scrapers, false},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			r := httptest.NewRequest(http.MethodGet, "/metrics", nil)
			if tt.header != "" {
				r.Header.Set("Authorization", tt.header)
			}
			if got := MetricsAllowed(ops, tt.scrapers, r); got != tt.want {
				t.Fatalf("MetricsAllowed = %v, want %v", got, tt.want)
			}
		})
	}
}

func TestNewScrapersNamesMetricsTokens(t *testing.T) {
	tests := []struct {
		name    string
		tokens  map[string]OperatorToken
		wantErr string
	}{
		{name: "none", tokens: nil, wantErr: "metrics tokens: none configured"},
		{name: "short", tokens: map[string]OperatorToken{"prometheus": "short"}, wantErr: `metrics token for "prometheus": must be at least`},
		{name: "empty name", tokens: map[string]OperatorToken{" ": metricsToken}, wantErr: "empty scraper name"},
		{name: "shared", tokens: map[string]OperatorToken{"a": metricsToken, "b": metricsToken}, wantErr: "share a token"},
		{name: "ok", tokens: map[string]OperatorToken{"prometheus": metricsToken}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			_, err := NewScrapers(tt.tokens)
			if tt.wantErr == "" {
				if err != nil {
					t.Fatalf("NewScrapers = %v", err)
				}
				return
			}
			if err == nil || !strings.Contains(err.Error(), tt.wantErr) {
				t.Fatalf("NewScrapers = %v, want %q", err, tt.wantErr)
			}
		})
	}
}

func TestRejectOverlap(t *testing.T) {
	ops, _ := NewOperators(map[string]OperatorToken{"alice": opToken, "bob": opToken + "-bob"})
	distinct, _ := NewScrapers(map[string]OperatorToken{"prometheus": metricsToken})
	shared, _ := NewScrapers(map[string]OperatorToken{"prometheus": metricsToken, "grafana": opToken + "-bob"})
	if err := distinct.RejectOverlap(ops); err != nil {
		t.Fatalf("distinct tokens: %v", err)
	}
	if err := shared.RejectOverlap(ops); !errors.Is(err, ErrMetricsTokenIsOperator) {
		t.Fatalf("a metrics token equal to an operator's: %v, want ErrMetricsTokenIsOperator", err)
	}
	var none *Operators
	if err := none.RejectOverlap(ops); err != nil {
		t.Fatalf("no metrics tokens: %v", err)
	}
}

// protectedRoutes are every route that needs an operator token.
var protectedRoutes = append([]opsRoute{{http.MethodGet, "/metrics"}}, databaseRoutes...)

type opsRoute struct{ method, path string }

// databaseRoutes are the routes that read or write the database.
var databaseRoutes = []opsRoute{
	{http.MethodGet, "/v1/escalations"},
	{http.MethodGet, "/v1/escalations/e1"},
	{http.MethodPost, "/v1/escalations/e1/approve"},
	{http.MethodPost, "/v1/escalations/e1/deny"},
	{http.MethodGet, "/v1/audit/tool-calls"},
	{http.MethodGet, "/v1/sessions"},
	{http.MethodGet, "/v1/sessions/s1"},
}

// TestAuthOnEveryRoute: the agent token, a wrong token, a malformed header
// and no header are all refused on every ops route, and nothing is decided.
func TestAuthOnEveryRoute(t *testing.T) {
	h, esc, _ := newTestAPI(t)
	headers := []struct{ name, value string }{
		{"none", ""},
		{"agent token", "Bearer " + agentToken},
		{"wrong token", "Bearer " + opToken + "x"},
		{"prefix of token", "Bearer " + opToken[:len(opToken)-1]},
		{"no scheme", opToken},
		{"basic scheme", "Basic " + opToken},
		{"lowercase scheme, wrong token", "bearer " + opToken + "x"},
		{"trailing junk", "Bearer " + opToken + " x"},
		{"tab separator", "Bearer\t" + opToken},
		{"empty bearer", "Bearer "},
	}
	for _, route := range protectedRoutes {
		for _, hd := range headers {
			t.Run(route.method+" "+route.path+" "+hd.name, func(t *testing.T) {
				req := httptest.NewRequest(route.method, route.path, nil)
				if hd.value != "" {
					req.Header.Set("Authorization", hd.value)
				}
				rec := httptest.NewRecorder()
				h.ServeHTTP(rec, req)
				if rec.Code != http.StatusUnauthorized {
					t.Fatalf("status = %d, want 401", rec.Code)
				}
				var eb ErrorBody
				if err := json.Unmarshal(rec.Body.Bytes(), &eb); err != nil || eb.Error.Code != CodeUnauthorized {
					t.Fatalf("body = %s", rec.Body)
				}
			})
		}
	}
	if len(esc.decided) != 0 {
		t.Fatalf("an unauthenticated request decided: %+v", esc.decided)
	}
}

func TestOperatorTokenWorksEverywhere(t *testing.T) {
	h, _, _ := newTestAPI(t)
	for _, route := range protectedRoutes {
		t.Run(route.method+" "+route.path, func(t *testing.T) {
			req := httptest.NewRequest(route.method, route.path, nil)
			req.Header.Set("Authorization", "Bearer "+opToken)
			rec := httptest.NewRecorder()
			h.ServeHTTP(rec, req)
			if rec.Code == http.StatusUnauthorized || rec.Code >= 500 {
				t.Fatalf("status = %d: %s", rec.Code, rec.Body)
			}
		})
	}
}

// TestAuthSchemeCaseInsensitive: the scheme is case-insensitive (RFC 9110
// §11.1), a header sent twice is refused.
func TestAuthSchemeCaseInsensitive(t *testing.T) {
	h, _, _ := newTestAPI(t)
	for _, tt := range []struct {
		name   string
		values []string
		want   int
	}{
		{"lowercase", []string{"bearer " + opToken}, http.StatusOK},
		{"uppercase", []string{"BEARER " + opToken}, http.StatusOK},
		{"several spaces", []string{"Bearer   " + opToken}, http.StatusOK},
		{"twice the same", []string{"Bearer " + opToken, "Bearer " + opToken}, http.StatusUnauthorized},
	} {
		t.Run(tt.name, func(t *testing.T) {
			req := httptest.NewRequest(http.MethodGet, "/v1/sessions", nil)
			for _, v := range tt.values {
				req.Header.Add("Authorization", v)
			}
			rec := httptest.NewRecorder()
			h.ServeHTTP(rec, req)
			if rec.Code != tt.want {
				t.Fatalf("status = %d, want %d: %s", rec.Code, tt.want, rec.Body)
			}
		})
	}
}

func TestRoutes(t *testing.T) {
	tests := []struct {
		name       string
		method     string
		path       string
		body       string
		noAuth     bool
		ready      error
		wantStatus int
		wantCode   string // error code, if an error is expected
		wantBody   string // substring of the body
	}{
		{name: "healthz open", method: "GET", path: "/healthz", noAuth: true, wantStatus: 200, wantBody: `"ok"`},
		{name: "readyz ready", method: "GET", path: "/readyz", noAuth: true, wantStatus: 200, wantBody: "ready"},
		{name: "readyz schema behind", method: "GET", path: "/readyz", noAuth: true, ready: errors.New("database schema is older than this gateway: run `ironcurtain migrate up`"),
			wantStatus: 503, wantCode: CodeNotReady, wantBody: "migrate up"},
		{name: "list", method: "GET", path: "/v1/escalations?status=pending", wantStatus: 200, wantBody: `"e1"`},
		{name: "list bad status", method: "GET", path: "/v1/escalations?status=weird", wantStatus: 400, wantCode: CodeBadRequest},
		{name: "list bad limit", method: "GET", path: "/v1/escalations?limit=-3", wantStatus: 400, wantCode: CodeBadRequest},
		{name: "show", method: "GET", path: "/v1/escalations/e1", wantStatus: 200, wantBody: `"push"`},
		{name: "show unknown", method: "GET", path: "/v1/escalations/nope", wantStatus: 404, wantCode: CodeNotFound},
		{name: "approve with reason", method: "POST", path: "/v1/escalations/e1/approve", body: `{"reason":"looks fine"}`, wantStatus: 200, wantBody: `"decided_by":"alice"`},
		{name: "deny without body", method: "POST", path: "/v1/escalations/e1/deny", wantStatus: 200, wantBody: `"denied"`},
		{name: "already decided", method: "POST", path: "/v1/escalations/e2/deny", wantStatus: 409, wantCode: CodeConflict, wantBody: "approved by bob"},
		{name: "bad body", method: "POST", path: "/v1/escalations/e1/approve", body: `{"reason":1}`, wantStatus: 400, wantCode: CodeBadRequest},
		{name: "unknown field", method: "POST", path: "/v1/escalations/e1/approve", body: `{"by":"mallory"}`, wantStatus: 400, wantCode: CodeBadRequest},
		{name: "bad similar", method: "POST", path: "/v1/escalations/e1/approve", body: `{"similar":"bogus"}`, wantStatus: 400, wantCode: CodeBadRequest},
		{name: "approve unknown", method: "POST", path: "/v1/escalations/nope/approve", wantStatus: 404, wantCode: CodeNotFound},
		{name: "audit query", method: "GET", path: "/v1/audit/tool-calls?session=s1&decision=deny&since=15m", wantStatus: 200, wantBody: `"tool_calls":[]`},
		{name: "audit bad decision", method: "GET", path: "/v1/audit/tool-calls?decision=perhaps", wantStatus: 400, wantCode: CodeBadRequest},
		{name: "audit bad since", method: "GET", path: "/v1/audit/tool-calls?since=yesterday", wantStatus: 400, wantCode: CodeBadRequest},
		{name: "sessions", method: "GET", path: "/v1/sessions", wantStatus: 200, wantBody: `"tool_calls":3`},
		{name: "session unknown", method: "GET", path: "/v1/sessions/zz", wantStatus: 404, wantCode: CodeNotFound},
		{name: "unknown route", method: "GET", path: "/v1/nothing", wantStatus: 404, wantCode: CodeNotFound},
		{name: "wrong method", method: "DELETE", path: "/v1/escalations/e1", wantStatus: 405, wantCode: CodeMethodNotAllowed},
		{name: "metrics", method: "GET", path: "/metrics", wantStatus: 200, wantBody: "ironcurtain_ops_auth_failures_total"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			h, _, data := newTestAPI(t)
			data.ready = tt.ready
			var body *strings.Reader
			if tt.body != "" {
				body = strings.NewReader(tt.body)
			} else {
				body = strings.NewReader("")
			}
			req := httptest.NewRequest(tt.method, tt.path, body)
			if !tt.noAuth {
				req.Header.Set("Authorization", "Bearer "+opToken)
			}
			rec := httptest.NewRecorder()
			h.ServeHTTP(rec, req)
			if rec.Code != tt.wantStatus {
				t.Fatalf("status = %d, want %d: %s", rec.Code, tt.wantStatus, rec.Body)
			}
			if tt.wantCode != "" {
				var eb ErrorBody
				if err := json.Unmarshal(rec.Body.Bytes(), &eb); err != nil || eb.Error.Code != tt.wantCode || eb.Error.Message == "" {
					t.Fatalf("error body = %s, want code %s", rec.Body, tt.wantCode)
				}
			}
			if !strings.Contains(rec.Body.String(), tt.wantBody) {
				t.Fatalf("body = %s, want it to contain %s", rec.Body, tt.wantBody)
			}
		})
	}
}

func TestAuditFilterPassedThrough(t *testing.T) {
	h, _, data := newTestAPI(t)
	req := httptest.NewRequest("GET", "/v1/audit/tool-calls?session=s1&server=git&tool=push&decision=deny&since=2026-01-02T03:04:05Z&limit=5", nil)
	req.Header.Set("Authorization", "Bearer "+opToken)
	h.ServeHTTP(httptest.NewRecorder(), req)
	want := audit.Filter{Session: "s1", Server: "git", Tool: "push", Decision: "deny", Since: time.Date(2026, 1, 2, 3, 4, 5, 0, time.UTC), Limit: 5}
	if data.got.Session != want.Session || data.got.Server != want.Server || data.got.Tool != want.Tool ||
		data.got.Decision != want.Decision || !data.got.Since.Equal(want.Since) || data.got.Limit != want.Limit {
		t.Fatalf("filter = %+v, want %+v", data.got, want)
	}
}

func TestOperators(t *testing.T) {
	tests := []struct {
		name    string
		tokens  map[string]OperatorToken
		wantErr string
	}{
		{name: "ok", tokens: map[string]OperatorToken{"a": opToken}},
		{name: "none", tokens: nil, wantErr: "none configured"},
		{name: "short", tokens: map[string]OperatorToken{"a": "short"}, wantErr: "at least"},
		{name: "empty name", tokens: map[string]OperatorToken{" ": opToken}, wantErr: "empty operator name"},
		{name: "shared", tokens: map[string]OperatorToken{"a": opToken, "b": opToken}, wantErr: "share a token"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			_, err := NewOperators(tt.tokens)
			if tt.wantErr == "" && err != nil || tt.wantErr != "" && (err == nil || !strings.Contains(err.Error(), tt.wantErr)) {
				t.Fatalf("NewOperators = %v, want %q", err, tt.wantErr)
			}
		})
	}
	ops, _ := NewOperators(map[string]OperatorToken{"alice": opToken})
	if err := ops.RejectAgentTokens(agentToken); err != nil {
		t.Fatalf("distinct tokens rejected: %v", err)
	}
	if err := ops.RejectAgentTokens(agentToken, opToken); !errors.Is(err, ErrSharedToken) {
		t.Fatalf("shared token accepted: %v", err)
	}
	// The two kinds of token live in different authenticators: the agent
	// authenticator does not know operator tokens and vice versa.
	agents, err := session.NewStatic(map[string]string{"s1": agentToken})
	if err != nil {
		t.Fatal(err)
	}
	if _, err := agents.Authenticate(context.Background(), opToken); err == nil {
		t.Fatal("operator token accepted as an agent token")
	}
	if _, ok := ops.Authenticate(agentToken); ok {
		t.Fatal("agent token accepted as an operator token")
	}
	if s := fmt.Sprintf("%v %s %#v", OperatorToken(opToken), OperatorToken(opToken), OperatorToken(opToken)); strings.Contains(s, opToken) {
		t.Fatalf("formatting reveals the token: %s", s)
	}
}

func TestClient(t *testing.T) {
	h, _, _ := newTestAPI(t)
	srv := httptest.NewServer(h)
	defer srv.Close()
	ctx := context.Background()
	c, err := NewClient(srv.URL, opToken)
	if err != nil {
		t.Fatal(err)
	}
	list, err := c.ListEscalations(ctx, escalation.ListFilter{Status: "pending"})
	if err != nil || len(list) != 1 || list[0].ID != "e1" {
		t.Fatalf("list = %+v, %v", list, err)
	}
	e, err := c.Decide(ctx, "e1", true, DecideRequest{Reason: "ok"})
	if err != nil || e.Status != escalation.StatusApproved || e.DecidedBy != "alice" {
		t.Fatalf("approve = %+v, %v", e, err)
	}
	_, err = c.Decide(ctx, "e1", false, DecideRequest{})
	var apiErr *APIError
	if !errors.As(err, &apiErr) || apiErr.Code != CodeConflict {
		t.Fatalf("second decision = %v, want a conflict APIError", err)
	}
	bad, _ := NewClient(srv.URL, agentToken)
	if _, err := bad.GetEscalation(ctx, "e1"); !errors.As(err, &apiErr) || apiErr.Status != 401 {
		t.Fatalf("agent token via client = %v", err)
	}
	for _, u := range []string{"", "ftp://x", "localhost:8081"} {
		if _, err := NewClient(u, opToken); err == nil {
			t.Errorf("NewClient(%q) accepted", u)
		}
	}
	if _, err := NewClient(srv.URL, ""); err == nil {
		t.Error("NewClient without token accepted")
	}
}

func BenchmarkAuthenticate(b *testing.B) {
	ops, _ := NewOperators(map[string]OperatorToken{"a": opToken, "b": opToken + "b", "c": opToken + "c"})
	b.ReportAllocs()
	for b.Loop() {
		if _, ok := ops.Authenticate(opToken); !ok {
			b.Fatal("refused")
		}
	}
}
