package mcphub

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net/http"
	"sync"
	"time"

	"github.com/go-json-experiment/json/jsontext"
	"github.com/mark3labs/mcp-go/server"

	"ironcurtain.dev/gateway/internal/auth"
	"ironcurtain.dev/gateway/internal/netlimit"
	"ironcurtain.dev/gateway/internal/session"
	"ironcurtain.dev/gateway/strictjson"
)

// Reasons of refused requests (metric label values).
const (
	authMissing = "missing_token"
	authUnknown = "unknown_token"
	authForeign = "foreign_session"
)

// authenticate wraps the MCP transport: every request must carry a known
// agent token as "Authorization: Bearer <token>"; a request naming an MCP
// session must come from the agent session that opened it. The session is
// put in the request context for the pipeline.
func (h *Hub) authenticate(next http.Handler) http.Handler {
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		switch r.Method {
		case http.MethodGet, http.MethodPost, http.MethodDelete:
		default:
			w.Header().Set("Allow", "GET, POST, DELETE")
			netlimit.DontDrain(w)
			http.Error(w, "method not allowed: /mcp takes GET, POST and DELETE", http.StatusMethodNotAllowed)
			return
		}
		tok, err := auth.Bearer(r.Header)
		if err != nil {
			h.refuseAuth(w, r, authMissing, "")
			return
		}
		sess, err := h.auth.Authenticate(r.Context(), tok)
		if err != nil {
			h.refuseAuth(w, r, authUnknown, session.Fingerprint(tok))
			return
		}
		sid := r.Header.Get(server.HeaderKeySessionID)
		if sid != "" && !h.owners.check(sid, sess.ID, h.now()) {
			// Another agent session's MCP session (or one this gateway never
			// opened): answer as for an unknown session.
			h.metrics.AuthFailure(authForeign)
			h.log.Warn("MCP request for a session of another agent session refused",
				"session", sess.ID, "remote", r.RemoteAddr)
			http.Error(w, "Invalid session ID", http.StatusNotFound)
			return
		}
		if r.Method == http.MethodGet && sid == "" {
			// An event stream belongs to an MCP session: without one it would be held open
			// for nothing (and for ever).
			http.Error(w, "an event stream needs an MCP session: send Mcp-Session-Id from initialize", http.StatusBadRequest)
			return
		}
		if sid != "" {
			defer h.owners.use(sid, h.now)()
		}
		r.Body = http.MaxBytesReader(w, r.Body, h.cfg.MaxRequestBytes)
		method := ""
		if r.Method == http.MethodPost {
			// One slot of the agent session's requests in flight, taken
			// before the body is read (admission.go).
			release, err := h.inflight.acquire(r.Context(), sess.ID)
			if err != nil && !errors.Is(err, errBusy) {
				return // the client went away while its request waited
			}
			if err != nil {
				h.metrics.RefusedRequest(refusedBusy)
				netlimit.DontDrain(w)
				writeRPCError(w, http.StatusTooManyRequests, -32000, nil,
					fmt.Sprintf("refused: this agent session already has %d requests in flight and %d waiting; wait for their answers", h.cfg.MaxCallsInFlight, h.cfg.MaxQueuedCalls))
				return
			}
			defer release()
			// The body is checked while it is read (shape, duplicates): a
			// body past a bound is refused when the bytes that pass it
			// arrive, and the rest is never read (issue 24 item 12).
			body, err := strictjson.ReadChecked(r.Body, h.jsonLimits)
			if err != nil {
				netlimit.DontDrain(w)
				if !errors.Is(err, strictjson.ErrRefused) {
					h.metrics.RefusedRequest(refusedJSON)
					writeRPCError(w, http.StatusBadRequest, -32700, nil, "refused: the request body could not be read whole (it may be larger than the gateway accepts)")
					return
				}
				gerr := jsonRefusal(err)
				h.refuseRPC(r.Context(), sess.ID, gerr)
				writeRPCError(w, http.StatusBadRequest, gerr.Code, gerr.ID, gerr.Msg)
				return
			}
			var gerr *gateError
			method, gerr = h.gateRPC(r.Context(), sess.ID, body)
			if gerr != nil {
				h.refuseRPC(r.Context(), sess.ID, gerr)
				writeRPCError(w, http.StatusBadRequest, gerr.Code, gerr.ID, gerr.Msg)
				return
			}
			r.Body = &replayBody{data: body}
		}
		r = r.WithContext(session.WithSession(r.Context(), sess))
		if method == "initialize" {
			// A new MCP session (mcp-go makes a new one for every initialize,
			// with or without Mcp-Session-Id): counted against the caps
			// before it exists, remembered with its owner once it does.
			commit, cancel, err := h.owners.reserve(sess.ID)
			if err != nil {
				h.metrics.RefusedRequest(refusedSessions)
				total, mine := h.owners.count(sess.ID)
				h.log.Warn("MCP session refused: the cap is reached", "session", sess.ID, "sessions", total, "of_agent", mine, "err", err)
				writeRPCError(w, http.StatusTooManyRequests, -32000, nil, fmt.Sprintf(
					"refused: %v (at most %d per agent token, %d in all); close sessions you no longer use (HTTP DELETE with Mcp-Session-Id) or wait %s for idle ones to end",
					err, h.cfg.MaxSessionsPerToken, h.cfg.MaxSessions, h.cfg.SessionIdleTTL))
				return
			}
			defer cancel()
			w = &ownerWriter{ResponseWriter: w, onHeader: func(hdr http.Header) {
				if id := hdr.Get(server.HeaderKeySessionID); id != "" {
					commit(id, h.now(), h.cfg.SessionIdleTTL)
				}
			}}
		}
		next.ServeHTTP(w, r)
		if sid != "" && r.Method == http.MethodDelete {
			h.owners.remove(sid)
		}
	})
}

// gateRPC runs the strict read of a body (rpcgate.go) in a fair slot
// (admission.go) and returns the message's method.
func (h *Hub) gateRPC(ctx context.Context, sess string, body []byte) (string, *gateError) {
	leave, err := h.fair.enter(ctx, sess)
	if err != nil {
		return "", &gateError{Code: -32000, Reason: refusedBusy, Msg: "refused: the request ended while it waited for its turn"}
	}
	defer leave()
	return checkMessage(body)
}

// refuseRPC counts and logs a request the gate refused, then waits
// Config.RefusalDelay holding the request's slot (admission.go): an agent
// looping on refused bodies gets at most MaxCallsInFlight of them per
// delay, and while it waits for the answer it sends no more bytes.
func (h *Hub) refuseRPC(ctx context.Context, sess string, gerr *gateError) {
	h.metrics.RefusedRequest(gerr.Reason)
	h.log.Warn("MCP request refused before parsing", "session", sess, "reason", gerr.Reason, "detail", gerr.Msg)
	t := time.NewTimer(h.cfg.RefusalDelay)
	defer t.Stop()
	select {
	case <-t.C:
	case <-ctx.Done():
	}
}

// isBatch reports whether a JSON-RPC body is a batch (a JSON array).
func isBatch(body []byte) bool {
	trimmed := bytes.TrimLeft(body, " \t\r\n")
	return len(trimmed) > 0 && trimmed[0] == '['
}

// writeRPCError answers with a JSON-RPC error object (id: the request's,
// null when it was not read).
func writeRPCError(w http.ResponseWriter, status, code int, id jsontext.Value, msg string) {
	var rid any
	if len(id) > 0 {
		rid = json.RawMessage(id)
	}
	b, _ := json.Marshal(map[string]any{"jsonrpc": "2.0", "id": rid, "error": map[string]any{"code": code, "message": msg}})
	w.Header().Set("Content-Type", "application/json")
	w.WriteHeader(status)
	_, _ = w.Write(b)
}

// replayBody is a request body read ahead of the transport: the bytes, then the read's error
// (a too-large body stays too large for the transport).
type replayBody struct {
	data []byte
	err  error
}

func (b *replayBody) Read(p []byte) (int, error) {
	if len(b.data) == 0 {
		if b.err != nil {
			return 0, b.err
		}
		return 0, io.EOF
	}
	n := copy(p, b.data)
	b.data = b.data[n:]
	return n, nil
}

func (b *replayBody) Close() error { return nil }

// refuseAuth answers 401 and records the refusal (log and metric). Only a
// fingerprint of a presented token is logged.
func (h *Hub) refuseAuth(w http.ResponseWriter, r *http.Request, reason, fingerprint string) {
	h.metrics.AuthFailure(reason)
	attrs := []any{"reason", reason, "remote", r.RemoteAddr, "method", r.Method, "path", r.URL.Path}
	if fingerprint != "" {
		attrs = append(attrs, "token_fingerprint", fingerprint)
	}
	h.log.Warn("MCP request refused: agent token missing or unknown", attrs...)
	w.Header().Set("WWW-Authenticate", `Bearer realm="ironcurtain"`)
	netlimit.DontDrain(w) // close instead of draining a body trickled after the refusal
	http.Error(w, "unauthorized: a valid agent token is required (Authorization: Bearer <token>)", http.StatusUnauthorized)
}

// ownerWriter calls onHeader once, just before the header is written. It
// keeps the writer's Flush (the transport streams SSE through it).
type ownerWriter struct {
	http.ResponseWriter
	onHeader func(http.Header)
	wrote    bool
}

func (w *ownerWriter) WriteHeader(code int) {
	if !w.wrote {
		w.wrote = true
		w.onHeader(w.Header())
	}
	w.ResponseWriter.WriteHeader(code)
}

func (w *ownerWriter) Write(b []byte) (int, error) {
	if !w.wrote {
		w.WriteHeader(http.StatusOK)
	}
	return w.ResponseWriter.Write(b)
}

func (w *ownerWriter) Flush() {
	if !w.wrote {
		w.WriteHeader(http.StatusOK)
	}
	if f, ok := w.ResponseWriter.(http.Flusher); ok {
		f.Flush()
	}
}

// Unwrap lets http.ResponseController reach the underlying writer.
func (w *ownerWriter) Unwrap() http.ResponseWriter { return w.ResponseWriter }

// sessionOwners maps MCP session ids to the agent session that opened them,
// and bounds them (issue 24 item 13: 20,000 sessions opened and never
// closed held 335 MB for an hour): at most perAgent per agent session (one
// agent token) and total in all, reserved before initialize runs; a
// session idle longer than its TTL (no request for it, none in flight) is
// swept (sweep, from a ticker the hub runs).
type sessionOwners struct {
	mu       sync.Mutex
	m        map[string]owner
	perAgent map[string]int // sessions and reservations per agent session
	total    int
	maxAgent int
	maxTotal int
	// onCount is told the number of sessions after every change (a gauge).
	onCount func(int)
}

type owner struct {
	agent string
	seen  time.Time
	ttl   time.Duration
	busy  int // requests of the session in flight
}

// Refusals of a new MCP session.
var (
	errAgentSessionsFull = errors.New("this agent token has too many open MCP sessions")
	errSessionsFull      = errors.New("the gateway has too many open MCP sessions")
)

// reserve counts a session about to be created for agent; the returned
// function undoes it unless commit is called with the session's id.
func (o *sessionOwners) reserve(agent string) (commit func(mcpID string, now time.Time, ttl time.Duration), cancel func(), err error) {
	o.mu.Lock()
	defer o.mu.Unlock()
	if o.perAgent == nil {
		o.perAgent = map[string]int{}
	}
	if o.maxAgent > 0 && o.perAgent[agent] >= o.maxAgent {
		return nil, nil, errAgentSessionsFull
	}
	if o.maxTotal > 0 && o.total >= o.maxTotal {
		return nil, nil, errSessionsFull
	}
	o.perAgent[agent]++
	o.total++
	done := false
	commit = func(mcpID string, now time.Time, ttl time.Duration) {
		o.mu.Lock()
		defer o.mu.Unlock()
		if done {
			return
		}
		done = true
		if o.m == nil {
			o.m = map[string]owner{}
		}
		if old, dup := o.m[mcpID]; dup { // an id reused: count it once
			o.uncountLocked(old.agent)
		}
		o.m[mcpID] = owner{agent: agent, seen: now, ttl: ttl}
		o.notifyLocked()
	}
	cancel = func() {
		o.mu.Lock()
		defer o.mu.Unlock()
		if done {
			return
		}
		done = true
		o.uncountLocked(agent)
	}
	return commit, cancel, nil
}

func (o *sessionOwners) uncountLocked(agent string) {
	o.total--
	if o.perAgent[agent]--; o.perAgent[agent] <= 0 {
		delete(o.perAgent, agent)
	}
}

func (o *sessionOwners) notifyLocked() {
	if o.onCount != nil {
		o.onCount(len(o.m))
	}
}

// check reports whether mcpID belongs to agent, and marks it used.
func (o *sessionOwners) check(mcpID, agent string, now time.Time) bool {
	o.mu.Lock()
	defer o.mu.Unlock()
	e, ok := o.m[mcpID]
	if !ok || e.agent != agent {
		return false
	}
	e.seen = now
	o.m[mcpID] = e
	return true
}

// use marks a request of mcpID in flight (a session in use is not idle);
// the returned function ends it.
func (o *sessionOwners) use(mcpID string, now func() time.Time) func() {
	o.mu.Lock()
	defer o.mu.Unlock()
	e, ok := o.m[mcpID]
	if !ok {
		return func() {}
	}
	e.busy++
	o.m[mcpID] = e
	return func() {
		o.mu.Lock()
		defer o.mu.Unlock()
		if e, ok := o.m[mcpID]; ok {
			e.busy--
			e.seen = now()
			o.m[mcpID] = e
		}
	}
}

func (o *sessionOwners) remove(mcpID string) {
	o.mu.Lock()
	defer o.mu.Unlock()
	if e, ok := o.m[mcpID]; ok {
		delete(o.m, mcpID)
		o.uncountLocked(e.agent)
		o.notifyLocked()
	}
}

// sweep ends the sessions idle longer than their TTL and returns their ids.
func (o *sessionOwners) sweep(now time.Time) []string {
	o.mu.Lock()
	defer o.mu.Unlock()
	var gone []string
	for id, e := range o.m {
		if e.busy == 0 && now.Sub(e.seen) > e.ttl {
			delete(o.m, id)
			o.uncountLocked(e.agent)
			gone = append(gone, id)
		}
	}
	if len(gone) > 0 {
		o.notifyLocked()
	}
	return gone
}

// count returns the open sessions and those of agent.
func (o *sessionOwners) count(agent string) (total, ofAgent int) {
	o.mu.Lock()
	defer o.mu.Unlock()
	return len(o.m), o.perAgent[agent]
}
