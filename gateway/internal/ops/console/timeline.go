package console

import (
	"net/http"
	"time"

	"ironcurtain.dev/gateway/internal/audit"
)

// Bounds of the timeline.
const (
	// timelineRows is the most tool calls one page lists (PageBytes
	// usually ends it first).
	timelineRows = 100
	// egressPerPage bounds the egress events fetched for a page's calls.
	egressPerPage = 2000
	// aroundRows bounds the relay calls and the egress without a call
	// listed beside a page.
	aroundRows = 200
)

// callRow is one tool call with the egress events it caused.
type callRow struct {
	C      audit.ToolCall
	Args   Text
	Egress []EgressEvent
	Now    time.Time
}

type timelineBody struct {
	Session  string
	Filter   audit.Filter
	Cursor   string
	Verified *audit.SessionCheck
	CSRF     string
}

type timelineFoot struct {
	Session string
	Filter  audit.Filter
	Calls   int
	Next    string
	Cursor  string
}

func (c *Console) timelinePage(w http.ResponseWriter, r *http.Request) {
	c.timeline(w, r, false)
}

// verify runs the session's hash-chain check and shows the timeline with
// its result.
func (c *Console) verify(w http.ResponseWriter, r *http.Request) {
	c.timeline(w, r, true)
}

func (c *Console) timeline(w http.ResponseWriter, r *http.Request, verify bool) {
	q := r.URL.Query()
	if r.Method == http.MethodPost {
		q = r.PostForm
	}
	f := audit.Filter{Session: q.Get("session"), Server: q.Get("server"), Tool: q.Get("tool"), Decision: q.Get("decision"), Limit: timelineRows + 1}
	if f.Session == "" || len(f.Session) > 512 || len(f.Server) > 512 || len(f.Tool) > 512 {
		c.fail(w, r, errInvalidf("choose a session (and filters of at most 512 bytes)"))
		return
	}
	var err error
	if f.Cursor, err = audit.ParseCursor(q.Get("cursor")); err != nil {
		c.fail(w, r, errInvalidf("that page link is not valid"))
		return
	}
	if err := f.Validate(); err != nil {
		c.fail(w, r, errInvalidf(err.Error()))
		return
	}
	ctx := r.Context()
	head := timelineBody{Session: f.Session, Filter: f, Cursor: f.Cursor.String(), CSRF: current(r).csrf}
	if verify {
		check, err := c.deps.Store.Verify(ctx, f.Session)
		if err != nil {
			c.fail(w, r, err)
			return
		}
		head.Verified = &check
		c.log.Info("console: audit chain verified", "session", f.Session, "intact", check.Break == nil, "records", check.Records, "by", current(r).operator)
	}
	now := c.now()
	var calls []callRow
	more := false
	err = c.deps.Store.ToolCalls(ctx, f, func(tc *audit.ToolCall) error {
		if len(calls) == timelineRows {
			more = true
			return audit.ErrStop
		}
		calls = append(calls, callRow{C: *tc, Args: NewText(PrettyJSON(tc.Args)), Now: now})
		return nil
	})
	if err != nil {
		c.fail(w, r, err)
		return
	}
	ids := make([]string, len(calls))
	byID := make(map[string]int, len(calls))
	for i, cr := range calls {
		ids[i] = cr.C.CallID
		byID[cr.C.CallID] = i
	}
	eg, err := c.deps.Store.EgressOf(ctx, ids, egressPerPage)
	if err != nil {
		c.fail(w, r, err)
		return
	}
	for _, e := range eg {
		if i, ok := byID[e.ToolCallID]; ok {
			calls[i].Egress = append(calls[i].Egress, e)
		}
	}
	pw := c.writer("timeline")
	pw.part("top", withSession(r, page{Title: "Timeline", Nav: "sessions"}))
	pw.part("timeline-head", head)
	foot := timelineFoot{Session: f.Session, Filter: f, Cursor: head.Cursor}
	for _, cr := range calls {
		if !pw.row("call-row", cr) {
			more = true
			break
		}
		foot.Calls++
	}
	// Relay calls and egress without a call in the span of this page.
	var from, to time.Time
	if !f.Cursor.IsZero() {
		to = f.Cursor.Time
	}
	if foot.Calls > 0 && more {
		last := calls[foot.Calls-1].C
		from = last.Time
		foot.Next = last.Cursor().String()
	}
	if foot.Calls == 0 && !f.Cursor.IsZero() {
		from = to
	}
	pw.part("timeline-foot", foot)
	if f.Server == "" && f.Tool == "" && f.Decision == "" {
		llm, other, err := c.deps.Store.Around(ctx, f.Session, from, to, aroundRows)
		if err != nil {
			c.fail(w, r, err)
			return
		}
		if len(llm)+len(other) > 0 {
			pw.part("around-open", nil)
			cut := false
			for i := 0; i < len(llm) && !cut; i++ {
				cut = !pw.row("llm-row", llm[i])
			}
			for i := 0; i < len(other) && !cut; i++ {
				cut = !pw.row("egress-row", other[i])
			}
			pw.part("around-close", cut)
		}
	}
	pw.part("bottom", nil)
	c.send(w, r, pw)
}

func errInvalidf(msg string) error { return invalidError(msg) }

type invalidError string

func (e invalidError) Error() string        { return string(e) }
func (e invalidError) Is(target error) bool { return target == errInvalid }
