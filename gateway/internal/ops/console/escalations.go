package console

import (
	"crypto/sha256"
	"encoding/hex"
	"errors"
	"net/http"
	"path"
	"strings"
	"time"
	"unicode/utf8"

	"ironcurtain.dev/gateway/internal/audit"
	"ironcurtain.dev/gateway/internal/escalation"
)

// Bounds of the escalations page.
const (
	// PageBytes bounds the rows of one listing page (escalations, the
	// timeline): rows are added while they fit.
	PageBytes = 1 << 20
	// maxPending is the most pending escalations one page lists.
	maxPending = 200
	// historyRows is the decided escalations one page lists.
	historyRows = 50
	// maxReason bounds an operator's reason.
	maxReason = 2000
)

// escRow is one escalation as a row of the page.
type escRow struct {
	E      escalation.Escalation
	Now    time.Time
	Args   Text
	CSRF   string
	Scopes []scope
}

// scope is an "approve similar" choice with what it will approve, in words.
type scope struct {
	Value  string // escalation.Scope*
	Label  string
	Covers string // agent-derived (resource): escaped like any other value
}

// scopes lists the "approve similar" choices e allows (escalation/decide.go
// similarValue decides the same way; Decide refuses any other).
func scopes(e escalation.Escalation) []scope {
	what := e.Server + " / " + e.Tool
	out := []scope{{Value: escalation.ScopeExact, Label: "exact",
		Covers: "later calls of " + what + " in this session with exactly these arguments"}}
	r := e.Resource
	if strings.HasPrefix(r, "/") && path.Clean(r) == r && !strings.ContainsAny(r, "\x00\n") {
		out = append(out, scope{Value: escalation.ScopeDirectory, Label: "directory",
			Covers: "later calls of " + what + " in this session whose resource is inside " + r})
	}
	dom := strings.ToLower(strings.TrimSuffix(r, "."))
	if dom != "" && !strings.ContainsAny(dom, "/ *@:") {
		out = append(out, scope{Value: escalation.ScopeDomain, Label: "domain",
			Covers: "later calls of " + what + " in this session whose resource is the domain " + dom})
	}
	return out
}

// listEnd is what closes a listing: how many rows it showed, whether more
// did not fit, and its pages.
type listEnd struct {
	N      int
	More   bool
	Next   string
	Cursor string
}

func (c *Console) escalationsPage(w http.ResponseWriter, r *http.Request) {
	cur, err := audit.ParseCursor(r.URL.Query().Get("cursor"))
	if err != nil {
		c.errorPage(w, r, http.StatusBadRequest, "That page link is not valid.")
		return
	}
	pw := c.writer("escalations")
	pw.part("top", withSession(r, page{Title: "Escalations", Nav: "escalations", Live: c.deps.Watch != nil}))
	pw.part("pending-section", nil)
	if err := c.writePending(r, pw); err != nil {
		c.fail(w, r, err)
		return
	}
	if err := c.writeHistory(r, pw, cur); err != nil {
		c.fail(w, r, err)
		return
	}
	pw.part("bottom", nil)
	c.send(w, r, pw)
}

// pendingFragment is the pending section's content alone: the script
// replaces the page's section with it when the event stream says
// escalations changed.
func (c *Console) pendingFragment(w http.ResponseWriter, r *http.Request) {
	pw := c.writer("escalations")
	if err := c.writePending(r, pw); err != nil {
		c.fail(w, r, err)
		return
	}
	c.send(w, r, pw)
}

// writePending lists pending escalations, oldest first, while they fit.
func (c *Console) writePending(r *http.Request, pw *pageWriter) error {
	csrf, now := current(r).csrf, c.now()
	var end listEnd
	pw.part("pending-open", nil)
	err := c.deps.Escalations.ListEach(r.Context(), escalation.ListFilter{Status: escalation.StatusPending, Limit: maxPending + 1}, func(e *escalation.Escalation) error {
		if end.N == maxPending || !pw.row("esc-row", escRow{E: *e, Now: now, Args: NewText(PrettyJSON(e.Args)), CSRF: csrf, Scopes: scopes(*e)}) {
			end.More = true
			return audit.ErrStop
		}
		end.N++
		return nil
	})
	if err != nil {
		return err
	}
	if pw.err != nil {
		return pw.err
	}
	pw.part("pending-close", end)
	return pw.err
}

// writeHistory lists decided escalations after cur, newest first.
func (c *Console) writeHistory(r *http.Request, pw *pageWriter, cur audit.Cursor) error {
	now := c.now()
	end := listEnd{Cursor: cur.String()}
	pw.part("history-open", nil)
	var last audit.Cursor
	seen := 0
	err := c.deps.Escalations.ListEach(r.Context(), escalation.ListFilter{Limit: historyRows * 4, Cursor: cur}, func(e *escalation.Escalation) error {
		seen++
		if e.Status != escalation.StatusPending {
			if end.N == historyRows || !pw.row("esc-row", escRow{E: *e, Now: now, Args: NewText(PrettyJSON(e.Args))}) {
				end.Next = last.String()
				return audit.ErrStop
			}
			end.N++
		}
		last = e.Cursor()
		return nil
	})
	if err != nil {
		return err
	}
	if end.Next == "" && seen == historyRows*4 {
		end.Next = last.String() // only pending rows in this stretch: continue after them
	}
	if pw.err != nil {
		return pw.err
	}
	pw.part("history-close", end)
	return pw.err
}

// escDetail is the approval page: exactly what will run.
type escDetail struct {
	Row       escRow
	ArgsBytes int
	ArgsSHA   string
}

func (c *Console) escalationPage(w http.ResponseWriter, r *http.Request) {
	id := r.URL.Query().Get("id")
	if !validID(id) {
		c.errorPage(w, r, http.StatusBadRequest, "That escalation id is not valid.")
		return
	}
	e, err := c.deps.Escalations.Get(r.Context(), id)
	if err != nil {
		c.fail(w, r, err)
		return
	}
	sum := sha256.Sum256(e.Args)
	d := escDetail{
		Row:       escRow{E: e, Now: c.now(), Args: NewText(PrettyJSON(e.Args)), CSRF: current(r).csrf, Scopes: scopes(e)},
		ArgsBytes: len(e.Args), ArgsSHA: hex.EncodeToString(sum[:]),
	}
	c.render(w, r, http.StatusOK, "escalation", page{Title: "Escalation", Nav: "escalations", Body: d})
}

// decide approves or denies from a form: id, action (approve|deny),
// reason, similar (approve only).
func (c *Console) decide(w http.ResponseWriter, r *http.Request) {
	id := r.PostFormValue("id")
	action := r.PostFormValue("action")
	reason := r.PostFormValue("reason")
	similar := r.PostFormValue("similar")
	if !validID(id) || (action != "approve" && action != "deny") {
		c.errorPage(w, r, http.StatusBadRequest, "The decision form is not valid.")
		return
	}
	if len(reason) > maxReason || !utf8.ValidString(reason) || strings.IndexByte(reason, 0) >= 0 {
		c.errorPage(w, r, http.StatusBadRequest, "The reason must be valid text of at most 2,000 bytes.")
		return
	}
	switch similar {
	case "", escalation.ScopeExact, escalation.ScopeDirectory, escalation.ScopeDomain:
	default:
		c.errorPage(w, r, http.StatusBadRequest, "The similar scope is not valid.")
		return
	}
	if action == "deny" {
		similar = ""
	}
	op := current(r).operator
	e, err := c.deps.Escalations.Decide(r.Context(), id, escalation.Decision{Approve: action == "approve", By: op, Reason: reason, Similar: similar})
	if err != nil {
		c.fail(w, r, err)
		return
	}
	c.log.Info("console: escalation decided", "escalation", e.ID, "status", e.Status, "by", op, "similar", similar)
	http.Redirect(w, r, "/ui/escalations", http.StatusSeeOther)
}

// validID accepts the ids the gateway makes (UUIDs and call ids): short,
// printable ASCII without spaces.
func validID(id string) bool {
	if id == "" || len(id) > 200 {
		return false
	}
	for i := 0; i < len(id); i++ {
		if id[i] <= ' ' || id[i] >= 0x7f {
			return false
		}
	}
	return true
}

// fail shows an error page with a safe message; details go to the log.
func (c *Console) fail(w http.ResponseWriter, r *http.Request, err error) {
	switch {
	case errors.Is(err, escalation.ErrNotFound), errors.Is(err, errNotFound):
		c.errorPage(w, r, http.StatusNotFound, "Not found.")
	case errors.Is(err, escalation.ErrAlreadyDecided):
		c.errorPage(w, r, http.StatusConflict, "Someone already decided this escalation (or it expired).")
	case errors.Is(err, escalation.ErrInvalidDecision), errors.Is(err, escalation.ErrInvalidFilter):
		c.errorPage(w, r, http.StatusBadRequest, "Refused: "+lastPart(err))
	case errors.Is(err, ErrUnavailable):
		c.errorPage(w, r, http.StatusNotImplemented, "Not available on this gateway.")
	case errors.Is(err, errInvalid):
		c.errorPage(w, r, http.StatusBadRequest, lastPart(err))
	default:
		c.log.Error("console request failed", "path", r.URL.Path, "err", err)
		c.errorPage(w, r, http.StatusInternalServerError, "Internal error; see the gateway log.")
	}
}

var (
	errNotFound = errors.New("not found")
	errInvalid  = errors.New("invalid")
)

// lastPart drops wrapping prefixes ("deciding escalation x: ...").
func lastPart(err error) string {
	msg := err.Error()
	if i := strings.LastIndex(msg, ": "); i >= 0 {
		return msg[i+2:]
	}
	return msg
}
