// Package opsapi is the operator API served on the ops port (never on the
// agent port): list, show, approve and deny escalations, query the audit
// trail and session summaries, follow escalation changes as server-sent
// events, Prometheus /metrics, and /healthz and
// /readyz. Every route but the two probes requires an operator token
// (Authorization: Bearer), compared in constant time. Errors are JSON with
// a stable code and a message: {"error":{"code":"not_found","message":"..."}}.
// Client is the Go client the `ironcurtain escalations` CLI uses.
package opsapi

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"net/http"
	"strconv"
	"strings"
	"time"

	"github.com/go-chi/chi/v5"
	"github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/client_golang/prometheus/promhttp"

	"ironcurtain.dev/gateway/buildinfo"
	"ironcurtain.dev/gateway/internal/audit"
	"ironcurtain.dev/gateway/internal/escalation"
	"ironcurtain.dev/gateway/internal/netlimit"
	"ironcurtain.dev/gateway/internal/store"
	"ironcurtain.dev/gateway/strictjson"
)

// Escalations is what the API needs from the escalator (*escalation.PG).
type Escalations interface {
	// ListEach calls fn with each matching escalation, one at a time, its
	// arguments in the listing form (see escalation.PG.ListEach: fn may
	// return audit.ErrStop).
	ListEach(ctx context.Context, f escalation.ListFilter, fn func(*escalation.Escalation) error) error
	// Get returns one escalation with its canonical arguments whole.
	Get(ctx context.Context, id string) (escalation.Escalation, error)
	Decide(ctx context.Context, id string, d escalation.Decision) (escalation.Escalation, error)
}

// Data is what the API reads from the audit store (*PGData).
type Data interface {
	// ToolCalls calls fn with each matching tool call, one at a time (see
	// audit.QueryEach: fn may return audit.ErrStop).
	ToolCalls(ctx context.Context, f audit.Filter, fn func(*audit.ToolCall) error) error
	Sessions(ctx context.Context, limit int) ([]SessionSummary, error)
	Session(ctx context.Context, id string) (SessionSummary, error)
	// Ready returns nil when the database answers and its schema is current.
	Ready(ctx context.Context) error
}

// Deps are the API's collaborators. Operators, Escalations and Data are
// required; Gatherer serves /metrics (nil: prometheus.DefaultGatherer).
type Deps struct {
	Operators *Operators
	// Scrapers hold metrics tokens: GET /metrics only (nil: none; an
	// operator token always opens /metrics).
	Scrapers    *Operators
	Escalations Escalations
	Data        Data
	Sessions    SessionStore   // mints and revokes sessions (nil: POST and DELETE /v1/sessions answer 404)
	Policy      PolicyReloader // reloads the policy (nil: /v1/policy answers 404)
	Gatherer    prometheus.Gatherer
	Registerer  prometheus.Registerer // receives the API's own metrics (nil: none)
	Logger      *slog.Logger
	// UI, when set, serves the operator console under /ui/ (it does its
	// own sign-in: gateway/internal/ops/console).
	UI http.Handler
	// WriteHealth, when set, reports the audit writer's recent failure to
	// write (audit.PGSink.WriteFailure): /readyz answers 503 with it, since
	// calls are refused while it lasts.
	WriteHealth func() error
	// Watch, when set, signals escalation changes (escalation.PG.Watch):
	// GET /v1/escalations/events streams them (nil: that route answers 404).
	Watch func() (<-chan struct{}, func())
}

// Error codes (stable: clients may switch on them).
const (
	CodeUnauthorized     = "unauthorized"
	CodeNotFound         = "not_found"
	CodeBadRequest       = "bad_request"
	CodeConflict         = "conflict"
	CodeNotReady         = "not_ready"
	CodeInternal         = "internal"
	CodeMethodNotAllowed = "method_not_allowed"
)

// maxBody bounds request bodies.
const maxBody = 64 << 10

type api struct {
	deps        Deps
	log         *slog.Logger
	authFailure prometheus.Counter
	ready       *readiness
	// dbDown summarises requests answered 503 for the database: one log
	// line when it starts, then one per interval, one when it ends.
	dbDown *audit.FailureSummary
	// streams bounds the open event streams (MaxEventStreams).
	streams chan struct{}
}

// New returns the ops API handler.
func New(d Deps) http.Handler {
	a := &api{deps: d, log: d.Logger, streams: make(chan struct{}, MaxEventStreams)}
	if a.log == nil {
		a.log = slog.New(slog.DiscardHandler)
	}
	a.dbDown = audit.NewFailureSummary(a.log, "ops API database work", "requests answered 503", audit.DefaultSummaryEvery, nil)
	if a.deps.Gatherer == nil {
		a.deps.Gatherer = prometheus.DefaultGatherer
	}
	a.authFailure = prometheus.NewCounter(prometheus.CounterOpts{
		Name: "ironcurtain_ops_auth_failures_total",
		Help: "Ops API requests refused for a missing or wrong operator token (or metrics token, on /metrics).",
	})
	if d.Registerer != nil {
		_ = d.Registerer.Register(a.authFailure)
	}

	r := chi.NewRouter()
	r.Use(checkParams)
	r.NotFound(func(w http.ResponseWriter, _ *http.Request) {
		writeError(w, http.StatusNotFound, CodeNotFound, "no such route")
	})
	r.MethodNotAllowed(func(w http.ResponseWriter, _ *http.Request) {
		writeError(w, http.StatusMethodNotAllowed, CodeMethodNotAllowed, "method not allowed on this route")
	})
	r.Get("/healthz", func(w http.ResponseWriter, _ *http.Request) {
		writeJSON(w, http.StatusOK, health{Status: "ok", Info: buildinfo.Get()})
	})
	a.ready = newReadiness(a.readyProbe)
	r.Get("/readyz", a.readyz)
	if d.UI != nil {
		r.Handle("/ui", d.UI)
		r.Handle("/ui/*", d.UI)
	}
	r.With(a.authenticateMetrics).Method(http.MethodGet, "/metrics", promhttp.HandlerFor(a.deps.Gatherer, promhttp.HandlerOpts{}))
	if d.Watch != nil {
		// A long stream: no database deadline (it reads no rows).
		r.With(a.authenticate).Get("/v1/escalations/events", a.escalationEvents)
	}
	r.Group(func(r chi.Router) {
		r.Use(a.authenticate)
		r.Use(dbDeadline)
		r.Get("/v1/escalations", a.listEscalations)
		r.Get("/v1/escalations/{id}", a.getEscalation)
		r.Post("/v1/escalations/{id}/approve", a.decide(true))
		r.Post("/v1/escalations/{id}/deny", a.decide(false))
		r.Get("/v1/audit/tool-calls", a.toolCalls)
		r.Get("/v1/sessions", a.sessions)
		r.Get("/v1/sessions/{id}", a.session)
		r.Post("/v1/sessions", a.createSession)
		r.Delete("/v1/sessions/{id}", a.revokeSession)
		if a.deps.Policy != nil {
			r.Get("/v1/policy", a.policyStatus)
			r.Post("/v1/policy/reload", a.reloadPolicy)
		}
	})
	return r
}

type operatorKey struct{}

// authenticate requires "Authorization: Bearer <operator token>".
func (a *api) authenticate(next http.Handler) http.Handler {
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		token, ok := bearer(r)
		name, valid := "", false
		if ok {
			name, valid = a.deps.Operators.Authenticate(token)
		}
		if !valid {
			a.authFailure.Inc()
			a.log.Warn("ops API: refused request without a valid operator token", "method", r.Method, "path", r.URL.Path, "remote", r.RemoteAddr)
			w.Header().Set("WWW-Authenticate", `Bearer realm="ironcurtain-ops"`)
			netlimit.DontDrain(w) // close instead of draining a body trickled after the refusal
			writeError(w, http.StatusUnauthorized, CodeUnauthorized, "a valid operator token is required")
			return
		}
		next.ServeHTTP(w, r.WithContext(context.WithValue(r.Context(), operatorKey{}, name)))
	})
}

// authenticateMetrics requires an operator token or a metrics token
// (Deps.Scrapers): the one route a metrics token opens.
func (a *api) authenticateMetrics(next http.Handler) http.Handler {
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if !MetricsAllowed(a.deps.Operators, a.deps.Scrapers, r) {
			a.authFailure.Inc()
			a.log.Warn("ops API: refused /metrics without a valid operator or metrics token", "method", r.Method, "remote", r.RemoteAddr)
			w.Header().Set("WWW-Authenticate", `Bearer realm="ironcurtain-ops"`)
			netlimit.DontDrain(w)
			writeError(w, http.StatusUnauthorized, CodeUnauthorized, "a valid operator or metrics token is required")
			return
		}
		next.ServeHTTP(w, r)
	})
}

// readyProbe is ready when the database takes a write (Data.Ready) and the
// audit writer has not failed to write recently (Deps.WriteHealth).
func (a *api) readyProbe(ctx context.Context) error {
	if err := a.deps.Data.Ready(ctx); err != nil {
		return err
	}
	if a.deps.WriteHealth != nil {
		if err := a.deps.WriteHealth(); err != nil {
			if we := store.Classify(err); we != nil {
				return fmt.Errorf("audit writes failing: %w", we)
			}
			return fmt.Errorf("audit writes failing: %w", err)
		}
	}
	return nil
}

func (a *api) readyz(w http.ResponseWriter, r *http.Request) {
	ctx, cancel := context.WithTimeout(r.Context(), ReadyTimeout)
	defer cancel()
	if err := a.ready.check(ctx); err != nil {
		a.dbDown.Fail(1, err)
		w.Header().Set("Retry-After", retryAfter)
		writeError(w, http.StatusServiceUnavailable, CodeNotReady, notReadyMessage(err))
		return
	}
	a.dbDown.OK()
	writeJSON(w, http.StatusOK, map[string]string{"status": "ready"})
}

// notReadyMessage says why /readyz is 503: the database condition (and the
// SQLSTATE) when known, "writes fail" when a write would fail.
func notReadyMessage(err error) string {
	we := store.Classify(err)
	switch {
	case errors.Is(err, errNotAnswering):
		return "database unreachable: " + err.Error()
	case we == nil:
		return err.Error()
	case strings.HasPrefix(err.Error(), "audit writes failing"):
		return "audit writes failing: " + we.Error() + ": calls are refused"
	case we.Condition == store.Unreachable:
		return we.Error()
	}
	return we.Error() + ": writes fail, calls are refused"
}

func (a *api) listEscalations(w http.ResponseWriter, r *http.Request) {
	q, err := params(r, "status", "session", "limit", "cursor")
	if err != nil {
		writeError(w, http.StatusBadRequest, CodeBadRequest, err.Error())
		return
	}
	limit, err := intParam(q["limit"])
	if err != nil {
		writeError(w, http.StatusBadRequest, CodeBadRequest, "limit: "+err.Error())
		return
	}
	f := escalation.ListFilter{Status: q["status"], Session: q["session"], Limit: limit}
	if f.Cursor, err = audit.ParseCursor(q["cursor"]); err != nil {
		writeError(w, http.StatusBadRequest, CodeBadRequest, "cursor: "+err.Error())
		return
	}
	if err := f.Validate(); err != nil {
		writeError(w, http.StatusBadRequest, CodeBadRequest, lastPart(err))
		return
	}
	a.streamEscalations(w, r, f)
}

func (a *api) getEscalation(w http.ResponseWriter, r *http.Request) {
	e, err := a.deps.Escalations.Get(r.Context(), chi.URLParam(r, "id"))
	if err != nil {
		a.fail(w, err)
		return
	}
	writeEscalation(w, e)
}

// DecideRequest is the body of approve and deny.
type DecideRequest struct {
	Reason string `json:"reason,omitempty"`
	// Similar (approve only): directory, domain or exact.
	Similar string `json:"similar,omitempty"`
}

func (a *api) decide(approve bool) http.HandlerFunc {
	return func(w http.ResponseWriter, r *http.Request) {
		var body DecideRequest
		if r.ContentLength != 0 {
			if err := decodeBody(w, r, &body); err != nil {
				writeError(w, http.StatusBadRequest, CodeBadRequest, "body: "+err.Error()+"; want {\"reason\": \"...\", \"similar\": \"directory|domain|exact\"}")
				return
			}
		}
		operator, _ := r.Context().Value(operatorKey{}).(string)
		e, err := a.deps.Escalations.Decide(r.Context(), chi.URLParam(r, "id"), escalation.Decision{
			Approve: approve, By: operator, Reason: body.Reason, Similar: body.Similar,
		})
		if err != nil {
			a.fail(w, err)
			return
		}
		a.log.Info("escalation decided", "escalation", e.ID, "status", e.Status, "by", operator, "similar", body.Similar)
		writeEscalation(w, e)
	}
}

func (a *api) toolCalls(w http.ResponseWriter, r *http.Request) {
	q, err := params(r, "session", "server", "tool", "decision", "limit", "since", "after", "cursor")
	if err != nil {
		writeError(w, http.StatusBadRequest, CodeBadRequest, err.Error())
		return
	}
	f := audit.Filter{Session: q["session"], Server: q["server"], Tool: q["tool"], Decision: q["decision"]}
	if f.Limit, err = intParam(q["limit"]); err != nil {
		writeError(w, http.StatusBadRequest, CodeBadRequest, "limit: "+err.Error())
		return
	}
	if f.Since, err = ParseSince(q["since"], time.Now()); err != nil {
		writeError(w, http.StatusBadRequest, CodeBadRequest, "since: "+err.Error())
		return
	}
	if f.After, err = ParseSince(q["after"], time.Now()); err != nil {
		writeError(w, http.StatusBadRequest, CodeBadRequest, "after: "+err.Error())
		return
	}
	if f.Cursor, err = audit.ParseCursor(q["cursor"]); err != nil {
		writeError(w, http.StatusBadRequest, CodeBadRequest, "cursor: "+err.Error())
		return
	}
	if err := f.Validate(); err != nil {
		writeError(w, http.StatusBadRequest, CodeBadRequest, err.Error())
		return
	}
	a.streamToolCalls(w, r, f)
}

func (a *api) sessions(w http.ResponseWriter, r *http.Request) {
	q, err := params(r, "status", "limit", "cursor")
	if err != nil {
		writeError(w, http.StatusBadRequest, CodeBadRequest, err.Error())
		return
	}
	limit, err := intParam(q["limit"])
	if err != nil {
		writeError(w, http.StatusBadRequest, CodeBadRequest, "limit: "+err.Error())
		return
	}
	if lister, ok := a.deps.Data.(SessionLister); ok { // sessions_list.go
		f := SessionFilter{Status: q["status"], Limit: limit}
		if f.Cursor, err = audit.ParseCursor(q["cursor"]); err != nil {
			writeError(w, http.StatusBadRequest, CodeBadRequest, "cursor: "+err.Error())
			return
		}
		if err := f.Validate(); err != nil {
			writeError(w, http.StatusBadRequest, CodeBadRequest, "status: want static, active, expired, revoked or all")
			return
		}
		a.streamSessions(w, r, lister, f)
		return
	}
	list, err := a.deps.Data.Sessions(r.Context(), limit)
	if err != nil {
		a.fail(w, err)
		return
	}
	if list == nil {
		list = []SessionSummary{}
	}
	writeJSON(w, http.StatusOK, map[string]any{"sessions": list})
}

func (a *api) session(w http.ResponseWriter, r *http.Request) {
	s, err := a.deps.Data.Session(r.Context(), chi.URLParam(r, "id"))
	if err != nil {
		a.fail(w, err)
		return
	}
	writeJSON(w, http.StatusOK, s)
}

// ErrNotFound is returned by Data for an unknown session.
var ErrNotFound = errors.New("not found")

// fail maps an error to a status and a safe message. Internal details are
// logged, not returned.
func (a *api) fail(w http.ResponseWriter, err error) {
	if sessionError(w, err) {
		return
	}
	switch {
	case errors.Is(err, escalation.ErrNotFound), errors.Is(err, ErrNotFound):
		writeError(w, http.StatusNotFound, CodeNotFound, "not found")
	case errors.Is(err, escalation.ErrAlreadyDecided):
		writeError(w, http.StatusConflict, CodeConflict, lastPart(err))
	case errors.Is(err, escalation.ErrInvalidDecision), errors.Is(err, escalation.ErrInvalidFilter):
		writeError(w, http.StatusBadRequest, CodeBadRequest, lastPart(err))
	case isUnavailable(err):
		a.dbDown.Fail(1, err)
		w.Header().Set("Retry-After", retryAfter)
		writeError(w, http.StatusServiceUnavailable, CodeNotReady, unavailableMessage(err))
	default:
		a.log.Error("ops API request failed", "err", err)
		writeError(w, http.StatusInternalServerError, CodeInternal, "internal error; see the gateway log")
	}
}

// lastPart drops the wrapping prefixes ("deciding escalation x: ...").
func lastPart(err error) string {
	msg := err.Error()
	if i := strings.Index(msg, ": "); i >= 0 && strings.HasPrefix(msg, "deciding escalation") {
		return msg[i+2:]
	}
	if i := strings.Index(msg, ": "); i >= 0 && strings.HasPrefix(msg, "listing escalations") {
		return msg[i+2:]
	}
	return msg
}

func intParam(s string) (int, error) {
	if s == "" {
		return 0, nil
	}
	n, err := strconv.Atoi(s)
	if err != nil || n < 0 {
		return 0, errors.New("want a non-negative integer")
	}
	return n, nil
}

// ParseSince reads an RFC 3339 time or a duration back from now ("15m",
// "24h"). Empty means no bound.
func ParseSince(s string, now time.Time) (time.Time, error) {
	if s == "" {
		return time.Time{}, nil
	}
	if t, err := time.Parse(time.RFC3339Nano, s); err == nil {
		return t, nil
	}
	d, err := time.ParseDuration(s)
	if err != nil || d < 0 {
		return time.Time{}, errors.New("want an RFC 3339 time or a positive duration such as 15m")
	}
	return now.Add(-d), nil
}

// decodeBody reads a JSON request body (at most maxBody bytes) strictly
// (strictjson): names exact, each once, none the type does not take,
// nothing after the value. The error is short and names where.
func decodeBody(w http.ResponseWriter, r *http.Request, v any) error {
	b, err := io.ReadAll(http.MaxBytesReader(w, r.Body, maxBody))
	if err != nil {
		return fmt.Errorf("larger than %d bytes or not readable", maxBody)
	}
	if err := strictjson.Decode(b, v, strictjson.Limits{MaxBytes: maxBody, MaxDepth: 8}); err != nil {
		var je *strictjson.Error
		if errors.As(err, &je) {
			if je.Path != "" {
				return fmt.Errorf("%s at %s", je.Reason, paramName(je.Path))
			}
			return errors.New(je.Reason)
		}
		return errors.New("not valid JSON")
	}
	return nil
}

// ErrorBody is the JSON shape of every error.
type ErrorBody struct {
	Error struct {
		Code    string `json:"code"`
		Message string `json:"message"`
	} `json:"error"`
}

func writeError(w http.ResponseWriter, status int, code, msg string) {
	var b ErrorBody
	b.Error.Code, b.Error.Message = code, msg
	writeJSON(w, status, b)
}

func writeJSON(w http.ResponseWriter, status int, v any) {
	w.Header().Set("Content-Type", "application/json")
	w.Header().Set("Cache-Control", "no-store")
	w.Header().Set("X-Content-Type-Options", "nosniff")
	w.WriteHeader(status)
	_ = json.NewEncoder(w).Encode(v)
}

// health is the body of /healthz: the status and which build answers.
type health struct {
	Status string `json:"status"`
	buildinfo.Info
}
