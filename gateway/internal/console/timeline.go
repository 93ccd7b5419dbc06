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
	timelineRows = 200
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
	Calls    []callRow
	Next     string
	Cursor   string
	LLM      []LLMCall
	Other    []EgressEvent
	Bytes    int
	Verified *audit.SessionCheck
	CSRF     string
}

func (c *Console) timelinePage(w http.ResponseWriter, r *http.Request) {
	body, err := c.loadTimeline(r)
	if err != nil {
		c.fail(w, r, err)
		return
	}
	c.render(w, r, http.StatusOK, "timeline", page{Title: "Timeline", Nav: "sessions", Body: body})
}

func (c *Console) loadTimeline(r *http.Request) (timelineBody, error) {
	q := r.URL.Query()
	if r.Method == http.MethodPost {
		q = r.PostForm
	}
	f := audit.Filter{Session: q.Get("session"), Server: q.Get("server"), Tool: q.Get("tool"), Decision: q.Get("decision"), Limit: timelineRows + 1}
	body := timelineBody{Session: f.Session, CSRF: current(r).csrf}
	if f.Session == "" || len(f.Session) > 512 || len(f.Server) > 512 || len(f.Tool) > 512 {
		return body, errInvalidf("choose a session (and filters of at most 512 bytes)")
	}
	var err error
	if f.Cursor, err = audit.ParseCursor(q.Get("cursor")); err != nil {
		return body, errInvalidf("that page link is not valid")
	}
	if err := f.Validate(); err != nil {
		return body, errInvalidf(err.Error())
	}
	body.Filter, body.Cursor = f, f.Cursor.String()
	ctx := r.Context()
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
		return body, err
	}
	ids := make([]string, len(calls))
	byID := make(map[string]int, len(calls))
	for i, cr := range calls {
		ids[i] = cr.C.CallID
		byID[cr.C.CallID] = i
	}
	eg, err := c.deps.Store.EgressOf(ctx, ids, egressPerPage)
	if err != nil {
		return body, err
	}
	for _, e := range eg {
		if i, ok := byID[e.ToolCallID]; ok {
			calls[i].Egress = append(calls[i].Egress, e)
		}
	}
	// Add rows while the page stays within PageBytes.
	used := 0
	for _, cr := range calls {
		n, err := c.size("timeline", "call-row", cr)
		if err != nil {
			return body, err
		}
		if used+n > PageBytes && len(body.Calls) > 0 {
			more = true
			break
		}
		used += n
		body.Calls = append(body.Calls, cr)
	}
	var from, to time.Time
	if !f.Cursor.IsZero() {
		to = f.Cursor.Time
	}
	if len(body.Calls) > 0 {
		if more {
			last := body.Calls[len(body.Calls)-1].C
			from = last.Time
			body.Next = last.Cursor().String()
		}
	}
	if len(body.Calls) == 0 && !f.Cursor.IsZero() {
		from = to
	}
	if f.Server == "" && f.Tool == "" && f.Decision == "" {
		if body.LLM, body.Other, err = c.deps.Store.Around(ctx, f.Session, from, to, aroundRows); err != nil {
			return body, err
		}
	}
	body.Bytes = used
	return body, nil
}

// verify runs the session's hash-chain check and shows the timeline with
// its result.
func (c *Console) verify(w http.ResponseWriter, r *http.Request) {
	body, err := c.loadTimeline(r)
	if err != nil {
		c.fail(w, r, err)
		return
	}
	check, err := c.deps.Store.Verify(r.Context(), body.Session)
	if err != nil {
		c.fail(w, r, err)
		return
	}
	body.Verified = &check
	c.log.Info("console: audit chain verified", "session", body.Session, "intact", check.Break == nil, "records", check.Records, "by", current(r).operator)
	c.render(w, r, http.StatusOK, "timeline", page{Title: "Timeline", Nav: "sessions", Body: body})
}

func errInvalidf(msg string) error { return invalidError(msg) }

type invalidError string

func (e invalidError) Error() string        { return string(e) }
func (e invalidError) Is(target error) bool { return target == errInvalid }
