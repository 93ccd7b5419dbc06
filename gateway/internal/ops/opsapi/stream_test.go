package opsapi

import (
	"encoding/json"
	"errors"
	"fmt"
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"
	"time"

	"github.com/jackc/pgx/v5/pgconn"

	"ironcurtain.dev/gateway/internal/audit"
)

func fakeCalls(n, argBytes int) []audit.ToolCall {
	out := make([]audit.ToolCall, n)
	base := time.Date(2026, 1, 2, 3, 4, 5, 0, time.UTC)
	for i := range out {
		out[i] = audit.ToolCall{CallID: fmt.Sprintf("c%03d", i), SessionID: "s1", Time: base.Add(-time.Duration(i) * time.Second),
			Server: "filesystem", Tool: "write_file", Decision: "allow",
			Args: json.RawMessage(`{"content":"` + strings.Repeat("x", argBytes) + `"}`)}
	}
	return out
}

// TestToolCallsBoundedInBytes: a listing stops before MaxResponseBytes and
// says where to continue; the row limit also yields a next token; a bad
// token is refused; a failure after rows were sent is reported in the body.
func TestToolCallsBoundedInBytes(t *testing.T) {
	tests := []struct {
		name       string
		calls      []audit.ToolCall
		query      string
		err        error
		errAfter   int
		wantStatus int
		wantRows   int
		wantNext   string // call id the next token continues after ("" none)
		wantErr    string // error code inside a 200 body
	}{
		{name: "small page complete", calls: fakeCalls(3, 10), wantStatus: 200, wantRows: 3},
		{name: "byte bound ends the page", calls: fakeCalls(200, 60<<10), query: "?limit=1000", wantStatus: 200,
			wantRows: MaxResponseBytes / (60 << 10), wantNext: fmt.Sprintf("c%03d", MaxResponseBytes/(60<<10)-1)},
		{name: "row limit gives next", calls: fakeCalls(10, 10), query: "?limit=4", wantStatus: 200, wantRows: 4, wantNext: "c003"},
		{name: "bad cursor", calls: fakeCalls(1, 10), query: "?cursor=bm90LWEtdG9rZW4", wantStatus: 400},
		{name: "down before the first row", calls: fakeCalls(3, 10), err: &pgconn.ConnectError{}, wantStatus: 503},
		{name: "down part way", calls: fakeCalls(3, 10), err: &pgconn.PgError{Code: "57P01"}, errAfter: 2, wantStatus: 200, wantRows: 2, wantErr: CodeNotReady},
		{name: "other failure part way", calls: fakeCalls(3, 10), err: errors.New("boom"), errAfter: 1, wantStatus: 200, wantRows: 1, wantErr: CodeInternal},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			h, _, data := newTestAPI(t)
			data.calls = tt.calls
			data.err, data.errAfter = tt.err, tt.errAfter
			var page ToolCallPage
			if !getPage(t, h, "/v1/audit/tool-calls"+tt.query, tt.wantStatus, &page) {
				return
			}
			if c, ok := checkPageNext(t, len(page.ToolCalls), page.Next, tt.wantRows, tt.wantNext); ok {
				// The token goes back as ?cursor= and reaches the query.
				rec2 := serve(t, h, http.MethodGet, "/v1/audit/tool-calls?cursor="+page.Next)
				if rec2.Code != 200 || data.got.Cursor != c {
					t.Fatalf("cursor not passed on: %d, %+v", rec2.Code, data.got.Cursor)
				}
			}
			checkPageError(t, page.Error, tt.wantErr)
		})
	}
}

func FuzzParseCursor(f *testing.F) {
	f.Add(audit.Cursor{Time: time.Now(), CallID: "c1"}.String())
	f.Add("")
	f.Add("MXx4fHk")
	f.Fuzz(func(t *testing.T, s string) {
		c, err := audit.ParseCursor(s)
		if err != nil {
			return
		}
		if c.IsZero() != (s == "") {
			t.Fatalf("%q parsed to %+v", s, c)
		}
		if back, err := audit.ParseCursor(c.String()); err != nil || !back.Time.Equal(c.Time) || back.CallID != c.CallID {
			t.Fatalf("round trip of %q: %+v, %v", s, back, err)
		}
	})
}

// getPage GETs target from h and checks its status is wantStatus; on 200 it
// checks the body fits MaxResponseBytes and is one JSON object, decodes it
// into page and returns true.
func getPage(t *testing.T, h http.Handler, target string, wantStatus int, page any) bool {
	t.Helper()
	rec := serve(t, h, http.MethodGet, target)
	if rec.Code != wantStatus {
		t.Fatalf("status = %d, want %d: %.200s", rec.Code, wantStatus, rec.Body)
	}
	if rec.Code != 200 {
		return false
	}
	if rec.Body.Len() > MaxResponseBytes {
		t.Fatalf("body %d bytes > %d", rec.Body.Len(), MaxResponseBytes)
	}
	if err := json.Unmarshal(rec.Body.Bytes(), page); err != nil {
		t.Fatalf("body is not one JSON object: %v", err)
	}
	return true
}

// checkPageNext checks a page has wantRows rows and a next token exactly
// when wantNext is set, one that continues after the call id wantNext; if
// it has one, it returns its cursor and true.
func checkPageNext(t *testing.T, rows int, next string, wantRows int, wantNext string) (audit.Cursor, bool) {
	t.Helper()
	if rows != wantRows {
		t.Fatalf("rows = %d, want %d", rows, wantRows)
	}
	if (wantNext == "") != (next == "") {
		t.Fatalf("next = %q, want one after %q", next, wantNext)
	}
	if wantNext == "" {
		return audit.Cursor{}, false
	}
	c, err := audit.ParseCursor(next)
	if err != nil || c.CallID != wantNext {
		t.Fatalf("next = %+v, %v; want after %s", c, err, wantNext)
	}
	return c, true
}

// checkPageError checks a page's error code is want ("": no error).
func checkPageError(t *testing.T, got *ErrorDetail, want string) {
	t.Helper()
	if got != nil {
		if got.Code != want {
			t.Fatalf("error = %q, want %q", got.Code, want)
		}
	} else if want != "" {
		t.Fatalf("no error in the body, want %q", want)
	}
}

// benchmarkPage GETs target from h as operator once per iteration.
func benchmarkPage(b *testing.B, h http.Handler, target string) {
	req := httptest.NewRequest(http.MethodGet, target, nil)
	req.Header.Set("Authorization", "Bearer "+opToken)
	b.ReportAllocs()
	for b.Loop() {
		rec := httptest.NewRecorder()
		h.ServeHTTP(rec, req)
		if rec.Code != http.StatusOK {
			b.Fatal(rec.Code)
		}
		b.SetBytes(int64(rec.Body.Len()))
	}
}

// BenchmarkToolCallsStream: one full page of small rows through the
// streaming encoder (the ops API's audit hot path).
func BenchmarkToolCallsStream(b *testing.B) {
	ops, _ := NewOperators(map[string]OperatorToken{"alice": opToken})
	data := &fakeData{calls: fakeCalls(1000, 200)}
	h := New(Deps{Operators: ops, Escalations: &fakeEscalations{}, Data: data})
	benchmarkPage(b, h, "/v1/audit/tool-calls?limit=1000")
}
