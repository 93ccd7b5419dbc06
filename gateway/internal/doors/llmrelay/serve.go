package llmrelay

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"net/http"
	"net/url"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	"github.com/google/uuid"
	"go.opentelemetry.io/otel/trace"

	"ironcurtain.dev/gateway/internal/audit"
	"ironcurtain.dev/gateway/internal/auth"
	"ironcurtain.dev/gateway/internal/llmprovider"
	"ironcurtain.dev/gateway/internal/netlimit"
	"ironcurtain.dev/gateway/internal/session"
)

// maxQueryBytes bounds the query string passed upstream (the SDKs send at
// most "beta=true").
const maxQueryBytes = 1024

// bodyReadTimeout bounds reading a request body.
const bodyReadTimeout = time.Minute

// bytesPerToken is the rough size of a token used when an upstream does
// not report usage (a stream cut short): sizes over 4 err high for JSON
// and SSE framing, which is the safe side for budgets.
const bytesPerToken = 4

var copyBufs = sync.Pool{New: func() any { b := make([]byte, 32<<10); return &b }}

// call follows one authenticated request to its audit record.
type call struct {
	id    string
	start time.Time
	p     *provider
	sess  session.Session
	path  string
	ep    endpoint

	model    string
	stream   bool
	reqBytes int
	status   int // the upstream's status; 0 when it was not reached
	usage    Usage
	cost     float64
	priceKey string
	notes    []string // operator detail for the audit record

	span    trace.Span // trace.go
	traceID string
}

func (c *call) note(format string, a ...any) { c.notes = append(c.notes, fmt.Sprintf(format, a...)) }

// serve handles one request under the prefix.
func (r *Relay) serve(w http.ResponseWriter, req *http.Request) {
	start := time.Now()
	provName, rest, ok := r.split(req.URL.Path)
	p := r.providers[provName]
	if !ok || p == nil || !cleanEscapes(req.URL) {
		r.refuseUnauthenticated(w, req, provName, &refusal{status: http.StatusNotFound, kind: kindNotFound, reason: "path",
			msg: fmt.Sprintf("not a relayed model API: use %s/anthropic/... or %s/openai/...", r.prefix, r.prefix)})
		return
	}
	sess, err := r.authenticate(req)
	if err != nil {
		r.log.Warn("llmrelay: refused an unauthenticated model call", slog.String("provider", p.up.Provider),
			slog.String("remote", req.RemoteAddr), slog.String("error", err.Error()))
		r.refuseUnauthenticated(w, req, p.up.Provider, &refusal{status: http.StatusUnauthorized, kind: kindAuth, reason: "auth", noRetry: true,
			msg: "unknown or missing agent token: the API key must be this session's IRONCURTAIN_AGENT_TOKEN"})
		return
	}
	c := &call{id: uuid.NewString(), start: start, p: p, sess: sess, path: "/" + truncate(rest, 200)}
	req = r.startSpan(req, c)
	ep, ok := p.match(rest)
	if !ok {
		r.refuse(w, req, c, &refusal{status: http.StatusNotFound, kind: kindNotFound, reason: "path",
			msg: "this model API path is not relayed by the gateway (relayed: " + allowedList(p) + ")"})
		return
	}
	c.ep, c.path = ep, "/"+ep.path
	if req.Method != ep.method {
		r.refuse(w, req, c, &refusal{status: http.StatusMethodNotAllowed, kind: kindMethod, reason: "method",
			msg: fmt.Sprintf("%s %s is not relayed: use %s", truncate(req.Method, 16), c.path, ep.method)})
		return
	}
	if len(req.URL.RawQuery) > maxQueryBytes {
		r.refuse(w, req, c, &refusal{status: http.StatusBadRequest, kind: kindInvalid, reason: "query", msg: "query string too long"})
		return
	}
	if !p.up.Keyless() && p.up.Key() == "" {
		r.refuse(w, req, c, &refusal{status: http.StatusServiceUnavailable, kind: kindUnavailable, reason: "no_key", noRetry: true,
			msg: fmt.Sprintf("the gateway has no %s API key: an operator must set %s in the gateway's environment", p.up.Provider, p.up.KeyEnv)})
		return
	}
	if r.rec.Down() {
		r.refuse(w, req, c, &refusal{status: http.StatusServiceUnavailable, kind: kindUnavailable, reason: "audit",
			msg: "the gateway cannot record model calls right now; retry later"})
		return
	}
	release, rf, err := r.ledger.acquireSession(req.Context(), sess, ep.metered)
	if err != nil {
		c.note("%v", err)
		r.refuse(w, req, c, &refusal{status: http.StatusServiceUnavailable, kind: kindUnavailable, reason: "spend_store",
			msg: "the gateway cannot check this session's model budget right now; retry later"})
		return
	}
	if rf != nil {
		r.refuse(w, req, c, rf)
		return
	}
	defer release()
	var body []byte
	if ep.method == http.MethodPost {
		var info requestInfo
		var rf *refusal
		body, info, rf = r.readBody(w, req, ep, c)
		if rf != nil {
			r.refuse(w, req, c, rf)
			return
		}
		c.model, c.stream, c.reqBytes = info.model, info.stream, len(body)
		if info.networkTool != "" && !r.unsafeServerTools {
			r.refuse(w, req, c, &refusal{status: http.StatusForbidden, kind: kindPermission, reason: "server_tool", noRetry: true,
				msg: fmt.Sprintf("provider-side network tools (%s) are refused: they would reach the internet around the gateway's egress proxy; an operator can set relay.unsafe_allow_server_tools", info.networkTool)})
			return
		}
	}
	r.forward(w, req, c, body)
}

// split cuts "<prefix>/<provider>/<rest>" into provider and rest.
func (r *Relay) split(path string) (provName, rest string, ok bool) {
	after, ok := strings.CutPrefix(path, r.prefix+"/")
	if !ok {
		return "", "", false
	}
	provName, rest, ok = strings.Cut(after, "/")
	return provName, rest, ok
}

// cleanEscapes refuses percent-escapes in the path (an encoded "/", "\\"
// or "." would let the decoded path differ from what the agent appeared to
// ask for), except an escaped ':' some clients write in model ids.
func cleanEscapes(u *url.URL) bool {
	raw := u.EscapedPath()
	if !strings.Contains(raw, "%") {
		return true
	}
	raw = strings.NewReplacer("%3A", "", "%3a", "").Replace(raw)
	return !strings.Contains(raw, "%")
}

func allowedList(p *provider) string {
	switch p.up.Provider {
	case llmprovider.Anthropic:
		return "POST v1/messages, POST v1/messages/count_tokens"
	default:
		return "POST chat/completions, completions, responses, embeddings; GET models, models/{id}"
	}
}

// authenticate reads the agent token from x-api-key or Authorization:
// Bearer (the SDKs send their API key there). Several different tokens
// are refused rather than guessed between.
func (r *Relay) authenticate(req *http.Request) (session.Session, error) {
	var token string
	for _, v := range req.Header.Values("X-Api-Key") {
		if err := sameToken(&token, strings.TrimSpace(v)); err != nil {
			return session.Session{}, err
		}
	}
	if len(req.Header.Values(auth.Authorization)) > 0 {
		cred, err := auth.Bearer(req.Header)
		switch {
		case errors.Is(err, auth.ErrRepeated):
			return session.Session{}, errors.New("several Authorization headers")
		case err != nil:
			return session.Session{}, errors.New("authorization is not a bearer token")
		}
		if err := sameToken(&token, cred); err != nil {
			return session.Session{}, err
		}
	}
	if token == "" {
		return session.Session{}, session.ErrUnknownToken
	}
	s, err := r.auth.Authenticate(req.Context(), token)
	if err != nil {
		return session.Session{}, fmt.Errorf("authenticating agent token %s: %w", session.Fingerprint(token), err)
	}
	return s, nil
}

func sameToken(token *string, v string) error {
	if v == "" {
		return session.ErrUnknownToken
	}
	if *token != "" && *token != v {
		return errors.New("several different credentials")
	}
	*token = v
	return nil
}

// readBody reads and checks a POST body.
func (r *Relay) readBody(w http.ResponseWriter, req *http.Request, ep endpoint, c *call) ([]byte, requestInfo, *refusal) {
	if req.ContentLength > r.maxBody {
		w.Header().Set("Connection", "close")
		return nil, requestInfo{}, r.tooLarge()
	}
	// A client that trickles its body must not hold a slot for ever. The
	// deadline is lifted again once the body is in (the connection's next
	// request and the stream that follows must not inherit it).
	rc := http.NewResponseController(w)
	deadline := rc.SetReadDeadline(time.Now().Add(r.bodyTimeout)) == nil
	b, err := io.ReadAll(http.MaxBytesReader(w, req.Body, r.maxBody))
	if err != nil {
		// Do not wait for the rest of a body that is refused: close the
		// connection after the answer (the expired deadline stays).
		w.Header().Set("Connection", "close")
		var mbe *http.MaxBytesError
		if errors.As(err, &mbe) {
			return nil, requestInfo{}, r.tooLarge()
		}
		c.note("reading the request body: %v", err)
		return nil, requestInfo{}, &refusal{status: http.StatusBadRequest, kind: kindInvalid, reason: "body", msg: "could not read the request body"}
	}
	if deadline {
		_ = rc.SetReadDeadline(time.Time{})
	}
	info, err := parseRequestBody(b, ep.streamUsage)
	if err != nil {
		c.note("%v", err)
		msg := errNotObject.Error()
		if !errors.Is(err, errNotObject) {
			msg = "the request body is not valid JSON for the relay: " + truncate(err.Error(), 120)
		}
		return nil, info, &refusal{status: http.StatusBadRequest, kind: kindInvalid, reason: "body", msg: msg}
	}
	return info.body, info, nil
}

func (r *Relay) tooLarge() *refusal {
	return &refusal{status: http.StatusRequestEntityTooLarge, kind: kindTooLarge, reason: "body", noRetry: true,
		msg: fmt.Sprintf("request body larger than the gateway's limit of %d bytes (relay.max_body_bytes)", r.maxBody)}
}

// forward sends the call upstream and relays the response.
func (r *Relay) forward(w http.ResponseWriter, req *http.Request, c *call, body []byte) {
	ctx, cancel := context.WithTimeout(req.Context(), r.timeout)
	defer cancel()
	u := c.p.upstreamURL(c.ep, req.URL.RawQuery)
	var rd io.Reader
	if body != nil {
		rd = bytes.NewReader(body)
	}
	out, err := http.NewRequestWithContext(ctx, c.ep.method, u.String(), rd)
	if err != nil {
		c.note("building the upstream request: %v", err)
		r.refuse(w, req, c, &refusal{status: http.StatusBadRequest, kind: kindInvalid, reason: "query", msg: "the request could not be relayed"})
		return
	}
	out.Header = c.p.outboundHeader(req.Header, body != nil)
	// The agent's write deadline must not cut a long stream short.
	rc := http.NewResponseController(w)
	_ = rc.SetWriteDeadline(time.Now().Add(r.timeout + time.Minute))

	sent := time.Now()
	resp, err := r.transport.RoundTrip(out)
	r.metrics.latency.WithLabelValues(c.p.up.Provider).Observe(time.Since(sent).Seconds())
	if err != nil {
		c.note("upstream: %v", err)
		switch {
		case req.Context().Err() != nil:
			c.note("the agent went away")
			r.finish(c, 0)
		case errors.Is(err, context.DeadlineExceeded) || errors.Is(ctx.Err(), context.DeadlineExceeded):
			r.refuse(w, req, c, &refusal{status: http.StatusGatewayTimeout, kind: kindTimeout, reason: "upstream_timeout",
				msg: fmt.Sprintf("the model API did not answer within %s", r.timeout)})
		default:
			r.refuse(w, req, c, &refusal{status: http.StatusBadGateway, kind: kindUpstream, reason: "upstream_unreachable",
				msg: "the gateway could not reach the model API"})
		}
		return
	}
	defer resp.Body.Close()
	c.status = resp.StatusCode
	switch {
	case resp.StatusCode >= 300 && resp.StatusCode < 400:
		c.note("upstream redirected (status %d) to %q", resp.StatusCode, truncate(resp.Header.Get("Location"), 200))
		r.refuse(w, req, c, &refusal{status: http.StatusBadGateway, kind: kindUpstream, reason: "upstream_redirect",
			msg: "the model API answered with a redirect, which the gateway does not follow"})
	case resp.StatusCode < 200 || resp.StatusCode >= 300:
		r.relayError(w, c, resp)
	default:
		r.relayBody(w, rc, req.Context(), c, resp, cancel)
	}
}

// relayError passes an upstream error to the agent with any key scrubbed.
func (r *Relay) relayError(w http.ResponseWriter, c *call, resp *http.Response) {
	b, err := io.ReadAll(io.LimitReader(resp.Body, maxErrorBody))
	if err != nil {
		c.note("reading the upstream error body: %v", err)
	}
	b = c.p.scrub(b)
	c.note("upstream status %d: %s", resp.StatusCode, truncate(string(b), 300))
	h := w.Header()
	c.p.copyResponseHeader(h, resp.Header)
	h.Del("Content-Length")
	h.Del("Content-Encoding")
	h.Set("Content-Length", fmt.Sprint(len(b)))
	w.WriteHeader(resp.StatusCode)
	_, _ = w.Write(b)
	r.finish(c, resp.StatusCode)
}

// relayBody streams a successful response through unchanged, flushing SSE
// events as they arrive and metering usage on the way.
func (r *Relay) relayBody(w http.ResponseWriter, rc *http.ResponseController, agentCtx context.Context, c *call, resp *http.Response, cancel context.CancelFunc) {
	sse := strings.HasPrefix(strings.ToLower(resp.Header.Get("Content-Type")), "text/event-stream")
	c.stream = c.stream || sse
	c.p.copyResponseHeader(w.Header(), resp.Header)
	w.WriteHeader(resp.StatusCode)
	if sse {
		_ = rc.Flush()
	}
	var m *meter
	if c.ep.metered {
		m = newMeter(sse)
	}
	var idle atomic.Bool
	timer := time.AfterFunc(r.idleTimeout, func() { idle.Store(true); cancel() })
	defer timer.Stop()
	bp := copyBufs.Get().(*[]byte)
	defer copyBufs.Put(bp)
	buf := *bp
	aborted := false
	for {
		n, rerr := resp.Body.Read(buf)
		if n > 0 {
			timer.Reset(r.idleTimeout)
			if m != nil {
				_, _ = m.Write(buf[:n])
			}
			if _, werr := w.Write(buf[:n]); werr != nil {
				c.note("the agent went away: %v", werr)
				break
			}
			if sse {
				if ferr := rc.Flush(); ferr != nil {
					c.note("the agent went away: %v", ferr)
					break
				}
			}
		}
		if rerr == io.EOF {
			break
		}
		if rerr != nil {
			if agentCtx.Err() != nil {
				c.note("the agent went away")
				break
			}
			if idle.Load() {
				c.note("upstream sent nothing for %s: call aborted", r.idleTimeout)
			} else {
				c.note("reading the upstream response: %v", rerr)
			}
			aborted = true
			break
		}
	}
	if m != nil {
		m.finish()
		if m.model != "" {
			c.model = truncate(m.model, maxModelNameLen)
		}
		c.usage = m.usage
		if !m.final {
			c.estimate(m)
		}
	}
	r.finish(c, resp.StatusCode)
	if aborted {
		// Headers are out: cut the connection so the agent sees a broken
		// response rather than a complete-looking truncated one.
		panic(http.ErrAbortHandler)
	}
}

// estimate fills in usage the upstream did not report (a stream cut
// short, an endpoint without usage) from sizes, erring high.
func (c *call) estimate(m *meter) {
	if !m.seen {
		c.usage.Input = int64(c.reqBytes / bytesPerToken)
	}
	c.usage.Output = max(c.usage.Output, m.bytes/bytesPerToken)
	c.note("usage not reported by the upstream: tokens estimated from sizes")
}

// refuseUnauthenticated answers a request without a session: it is logged
// and counted but not written to the audit trail, which is per session.
func (r *Relay) refuseUnauthenticated(w http.ResponseWriter, _ *http.Request, provName string, rf *refusal) {
	label := providerLabel(provName)
	r.metrics.refusals.WithLabelValues(label, rf.reason).Inc()
	r.metrics.requests.WithLabelValues(label, codeLabel(rf.status)).Inc()
	netlimit.DontDrain(w) // close instead of draining a body trickled after the refusal
	writeRefusal(w, provName, rf)
}

// refuse answers an authenticated request itself and records it.
func (r *Relay) refuse(w http.ResponseWriter, _ *http.Request, c *call, rf *refusal) {
	r.metrics.refusals.WithLabelValues(c.p.up.Provider, rf.reason).Inc()
	c.note("refused (%s): %s", rf.reason, rf.msg)
	writeRefusal(w, c.p.up.Provider, rf)
	r.finishWith(c, rf.status)
}

// finish prices, charges, counts and records a call the upstream answered.
func (r *Relay) finish(c *call, returned int) {
	if c.ep.metered && c.usage.Total() > 0 {
		if key, pr, ok := r.prices.Lookup(c.model); ok {
			c.priceKey, c.cost = key, pr.Cost(c.usage.Input, c.usage.CacheWrite, c.usage.CacheRead, c.usage.Output)
		} else {
			c.note("no price for model %q: cost recorded as 0 (add it to relay.prices)", c.model)
			r.metrics.unpriced.WithLabelValues(c.p.up.Provider).Inc()
		}
		r.ledger.charge(c.sess.ID, c.usage.Total(), c.cost)
		model := c.priceKey
		if model == "" {
			model = unknownModelLabel
		}
		r.metrics.tokens.WithLabelValues(c.p.up.Provider, model, "input").Add(float64(c.usage.InputTotal()))
		r.metrics.tokens.WithLabelValues(c.p.up.Provider, model, "output").Add(float64(c.usage.Output))
		r.metrics.cost.WithLabelValues(c.p.up.Provider, model).Add(c.cost)
	}
	r.finishWith(c, returned)
}

func (r *Relay) finishWith(c *call, returned int) {
	r.metrics.requests.WithLabelValues(c.p.up.Provider, codeLabel(returned)).Inc()
	ev := &audit.LLMCall{
		ID:           c.id,
		SessionID:    c.sess.ID,
		Time:         c.start,
		Provider:     c.p.up.Provider,
		Model:        c.model,
		Path:         c.path,
		Stream:       c.stream,
		StatusCode:   c.status,
		InputTokens:  c.usage.InputTotal(),
		OutputTokens: c.usage.Output,
		CostUSD:      c.cost,
		Duration:     time.Since(c.start),
		Error:        strings.Join(c.notes, "; "),
		TraceID:      c.traceID,
	}
	endSpan(c, ev, returned)
	if err := r.rec.Record(ev); err != nil { // a failure refuses new calls (gate.Recorder)
		r.metrics.auditFailures.Inc()
		r.log.Error("llmrelay: recording a model call failed; refusing new model calls until the audit sink recovers",
			slog.String("error", err.Error()), slog.String("call_id", ev.ID), slog.String("session", ev.SessionID),
			slog.String("provider", ev.Provider), slog.String("model", ev.Model), slog.Int64("input_tokens", ev.InputTokens),
			slog.Int64("output_tokens", ev.OutputTokens), slog.Float64("cost_usd", ev.CostUSD), slog.Int("status", ev.StatusCode))
		return
	}
	r.log.Debug("llmrelay: model call", slog.String("call_id", ev.ID), slog.String("session", ev.SessionID),
		slog.String("provider", ev.Provider), slog.String("model", ev.Model), slog.Int("status", returned),
		slog.Int64("input_tokens", ev.InputTokens), slog.Int64("output_tokens", ev.OutputTokens),
		slog.Float64("cost_usd", ev.CostUSD), slog.Duration("duration", ev.Duration))
}
