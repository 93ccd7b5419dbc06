package opsapi

import (
	"net/http"
	"net/http/httptest"
	"net/url"
	"strings"
	"testing"

	"ironcurtain.dev/gateway/internal/audit"
)

// refQuery reads a query string the way other servers and proxies do:
// split on '&' (and, for some, ';'), form-unescaped, a repeated name
// winning last or first.
func refQuery(raw string, semicolon, firstWins bool) (map[string]string, bool) {
	out := map[string]string{}
	for _, part := range strings.FieldsFunc(raw, func(r rune) bool { return r == '&' || semicolon && r == ';' }) {
		k, v, _ := strings.Cut(part, "=")
		k, err1 := url.QueryUnescape(k)
		v, err2 := url.QueryUnescape(v)
		if err1 != nil || err2 != nil {
			return nil, false
		}
		if _, seen := out[k]; seen && firstWins {
			continue
		}
		out[k] = v
	}
	return out, true
}

// FuzzToolCallsQueryDifferential: a query GET /v1/audit/tool-calls
// accepts is read the same by every reader (last-wins, first-wins, ';' as
// a separator, url.ParseQuery), and the filter the handler passes to the
// store is exactly what they read; anything else is refused.
func FuzzToolCallsQueryDifferential(f *testing.F) {
	for _, s := range []string{"session=s1", "session=s1&session=s2", "session=s1;tool=x", "%73ession=a&session=b",
		"session=a+b%2Bc&decision=allow&server=git&tool=push&limit=5", "Session=x", "a=%zz", "&&session=&", "since=15m"} {
		f.Add(s)
	}
	h, _, data := newTestAPI(f)
	allowed := map[string]bool{"session": true, "server": true, "tool": true, "decision": true, "limit": true, "since": true, "after": true, "cursor": true}
	f.Fuzz(func(t *testing.T, raw string) {
		data.got = audit.Filter{}
		req := httptest.NewRequest("GET", "/v1/audit/tool-calls", nil)
		req.URL.RawQuery = raw
		req.Header.Set("Authorization", "Bearer "+opToken)
		rec := httptest.NewRecorder()
		h.ServeHTTP(rec, req)
		if rec.Code != http.StatusOK {
			return // refused
		}
		got := map[string]string{"session": data.got.Session, "server": data.got.Server, "tool": data.got.Tool, "decision": data.got.Decision}
		for _, r := range []struct {
			name                 string
			semicolon, firstWins bool
		}{{"last-wins", false, false}, {"first-wins", false, true}, {"';' separates", true, false}} {
			ref, ok := refQuery(raw, r.semicolon, r.firstWins)
			if !ok {
				t.Fatalf("disagreement: a %s reader cannot read the accepted query %q", r.name, raw)
			}
			for k := range ref {
				if !allowed[k] {
					t.Fatalf("disagreement: a %s reader reads parameter %q in the accepted query %q", r.name, k, raw)
				}
			}
			for k, v := range got {
				if ref[k] != v {
					t.Fatalf("disagreement: a %s reader reads %s=%q in %q; the handler used %q", r.name, k, ref[k], raw, v)
				}
			}
		}
		pq, err := url.ParseQuery(raw)
		if err != nil {
			t.Fatalf("disagreement: url.ParseQuery refuses the accepted query %q: %v", raw, err)
		}
		for k, v := range got {
			if len(pq[k]) > 1 || pq.Get(k) != v {
				t.Fatalf("disagreement: url.ParseQuery reads %s=%q in %q; the handler used %q", k, pq[k], raw, v)
			}
		}
	})
}
