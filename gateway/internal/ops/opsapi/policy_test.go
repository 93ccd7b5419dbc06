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

	"ironcurtain.dev/gateway/internal/livepolicy"
)

// fakeReloader answers reloads with res and err.
type fakeReloader struct {
	mu      sync.Mutex
	res     livepolicy.Result
	err     error
	sources []string
}

func (f *fakeReloader) Reload(_ context.Context, source string) (livepolicy.Result, error) {
	f.mu.Lock()
	defer f.mu.Unlock()
	f.sources = append(f.sources, source)
	return f.res, f.err
}

func (f *fakeReloader) Version() string { return "0123456789abcdef" }

func newPolicyAPI(t *testing.T, rl *fakeReloader) http.Handler {
	t.Helper()
	ops, err := NewOperators(map[string]OperatorToken{"alice": opToken})
	if err != nil {
		t.Fatal(err)
	}
	return New(Deps{Operators: ops, Escalations: &fakeEscalations{}, Data: &fakeData{}, Policy: rl})
}

func TestPolicyReloadRoute(t *testing.T) {
	tests := []struct {
		name       string
		auth       string
		method     string
		path       string
		rl         *fakeReloader
		wantStatus int
		wantCode   string
		wantBody   string
		wantReload bool
	}{
		{name: "no token", method: http.MethodPost, path: "/v1/policy/reload", wantStatus: 401, wantCode: CodeUnauthorized},
		{name: "agent token", auth: "Bearer " + agentToken, method: http.MethodPost, path: "/v1/policy/reload", wantStatus: 401, wantCode: CodeUnauthorized},
		{name: "GET is not a reload", auth: "Bearer " + opToken, method: http.MethodGet, path: "/v1/policy/reload", wantStatus: 405, wantCode: CodeMethodNotAllowed},
		{name: "changed", auth: "Bearer " + opToken, method: http.MethodPost, path: "/v1/policy/reload",
			rl:         &fakeReloader{res: livepolicy.Result{Result: livepolicy.ResultChanged, Version: "bbbbbbbbbbbbbbbb", Previous: "aaaaaaaaaaaaaaaa"}},
			wantStatus: 200, wantBody: `"version":"bbbbbbbbbbbbbbbb"`, wantReload: true},
		{name: "failed", auth: "Bearer " + opToken, method: http.MethodPost, path: "/v1/policy/reload",
			rl: &fakeReloader{res: livepolicy.Result{Result: livepolicy.ResultFailed, Version: "aaaaaaaaaaaaaaaa", Error: "x"},
				err: errors.New(`reloading policy: loading policy: /p/compiled-policy.json: rules[1].then: unknown decision "maybe"`)},
			wantStatus: 422, wantCode: CodePolicyInvalid, wantBody: `rules[1].then: unknown decision`, wantReload: true},
		{name: "version", auth: "Bearer " + opToken, method: http.MethodGet, path: "/v1/policy", wantStatus: 200, wantBody: `{"version":"0123456789abcdef"}`},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			rl := tt.rl
			if rl == nil {
				rl = &fakeReloader{}
			}
			h := newPolicyAPI(t, rl)
			req := httptest.NewRequest(tt.method, tt.path, nil)
			if tt.auth != "" {
				req.Header.Set("Authorization", tt.auth)
			}
			rec := httptest.NewRecorder()
			h.ServeHTTP(rec, req)
			if rec.Code != tt.wantStatus {
				t.Fatalf("status %d, want %d: %s", rec.Code, tt.wantStatus, rec.Body)
			}
			if tt.wantCode != "" {
				var eb ErrorBody
				if err := json.Unmarshal(rec.Body.Bytes(), &eb); err != nil || eb.Error.Code != tt.wantCode {
					t.Errorf("body %s, want error code %s", rec.Body, tt.wantCode)
				}
			}
			if !strings.Contains(rec.Body.String(), tt.wantBody) {
				t.Errorf("body %s, want it to contain %s", rec.Body, tt.wantBody)
			}
			if got := len(rl.sources) > 0; got != tt.wantReload {
				t.Fatalf("reloaded: %v, want %v", got, tt.wantReload)
			}
			if tt.wantReload && rl.sources[0] != "ops API by alice" {
				t.Errorf("source %q, want it to name the operator", rl.sources[0])
			}
		})
	}
}

func TestPolicyRoutesAbsentWithoutReloader(t *testing.T) {
	h, _, _ := newTestAPI(t)
	req := httptest.NewRequest(http.MethodPost, "/v1/policy/reload", nil)
	req.Header.Set("Authorization", "Bearer "+opToken)
	rec := httptest.NewRecorder()
	h.ServeHTTP(rec, req)
	if rec.Code != http.StatusNotFound {
		t.Fatalf("status %d, want 404", rec.Code)
	}
}

func TestClientReloadPolicy(t *testing.T) {
	rl := &fakeReloader{res: livepolicy.Result{Result: livepolicy.ResultUnchanged, Version: "aaaaaaaaaaaaaaaa", Previous: "aaaaaaaaaaaaaaaa"}}
	srv := httptest.NewServer(newPolicyAPI(t, rl))
	defer srv.Close()
	c, err := NewClient(srv.URL, opToken)
	if err != nil {
		t.Fatal(err)
	}
	res, err := c.ReloadPolicy(context.Background())
	if err != nil || res.Result != livepolicy.ResultUnchanged || res.Version != "aaaaaaaaaaaaaaaa" {
		t.Fatalf("ReloadPolicy = %+v, %v", res, err)
	}
	if v, err := c.PolicyVersion(context.Background()); err != nil || v != "0123456789abcdef" {
		t.Fatalf("PolicyVersion = %q, %v", v, err)
	}
	rl.err = errors.New("reloading policy: bad file")
	_, err = c.ReloadPolicy(context.Background())
	var ae *APIError
	if !errors.As(err, &ae) || ae.Code != CodePolicyInvalid || !strings.Contains(ae.Message, "bad file") {
		t.Fatalf("err = %v, want an APIError %s naming the problem", err, CodePolicyInvalid)
	}
}
