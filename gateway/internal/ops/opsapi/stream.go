package opsapi

import (
	"bytes"
	"encoding/json"
	"net/http"

	"ironcurtain.dev/gateway/internal/audit"
	"ironcurtain.dev/gateway/internal/escalation"
)

// MaxResponseBytes bounds the body of one listing (audit tool calls,
// escalations). Rows are encoded and written one at a time as Postgres
// returns them (each row's arguments are bounded: audit.MaxReadArgsBytes,
// escalation.ListArgsBytes), so the gateway holds one row, not the page;
// when the next row would pass the bound the page ends with a "next" token
// that continues after its last row.
const MaxResponseBytes = 4 << 20

// ToolCallPage is the body of GET /v1/audit/tool-calls:
//
//	{"tool_calls": [...], "next": "<token>"}
//
// Next is set when more rows may match (the byte bound or the row limit
// ended the page): pass it back as ?cursor= with the same filters. Error is
// set when the query failed after rows were sent (the status is then
// already 200): the page is incomplete.
type ToolCallPage struct {
	ToolCalls []audit.ToolCall `json:"tool_calls"`
	Next      string           `json:"next,omitempty"`
	Error     *ErrorDetail     `json:"error,omitempty"`
}

// EscalationPage is the body of GET /v1/escalations, with Next and Error
// as in ToolCallPage. Each escalation's arguments are in the listing form
// (escalation.ListArgsBytes); GET /v1/escalations/{id} shows them whole.
type EscalationPage struct {
	Escalations []escalation.Escalation `json:"escalations"`
	Next        string                  `json:"next,omitempty"`
	Error       *ErrorDetail            `json:"error,omitempty"`
}

// ErrorDetail is the inside of ErrorBody.
type ErrorDetail struct {
	Code    string `json:"code"`
	Message string `json:"message"`
}

// pageWriter writes one page of a listing, {"<key>":[row,...],"next":...},
// row by row. Nothing is written until the first row (or the end) arrives,
// so a query that fails at once still gets its proper status (503 when the
// database is down).
type pageWriter struct {
	w       http.ResponseWriter
	key     string // the rows' key: "tool_calls", "escalations"
	row     bytes.Buffer
	enc     *json.Encoder
	started bool
	written int
	n       int
	last    audit.Cursor // position of the last row written
	next    string
}

func newPageWriter(w http.ResponseWriter, key string) *pageWriter {
	p := &pageWriter{w: w, key: key}
	p.enc = json.NewEncoder(&p.row)
	return p
}

// rawHTML leaves <, > and & as they are: the body is JSON served as
// application/json with nosniff, and an escalation's arguments then read
// byte for byte as GET /v1/escalations/{id} shows them.
func (p *pageWriter) rawHTML() *pageWriter {
	p.enc.SetEscapeHTML(false)
	return p
}

func (p *pageWriter) start() {
	p.started = true
	h := p.w.Header()
	h.Set("Content-Type", "application/json")
	h.Set("Cache-Control", "no-store")
	h.Set("X-Content-Type-Options", "nosniff")
	p.w.WriteHeader(http.StatusOK)
	p.written, _ = p.w.Write([]byte(`{` + quote(p.key) + `:[`))
}

// add writes v, whose position in the listing is at, unless the page would
// pass MaxResponseBytes: then the page ends after the last row written, with
// a next token, and add returns audit.ErrStop.
func (p *pageWriter) add(v any, at audit.Cursor) error {
	p.row.Reset()
	if err := p.enc.Encode(v); err != nil {
		return err
	}
	b := bytes.TrimRight(p.row.Bytes(), "\n")
	if p.n > 0 && p.written+len(b)+64 > MaxResponseBytes {
		p.next = p.last.String()
		return audit.ErrStop
	}
	if !p.started {
		p.start()
	}
	if p.n > 0 {
		k, err := p.w.Write(comma)
		if p.written += k; err != nil {
			return err // the client went away
		}
	}
	k, err := p.w.Write(b)
	p.written += k
	if err != nil {
		return err // the client went away
	}
	p.n++
	p.last = at
	return nil
}

// finishPage ends the page after the listing returned err. A page of limit
// rows gets a next token (more may match). An error before any row is
// answered with its status; one after rows were sent goes in the body.
func (a *api) finishPage(p *pageWriter, err error, limit int, what string) {
	if err != nil && !p.started {
		a.fail(p.w, err)
		return
	}
	if !p.started {
		p.start()
	}
	if err == nil && p.next == "" && p.n == limit {
		p.next = p.last.String()
	}
	tail := `]`
	if p.next != "" {
		tail += `,"next":` + quote(p.next)
	}
	if err != nil {
		a.log.Error("ops API: "+what+" failed after rows were sent", "rows", p.n, "err", err)
		code, msg := CodeInternal, "the listing failed part way; see the gateway log"
		if isUnavailable(err) {
			code, msg = CodeNotReady, "the database became unavailable part way; retry later"
		}
		tail += `,"error":{"code":` + quote(code) + `,"message":` + quote(msg) + `}`
	}
	_, _ = p.w.Write([]byte(tail + "}\n"))
}

// streamToolCalls writes a ToolCallPage row by row.
func (a *api) streamToolCalls(w http.ResponseWriter, r *http.Request, f audit.Filter) {
	limit := f.Limit
	if limit == 0 {
		limit = audit.DefaultQueryLimit
	}
	limit = min(limit, audit.MaxQueryLimit)
	p := newPageWriter(w, "tool_calls")
	err := a.deps.Data.ToolCalls(r.Context(), f, func(c *audit.ToolCall) error {
		return p.add(c, c.Cursor())
	})
	a.finishPage(p, err, limit, "audit listing")
}

// streamEscalations writes an EscalationPage row by row.
func (a *api) streamEscalations(w http.ResponseWriter, r *http.Request, f escalation.ListFilter) {
	limit := f.Limit
	if limit == 0 {
		limit = escalation.DefaultListLimit
	}
	limit = min(limit, escalation.MaxListLimit)
	p := newPageWriter(w, "escalations").rawHTML()
	err := a.deps.Escalations.ListEach(r.Context(), f, func(e *escalation.Escalation) error {
		return p.add(e, e.Cursor())
	})
	a.finishPage(p, err, limit, "escalation listing")
}

var comma = []byte{','}

func quote(s string) string {
	b, _ := json.Marshal(s)
	return string(b)
}
