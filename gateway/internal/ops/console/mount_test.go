package console

import (
	"context"
	"net/http"
	"net/http/httptest"
	"net/url"
	"strings"
	"testing"

	"ironcurtain.dev/gateway/internal/audit"
	"ironcurtain.dev/gateway/internal/ops/opsapi"
)

type fakeData struct{}

func (fakeData) ToolCalls(context.Context, audit.Filter, func(*audit.ToolCall) error) error {
	return nil
}
func (fakeData) Sessions(context.Context, int) ([]opsapi.SessionSummary, error) { return nil, nil }
func (fakeData) Session(context.Context, string) (opsapi.SessionSummary, error) {
	return opsapi.SessionSummary{}, opsapi.ErrNotFound
}
func (fakeData) Ready(context.Context) error { return nil }

// TestMountedInOpsAPI: inside the ops API's router the console routes on its
// own paths, its pages need its sign-in (not the bearer token), and the
// API's routes still need the bearer token.
func TestMountedInOpsAPI(t *testing.T) {
	w := newWorld(t, "x")
	h := opsapi.New(opsapi.Deps{Operators: w.c.deps.Operators, Escalations: w.esc, Data: fakeData{}, UI: w.c.Handler()})
	cl := &client{t: t, h: h}
	if res := cl.get("/ui/escalations"); res.Code != http.StatusSeeOther || res.Header().Get("Location") != "/ui/signin" {
		t.Fatalf("unsigned: %d %q", res.Code, res.Header().Get("Location"))
	}
	if res := cl.get("/ui"); res.Code != http.StatusSeeOther {
		t.Fatalf("/ui: %d", res.Code)
	}
	res := cl.post("/ui/signin", url.Values{"token": {operatorToken}}, "")
	if res.Code != http.StatusSeeOther {
		t.Fatalf("sign-in: %d %s", res.Code, res.Body.String())
	}
	cl.cookie = res.Result().Cookies()[0]
	page := cl.get("/ui/escalations")
	if page.Code != http.StatusOK || !strings.Contains(page.Body.String(), `id="pending"`) {
		t.Fatalf("escalations: %d", page.Code)
	}
	if page.Header().Get("Content-Security-Policy") != ContentSecurityPolicy {
		t.Fatal("no CSP through the ops API")
	}
	if res := cl.get("/ui/assets/style.css"); res.Code != http.StatusOK || !strings.HasPrefix(res.Header().Get("Content-Type"), "text/css") {
		t.Fatalf("asset: %d %q", res.Code, res.Header().Get("Content-Type"))
	}
	// The console's cookie is not an API credential.
	if res := cl.get("/v1/escalations"); res.Code != http.StatusUnauthorized {
		t.Fatalf("API with the console cookie: %d", res.Code)
	}
	rec := httptest.NewRecorder()
	h.ServeHTTP(rec, httptest.NewRequest(http.MethodGet, "/healthz", nil))
	if rec.Code != http.StatusOK {
		t.Fatalf("healthz: %d", rec.Code)
	}
}
