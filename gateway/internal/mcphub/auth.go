package mcphub

import (
	"bytes"
	"encoding/json"
	"io"
	"net/http"
	"strings"
	"sync"
	"time"

	"github.com/mark3labs/mcp-go/server"

	"ironcurtain.dev/gateway/internal/netlimit"
	"ironcurtain.dev/gateway/internal/session"
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
		tok, ok := bearerToken(r.Header.Get("Authorization"))
		if !ok {
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
		r.Body = http.MaxBytesReader(w, r.Body, h.cfg.MaxRequestBytes)
		if r.Method == http.MethodPost {
			body, err := io.ReadAll(r.Body)
			if err == nil && isBatch(body) {
				writeRPCError(w, http.StatusBadRequest, -32600, "JSON-RPC batches are not supported: send one request per HTTP request")
				return
			}
			r.Body = &replayBody{data: body, err: err}
		}
		r = r.WithContext(session.WithSession(r.Context(), sess))
		if sid == "" {
			// An initialize: remember who owns the session it creates.
			w = &ownerWriter{ResponseWriter: w, onHeader: func(hdr http.Header) {
				if id := hdr.Get(server.HeaderKeySessionID); id != "" {
					h.owners.set(id, sess.ID, h.now(), h.cfg.SessionIdleTTL)
				}
			}}
		}
		next.ServeHTTP(w, r)
		if sid != "" && r.Method == http.MethodDelete {
			h.owners.remove(sid)
		}
	})
}

// isBatch reports whether a JSON-RPC body is a batch (a JSON array).
func isBatch(body []byte) bool {
	trimmed := bytes.TrimLeft(body, " \t\r\n")
	return len(trimmed) > 0 && trimmed[0] == '['
}

// writeRPCError answers with a JSON-RPC error object (id null).
func writeRPCError(w http.ResponseWriter, status, code int, msg string) {
	b, _ := json.Marshal(map[string]any{"jsonrpc": "2.0", "id": nil, "error": map[string]any{"code": code, "message": msg}})
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

// bearerToken extracts the token of an "Authorization: Bearer" header.
func bearerToken(v string) (string, bool) {
	scheme, tok, ok := strings.Cut(strings.TrimSpace(v), " ")
	if !ok || !strings.EqualFold(scheme, "Bearer") {
		return "", false
	}
	tok = strings.TrimSpace(tok)
	return tok, tok != ""
}

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

// sessionOwners maps MCP session ids to the agent session that opened them.
// Entries idle longer than their TTL are swept on insertion.
type sessionOwners struct {
	mu      sync.Mutex
	m       map[string]owner
	inserts int
}

type owner struct {
	agent string
	seen  time.Time
	ttl   time.Duration
}

func (o *sessionOwners) set(mcpID, agent string, now time.Time, ttl time.Duration) {
	o.mu.Lock()
	defer o.mu.Unlock()
	if o.m == nil {
		o.m = map[string]owner{}
	}
	o.m[mcpID] = owner{agent: agent, seen: now, ttl: ttl}
	o.inserts++
	if o.inserts%256 == 0 {
		for id, e := range o.m {
			if now.Sub(e.seen) > e.ttl {
				delete(o.m, id)
			}
		}
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

func (o *sessionOwners) remove(mcpID string) {
	o.mu.Lock()
	defer o.mu.Unlock()
	delete(o.m, mcpID)
}
