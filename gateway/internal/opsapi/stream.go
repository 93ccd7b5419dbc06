package opsapi

import (
	"bytes"
	"encoding/json"
	"net/http"

	"ironcurtain.dev/gateway/internal/audit"
)

// MaxResponseBytes bounds the body of one audit listing. Rows are encoded
// and written one at a time as Postgres returns them (each row's arguments
// are bounded by audit.MaxReadArgsBytes), so the gateway holds one row, not
// the page; when the next row would pass the bound the page ends with a
// "next" token that continues after its last row.
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

// ErrorDetail is the inside of ErrorBody.
type ErrorDetail struct {
	Code    string `json:"code"`
	Message string `json:"message"`
}

// streamToolCalls writes a ToolCallPage row by row. Nothing is written
// until the first row (or the end) arrives, so a query that fails at once
// still gets its proper status (503 when the database is down).
func (a *api) streamToolCalls(w http.ResponseWriter, r *http.Request, f audit.Filter) {
	limit := f.Limit
	if limit == 0 {
		limit = audit.DefaultQueryLimit
	}
	limit = min(limit, audit.MaxQueryLimit)
	var (
		row     bytes.Buffer
		enc     = json.NewEncoder(&row)
		started bool
		written int
		n       int
		last    audit.Cursor
		next    string
	)
	start := func() {
		started = true
		w.Header().Set("Content-Type", "application/json")
		w.Header().Set("Cache-Control", "no-store")
		w.Header().Set("X-Content-Type-Options", "nosniff")
		w.WriteHeader(http.StatusOK)
		written, _ = w.Write([]byte(`{"tool_calls":[`))
	}
	err := a.deps.Data.ToolCalls(r.Context(), f, func(c *audit.ToolCall) error {
		row.Reset()
		if err := enc.Encode(c); err != nil {
			return err
		}
		b := bytes.TrimRight(row.Bytes(), "\n")
		if n > 0 && written+len(b)+64 > MaxResponseBytes {
			next = last.String()
			return audit.ErrStop
		}
		if !started {
			start()
		}
		if n > 0 {
			k, err := w.Write(comma)
			if written += k; err != nil {
				return err // the client went away
			}
		}
		k, err := w.Write(b)
		written += k
		if err != nil {
			return err // the client went away
		}
		n++
		last = c.Cursor()
		return nil
	})
	if err != nil && !started {
		a.fail(w, err)
		return
	}
	if !started {
		start()
	}
	if err == nil && next == "" && n == limit {
		next = last.String()
	}
	tail := `]`
	if next != "" {
		tail += `,"next":` + quote(next)
	}
	if err != nil {
		a.log.Error("ops API: audit listing failed after rows were sent", "rows", n, "err", err)
		code, msg := CodeInternal, "the listing failed part way; see the gateway log"
		if isUnavailable(err) {
			code, msg = CodeNotReady, "the database became unavailable part way; retry later"
		}
		tail += `,"error":{"code":` + quote(code) + `,"message":` + quote(msg) + `}`
	}
	_, _ = w.Write([]byte(tail + "}\n"))
}

var comma = []byte{','}

func quote(s string) string {
	b, _ := json.Marshal(s)
	return string(b)
}
