package opsapi

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"net/http"
	"net/http/httptest"
	"reflect"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/jackc/pgx/v5/pgconn"

	"ironcurtain.dev/gateway/internal/escalation"
)

func fakeEscalationItems(n, argBytes int) map[string]escalation.Escalation {
	out := make(map[string]escalation.Escalation, n)
	base := time.Date(2026, 1, 2, 3, 4, 5, 0, time.UTC)
	for i := range n {
		id := fmt.Sprintf("e%03d", i)
		out[id] = escalation.Escalation{ID: id, CallID: "c" + id, SessionID: "s1", Kind: escalation.KindToolCall,
			Server: "filesystem", Tool: "write_file", Status: escalation.StatusPending, CreatedAt: base.Add(time.Duration(i) * time.Second),
			Args: json.RawMessage(`{"content":"` + strings.Repeat("x", argBytes) + `"}`)}
	}
	return out
}

// TestEscalationsBoundedInBytes: GET /v1/escalations is written row by row
// and stops before MaxResponseBytes with a next token; the row limit also
// yields one; bad parameters are refused naming them; a failure before the
// first row has its status, one after rows were sent is in the body.
func TestEscalationsBoundedInBytes(t *testing.T) {
	tests := []struct {
		name       string
		items      map[string]escalation.Escalation
		query      string
		err        error // every call fails
		listErr    error
		errAfter   int
		wantStatus int
		wantRows   int
		wantNext   string // escalation id the next token continues after ("" none)
		wantErr    string // error code inside a 200 body
	}{
		{name: "small page complete", items: fakeEscalationItems(3, 10), wantStatus: 200, wantRows: 3},
		{name: "byte bound ends the page", items: fakeEscalationItems(200, 60<<10), query: "?limit=1000", wantStatus: 200,
			wantRows: MaxResponseBytes / (60 << 10), wantNext: fmt.Sprintf("e%03d", MaxResponseBytes/(60<<10)-1)},
		{name: "row limit gives next", items: fakeEscalationItems(10, 10), query: "?limit=4", wantStatus: 200, wantRows: 4, wantNext: "e003"},
		{name: "bad cursor", items: fakeEscalationItems(1, 10), query: "?cursor=bm90LWEtdG9rZW4", wantStatus: 400},
		{name: "bad status", items: fakeEscalationItems(1, 10), query: "?status=weird", wantStatus: 400},
		{name: "bad limit", items: fakeEscalationItems(1, 10), query: "?limit=-1", wantStatus: 400},
		{name: "down before the first row", items: fakeEscalationItems(3, 10), err: &pgconn.ConnectError{}, wantStatus: 503},
		{name: "down part way", items: fakeEscalationItems(3, 10), listErr: &pgconn.PgError{Code: "57P01"}, errAfter: 2, wantStatus: 200, wantRows: 2, wantErr: CodeNotReady},
		{name: "other failure part way", items: fakeEscalationItems(3, 10), listErr: errors.New("boom"), errAfter: 1, wantStatus: 200, wantRows: 1, wantErr: CodeInternal},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			h, esc, _ := newTestAPI(t)
			esc.items, esc.err, esc.listErr, esc.listErrAfter = tt.items, tt.err, tt.listErr, tt.errAfter
			var page EscalationPage
			if !getPage(t, h, "/v1/escalations"+tt.query, tt.wantStatus, &page) {
				return
			}
			if c, ok := checkPageNext(t, len(page.Escalations), page.Next, tt.wantRows, tt.wantNext); ok {
				if last := page.Escalations[len(page.Escalations)-1]; !c.Time.Equal(last.CreatedAt) {
					t.Fatalf("next = %+v; want after %s at %v", c, tt.wantNext, last.CreatedAt)
				}
				// The token goes back as ?cursor= and reaches the listing.
				rec2 := serve(t, h, http.MethodGet, "/v1/escalations?cursor="+page.Next)
				if rec2.Code != 200 || esc.gotList.Cursor != c {
					t.Fatalf("cursor not passed on: %d, %+v", rec2.Code, esc.gotList.Cursor)
				}
			}
			checkPageError(t, page.Error, tt.wantErr)
		})
	}
}

// TestWriteEscalation: one escalation is answered with its canonical
// arguments byte for byte (no HTML escaping, no re-encoding), the other
// fields as json.Marshal writes them.
func TestWriteEscalation(t *testing.T) {
	now := time.Date(2026, 1, 2, 3, 4, 5, 0, time.UTC)
	tests := []struct {
		name     string
		e        escalation.Escalation
		wantArgs string
	}{
		{name: "canonical arguments verbatim", e: escalation.Escalation{ID: "e1", Kind: "tool_call", Server: "filesystem", Tool: "write_file",
			Args: json.RawMessage(`{"content":"<b>&</b>","path":"/w/a"}`), Rule: "r", Status: "pending", CreatedAt: now, ExpiresAt: now},
			wantArgs: `{"content":"<b>&</b>","path":"/w/a"}`},
		{name: "agent text that looks like the field", e: escalation.Escalation{ID: `,"args":null,`, SessionID: `x","args":null,"y`, Kind: "egress",
			Args: json.RawMessage(`{"url":"https://example.com/,\"args\":null,"}`), Status: "pending"},
			wantArgs: `{"url":"https://example.com/,\"args\":null,"}`},
		{name: "no arguments", e: escalation.Escalation{ID: "e2", Kind: "egress", Status: "denied"}, wantArgs: `null`},
		{name: "not JSON: shown as text", e: escalation.Escalation{ID: "e3", Kind: "tool_call", Args: json.RawMessage(`{"a":`), Status: "pending"},
			wantArgs: `"{\"a\":"`},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			rec := httptest.NewRecorder()
			writeEscalation(rec, tt.e)
			if rec.Code != 200 || rec.Header().Get("Content-Type") != "application/json" {
				t.Fatalf("%d %q", rec.Code, rec.Header().Get("Content-Type"))
			}
			var raw struct {
				Args json.RawMessage `json:"args"`
			}
			if err := json.Unmarshal(rec.Body.Bytes(), &raw); err != nil {
				t.Fatalf("%s: %v", rec.Body, err)
			}
			if string(raw.Args) != tt.wantArgs {
				t.Fatalf("args = %s, want %s", raw.Args, tt.wantArgs)
			}
			var got escalation.Escalation
			if err := json.Unmarshal(rec.Body.Bytes(), &got); err != nil {
				t.Fatal(err)
			}
			want := tt.e
			want.Args, got.Args = nil, nil
			if !reflect.DeepEqual(got, want) {
				t.Fatalf("got %+v\nwant %+v", got, want)
			}
			if !bytes.HasSuffix(rec.Body.Bytes(), []byte("}\n")) {
				t.Fatalf("body %q", rec.Body)
			}
		})
	}
}

// BenchmarkEscalationsStream: one full page of small escalations through
// the streaming encoder.
func BenchmarkEscalationsStream(b *testing.B) {
	ops, _ := NewOperators(map[string]OperatorToken{"alice": opToken})
	esc := &fakeEscalations{items: fakeEscalationItems(1000, 200)}
	h := New(Deps{Operators: ops, Escalations: esc, Data: &fakeData{}})
	benchmarkPage(b, h, "/v1/escalations?limit=1000")
}

// FuzzWriteEscalation: whatever text the agent put in an escalation's
// fields and arguments, the answer is one JSON object whose fields decode
// to what was stored, and whose arguments are the stored bytes when they
// are JSON (the splice cannot be moved by agent text).
func FuzzWriteEscalation(f *testing.F) {
	f.Add("e1", "s1", "git", "push", `{"path":"/w/a"}`, "r")
	f.Add(`,"args":null,`, `x","args":null,"y`, "", "", `{"u":",\"args\":null,"}`, `"args":null`)
	f.Add("e2", "", "", "", `[1,2]`, "")
	f.Add("e3", "\xff", "\u2028", "<>&", `{"a":`, "\x00")
	f.Fuzz(func(t *testing.T, id, session, server, tool, args, reason string) {
		e := escalation.Escalation{ID: id, SessionID: session, Kind: "tool_call", Server: server, Tool: tool,
			Args: json.RawMessage(args), Reason: reason, Status: "pending"}
		rec := httptest.NewRecorder()
		writeEscalation(rec, e)
		body := rec.Body.Bytes()
		if !json.Valid(body) {
			t.Fatalf("answer is not JSON: %q", body)
		}
		var got escalation.Escalation
		if err := json.Unmarshal(body, &got); err != nil {
			t.Fatal(err)
		}
		want, _ := json.Marshal(escalation.Escalation{ID: id, SessionID: session, Kind: "tool_call", Server: server, Tool: tool, Reason: reason, Status: "pending"})
		var w escalation.Escalation
		_ = json.Unmarshal(want, &w)
		gotArgs := got.Args
		got.Args, w.Args = nil, nil
		if !reflect.DeepEqual(got, w) {
			t.Fatalf("fields %+v, want %+v", got, w)
		}
		switch {
		case args == "":
			if string(gotArgs) != "null" {
				t.Fatalf("empty arguments answered as %s", gotArgs)
			}
		case json.Valid([]byte(args)):
			var raw struct {
				Args json.RawMessage `json:"args"`
			}
			_ = json.Unmarshal(body, &raw)
			if !bytes.Equal(raw.Args, []byte(args)) && !bytes.Equal(raw.Args, bytes.TrimSpace([]byte(args))) {
				t.Fatalf("arguments %q answered as %q", args, raw.Args)
			}
		default:
			var s string
			if err := json.Unmarshal(gotArgs, &s); err != nil {
				t.Fatalf("invalid arguments answered as %s, not as text", gotArgs)
			}
		}
	})
}

// FuzzEscalationPage: the client's streaming decoder of a listing page
// never panics or loops on what a server sends, and reads every row of a
// well-formed page.
func FuzzEscalationPage(f *testing.F) {
	good, _ := json.Marshal(EscalationPage{Escalations: []escalation.Escalation{{ID: "e1", Status: "pending"}, {ID: "e2"}}, Next: "x"})
	f.Add(good)
	whole, _ := json.Marshal(EscalationPage{Escalations: []escalation.Escalation{{ID: "e1"}, {ID: "e2"}, {ID: "e3"}}})
	f.Add(whole)
	f.Add([]byte(`{"escalations":[{"id":"a"}],"error":{"code":"not_ready","message":"m"}}`))
	f.Add([]byte(`{"escalations":[{"id":"a"},`))
	f.Add([]byte(`{"other":{"escalations":[1]},"escalations":null}`))
	f.Add([]byte(`[]`))
	var (
		mu   sync.Mutex
		body []byte
	)
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, _ *http.Request) {
		mu.Lock()
		defer mu.Unlock()
		_, _ = w.Write(body)
	}))
	defer srv.Close()
	c, err := NewClient(srv.URL, opToken)
	if err != nil {
		f.Fatal(err)
	}
	f.Fuzz(func(t *testing.T, b []byte) {
		mu.Lock()
		body = b
		mu.Unlock()
		var ids []string
		err := c.EachEscalation(context.Background(), escalation.ListFilter{Limit: 5}, func(e *escalation.Escalation) error {
			ids = append(ids, e.ID)
			return nil
		})
		var page EscalationPage
		if json.Unmarshal(b, &page) != nil || page.Next != "" || page.Error != nil {
			return
		}
		if again, _ := json.Marshal(page); !bytes.Equal(again, b) {
			return // not a page as the API writes it (repeated keys, ...)
		}
		if err != nil || len(ids) != min(len(page.Escalations), 5) && len(ids) != len(page.Escalations) {
			t.Fatalf("read %d rows of a page of %d: %v", len(ids), len(page.Escalations), err)
		}
	})
}
