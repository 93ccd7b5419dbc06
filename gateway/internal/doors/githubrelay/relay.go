package githubrelay

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"net"
	"net/http"
	"net/url"
	"strconv"
	"strings"
	"time"

	"ironcurtain.dev/gateway/internal/audit"
	"ironcurtain.dev/gateway/internal/auth"
	"ironcurtain.dev/gateway/internal/gate"
	"ironcurtain.dev/gateway/internal/servers"
	"ironcurtain.dev/gateway/internal/servers/github"
	"ironcurtain.dev/gateway/internal/session"
	"ironcurtain.dev/gateway/policy"
	"ironcurtain.dev/gateway/strictjson"
)

// Prefix is the path the relay is mounted under on the agent port.
const Prefix = "/github/"

// Defaults applied when the corresponding Config field is zero.
const (
	DefaultAPIURL      = "https://api.github.com/"
	DefaultMaxRESTBody = 4 << 20
	DefaultTimeout     = 60 * time.Second
)

// Rules of the relay's own refusals (decided before any policy question).
const (
	RuleMerge     = "structural-github-merge"
	RuleForbidden = "structural-github-forbidden"
	RuleRequest   = "structural-github-request"
	RuleNotOwnPR  = "structural-github-not-own-pr"
	RuleNoToken   = "structural-github-no-token"
)

// Config configures the relay.
type Config struct {
	// APIURL is the REST API base (github.api_url); GraphQL is
	// <APIURL>graphql, or <host>/api/graphql for a GitHub Enterprise base
	// ending in /api/v3/.
	APIURL string
	// Token is the gateway's GitHub token: sent upstream only, never
	// recorded, logged or returned.
	Token string
	// MaxRESTBody bounds a REST request body (GraphQL: MaxGraphQLBody).
	MaxRESTBody int64
	// Timeout bounds one upstream exchange (not the wait for a human).
	Timeout time.Duration
	// HTTPClient replaces the default client (tests).
	HTTPClient *http.Client
	// Hosts are Host names (lower case, no port) whose requests carry the
	// API's own paths (/repos/..., /graphql) rather than Prefix; default
	// DefaultHosts. The agent port routes them to the relay.
	Hosts []string
}

// DefaultHosts: gh's local-development host (GH_HOST=github.localhost
// talks plain HTTP to api.github.localhost) and api.github.com (gh over
// http_unix_socket, or a client whose /etc/hosts points it at the gateway).
var DefaultHosts = []string{"api.github.localhost", "api.github.com"}

// Gate is the one call pipeline every door hands its calls to (*gate.Gate).
type Gate interface {
	Do(ctx context.Context, c gate.Call) gate.Result
}

// Owner says whether the gateway's account opened a pull request
// (*servers/github.Server).
type Owner interface {
	OwnPR(ctx context.Context, tool, owner, repo string, number int) error
}

var (
	_ Gate  = (*gate.Gate)(nil)
	_ Owner = (*github.Server)(nil)
)

// Deps are the relay's collaborators (Audit and Logger optional).
type Deps struct {
	Gate  Gate
	Auth  session.Authenticator
	Owner Owner
	// Audit receives an egress row (kind "github") for each exchange the
	// relay has with GitHub: a forwarded request carries its call's id, a
	// node lookup made to decide a mutation only the session's.
	Audit audit.Sink
	// Secrets scans what writes send (titles, bodies, comments) for
	// secrets (nil: no scanning).
	Secrets SecretSource
	Logger  *slog.Logger
}

// Handler serves the relay.
type Handler struct {
	cfg     Config
	d       Deps
	log     *slog.Logger
	rest    *url.URL
	graphql string
	client  *http.Client
}

// New validates cfg and deps.
func New(cfg Config, d Deps) (*Handler, error) {
	if d.Gate == nil || d.Auth == nil || d.Owner == nil {
		return nil, errors.New("creating github relay: hub, authenticator and owner are required")
	}
	if cfg.APIURL == "" {
		cfg.APIURL = DefaultAPIURL
	}
	if !strings.HasSuffix(cfg.APIURL, "/") {
		cfg.APIURL += "/"
	}
	u, err := url.Parse(cfg.APIURL)
	if err != nil || (u.Scheme != "https" && u.Scheme != "http") || u.Host == "" || u.User != nil || u.RawQuery != "" {
		return nil, errors.New("creating github relay: the api url must be an absolute http(s) URL without credentials or query")
	}
	if strings.ContainsAny(cfg.Token, " \t\r\n") {
		return nil, errors.New("creating github relay: the token contains whitespace")
	}
	if cfg.MaxRESTBody < 0 || cfg.Timeout < 0 {
		return nil, errors.New("creating github relay: limits must not be negative")
	}
	if cfg.MaxRESTBody == 0 {
		cfg.MaxRESTBody = DefaultMaxRESTBody
	}
	if cfg.Timeout == 0 {
		cfg.Timeout = DefaultTimeout
	}
	if cfg.Hosts == nil {
		cfg.Hosts = DefaultHosts
	}
	hosts := make([]string, len(cfg.Hosts))
	for i, hst := range cfg.Hosts {
		hosts[i] = strings.ToLower(hst)
	}
	cfg.Hosts = hosts
	gql := cfg.APIURL + "graphql"
	if strings.HasSuffix(u.Path, "/api/v3/") {
		gql = strings.TrimSuffix(cfg.APIURL, "v3/") + "graphql"
	}
	hc := cfg.HTTPClient
	if hc == nil {
		hc = &http.Client{Transport: &http.Transport{Proxy: http.ProxyFromEnvironment, ForceAttemptHTTP2: true,
			TLSHandshakeTimeout: 10 * time.Second, MaxIdleConnsPerHost: 16}}
	}
	// Never follow a redirect with the gateway's token: hand it back.
	c := *hc
	c.CheckRedirect = func(*http.Request, []*http.Request) error { return http.ErrUseLastResponse }
	log := d.Logger
	if log == nil {
		log = slog.New(slog.DiscardHandler)
	}
	return &Handler{cfg: cfg, d: d, log: log, rest: u, graphql: gql, client: &c}, nil
}

// Patterns are the http.ServeMux patterns the relay serves on the agent
// port: Prefix, the Enterprise layout and every host of Config.Hosts.
func (h *Handler) Patterns() []string {
	out := []string{Prefix, EnterpriseRESTPrefix, EnterpriseGraphQL}
	for _, hst := range h.cfg.Hosts {
		out = append(out, hst+"/")
	}
	return out
}

// ServeHTTP relays one /github/ request.
func (h *Handler) ServeHTTP(w http.ResponseWriter, r *http.Request) {
	sess, ok := h.authenticate(w, r)
	if !ok {
		return
	}
	raw, ok := h.apiPath(r)
	if !ok {
		writeError(w, http.StatusNotFound, "not a GitHub relay path")
		return
	}
	if h.cfg.Token == "" {
		h.refuse(w, r, sess, toolFor(r.Method), RuleNoToken, "the gateway has no GitHub token configured (github.token_env or github.token_file); ask the operator", map[string]any{"path": clip(raw)})
		return
	}
	rt, err := ClassifyREST(r.Method, raw, r.URL.RawQuery, r.Header)
	if err != nil {
		h.refuse(w, r, sess, toolFor(r.Method), RuleRequest, safeReason(err), map[string]any{"path": clip(raw)})
		return
	}
	rec := map[string]any{"door": "github-relay", "method": r.Method, "route": rt.Template, "action": string(rt.Action)}
	switch rt.Action {
	case ActionMerge:
		h.refuse(w, r, sess, "github__pr_edit", RuleMerge, rt.Why, withRoute(rec, rt))
		return
	case ActionForbidden:
		h.refuse(w, r, sess, toolFor(r.Method), RuleForbidden, rt.Why, withRoute(rec, rt))
		return
	}
	limit := h.cfg.MaxRESTBody
	if rt.Action == ActionGraphQL {
		limit = MaxGraphQLBody
	}
	body, err := readBody(r, limit)
	if err != nil {
		h.refuse(w, r, sess, toolFor(r.Method), RuleRequest, err.Error(), withRoute(rec, rt))
		return
	}
	rec["body_bytes"] = len(body)
	if rt.Action == ActionGraphQL {
		h.serveGraphQL(w, r, sess, rt, body, rec)
		return
	}
	tool, args, sent, why := restCall(rt, body, h.cfg.MaxRESTBody)
	if why == "" && sent == nil && len(body) > 0 {
		why = "this route takes no request body"
	}
	if why != "" {
		h.refuse(w, r, sess, tool, RuleRequest, why, withRoute(rec, rt))
		return
	}
	if tool == "github__pr_edit" || tool == "github__pr_close" {
		if err := h.d.Owner.OwnPR(lookupContext(r.Context(), sess.ID), strings.TrimPrefix(tool, "github__"), rt.Owner, rt.Repo, rt.Number); err != nil {
			h.refuse(w, r, sess, tool, RuleNotOwnPR, err.Error(), withRoute(rec, rt))
			return
		}
	}
	// What is decided, scanned and forwarded is the decoded body,
	// re-encoded: never the bytes received.
	var forward []byte
	if sent != nil {
		if forward, err = strictjson.Marshal(sent); err != nil {
			h.refuse(w, r, sess, tool, RuleRequest, "the request body cannot be re-encoded", withRoute(rec, rt))
			return
		}
	}
	var dc policy.DoorContent
	if r.Method != http.MethodGet && r.Method != http.MethodHead {
		dc = h.doorContent("request body", sent, forward)
	}
	h.decideAndForward(w, r, sess, tool, args, dc, rec, h.restURL(rt.Path, rt.Query), forward)
}

// GitHub Enterprise's layout, which gh uses for a GH_HOST other than
// github.com: REST under /api/v3/, GraphQL at /api/graphql.
const (
	EnterpriseRESTPrefix = "/api/v3/"
	EnterpriseGraphQL    = "/api/graphql"
)

// apiPath is the API path a request names (escaped): under Prefix, in the
// Enterprise layout, or the whole path when the request's Host is one of
// Config.Hosts (gh with GH_HOST=github.localhost or over http_unix_socket
// sends the API's own paths to api.<host>).
func (h *Handler) apiPath(r *http.Request) (string, bool) {
	return apiPath(r, h.cfg.Hosts)
}

// Serves reports whether the relay serves r (hosts: Config.Hosts, nil for
// DefaultHosts); the agent port's request budgets use it.
func Serves(r *http.Request, hosts []string) bool {
	if hosts == nil {
		hosts = DefaultHosts
	}
	_, ok := apiPath(r, hosts)
	return ok
}

func apiPath(r *http.Request, hosts []string) (string, bool) {
	p := r.URL.EscapedPath()
	switch {
	case strings.HasPrefix(p, Prefix):
		return strings.TrimPrefix(p, strings.TrimSuffix(Prefix, "/")), true
	case p == EnterpriseGraphQL:
		return "/graphql", true
	case strings.HasPrefix(p, EnterpriseRESTPrefix):
		return strings.TrimPrefix(p, strings.TrimSuffix(EnterpriseRESTPrefix, "/")), true
	}
	host := strings.ToLower(r.Host)
	if hp, _, err := net.SplitHostPort(host); err == nil {
		host = hp
	}
	for _, a := range hosts {
		if host == strings.ToLower(a) {
			return p, true
		}
	}
	return "", false
}

// decideAndForward runs one decision through the pipeline and, once it is
// allowed, forwards the request and streams the answer back. dc is what
// the request sends beside args: its digest and any secrets found in it
// (doorContent).
func (h *Handler) decideAndForward(w http.ResponseWriter, r *http.Request, sess session.Session, tool string, args map[string]any, dc policy.DoorContent, rec map[string]any, target string, body []byte) {
	fw := &forwarder{h: h, w: w, r: r, target: target, body: body, done: make(chan struct{})}
	res := h.d.Gate.Do(r.Context(), gate.Call{Session: sess, Tool: tool, Args: args, Content: dc, Record: rec, Run: fw.run})
	if res.Ran {
		// The pipeline runs Run in its own goroutine and stops waiting for
		// it at the call timeout or when the client goes; its context is
		// cancelled by then, so it ends promptly. Nothing may write to w
		// after this handler returns, nor beside it.
		<-fw.done
	}
	if fw.wrote {
		return
	}
	status := http.StatusForbidden
	if res.Ran || res.Decision.Status == policy.Allow {
		status = http.StatusBadGateway
	}
	writeError(w, status, fmt.Sprintf("IronCurtain: %s (call %s)", resultText(res.Result), res.CallID))
}

// forwarder sends the request upstream inside the pipeline's Run.
type forwarder struct {
	h      *Handler
	w      http.ResponseWriter
	r      *http.Request
	target string
	body   []byte
	wrote  bool
	done   chan struct{} // closed when run returns
}

func (f *forwarder) run(ctx context.Context) (servers.Result, error) {
	defer close(f.done)
	ctx, cancel := context.WithTimeout(ctx, f.h.cfg.Timeout)
	defer cancel()
	var rb io.Reader
	if f.body != nil {
		rb = bytes.NewReader(f.body)
	}
	req, err := http.NewRequestWithContext(ctx, f.r.Method, f.target, rb)
	if err != nil {
		return servers.Result{}, fmt.Errorf("building the upstream request: %w", err)
	}
	copyRequestHeaders(req.Header, f.r.Header)
	if f.body != nil {
		req.Header.Set("Content-Type", "application/json; charset=utf-8")
	}
	req.Header.Set("Authorization", "token "+f.h.cfg.Token)
	start := time.Now()
	resp, err := f.h.client.Do(req)
	if err != nil {
		f.h.egress(ctx, "", f.r.Method, f.target, start, int64(len(f.body)), 0, 0, err)
		f.h.log.Warn("github relay: upstream request failed", "err", f.h.redact(err.Error()))
		return servers.ToolError("GitHub could not be reached"), nil
	}
	defer resp.Body.Close()
	copyResponseHeaders(f.w.Header(), resp.Header)
	f.w.WriteHeader(resp.StatusCode)
	f.wrote = true
	n, err := io.Copy(f.w, resp.Body)
	f.h.egress(ctx, "", f.r.Method, f.target, start, int64(len(f.body)), n, resp.StatusCode, err)
	if err != nil {
		return servers.ToolError(fmt.Sprintf("GitHub answered %d; streaming the answer failed after %d bytes", resp.StatusCode, n)), nil
	}
	msg := fmt.Sprintf("GitHub answered %d (%d bytes)", resp.StatusCode, n)
	if resp.StatusCode >= 400 {
		// The outcome record says the call failed, and with which status.
		return servers.ToolError(msg), nil
	}
	return servers.Text(msg), nil
}

// egress records one exchange with GitHub (an egress row of kind
// "github"): the call's id when ctx carries one (the pipeline's Run), else
// sessionID alone. Never the token: only method, host, port, path, sizes.
func (h *Handler) egress(ctx context.Context, sessionID, method, target string, start time.Time, up, down int64, status int, err error) {
	if h.d.Audit == nil {
		return
	}
	u, perr := url.Parse(target)
	if perr != nil {
		return
	}
	port := 443
	if p := u.Port(); p != "" {
		if n, aerr := strconv.Atoi(p); aerr == nil {
			port = n
		}
	} else if u.Scheme == "http" {
		port = 80
	}
	ev := servers.NewEgressEvent(ctx, servers.Egress{Start: start, Kind: "github", Method: method, Host: u.Hostname(), Port: port})
	if ev.SessionID == "" { // outside a call: the request's session
		ev.SessionID = sessionID
	}
	ev.Decision, ev.Reason = "allow", fmt.Sprintf("GitHub relay: %s %s answered %d", method, clip(u.Path), status)
	ev.BytesUp, ev.BytesDown, ev.Duration = up, down, time.Since(start)
	if ev.ToolCallID == "" {
		ev.Reason = "GitHub relay: node lookup to decide a mutation, answered " + strconv.Itoa(status)
	}
	if err != nil {
		ev.Error = clip(h.redact(err.Error()))
	}
	if rerr := h.d.Audit.Record(context.WithoutCancel(ctx), ev); rerr != nil {
		h.log.Warn("github relay: recording the upstream exchange failed", "err", rerr)
	}
}

// refuse records a refusal the relay made before any policy question and
// answers it.
func (h *Handler) refuse(w http.ResponseWriter, r *http.Request, sess session.Session, tool, rule, reason string, rec map[string]any) {
	if rec == nil {
		rec = map[string]any{}
	}
	rec["door"], rec["method"] = "github-relay", r.Method
	res := h.d.Gate.Do(r.Context(), gate.Call{Session: sess, Tool: tool,
		Refused: &policy.Decision{Status: policy.Deny, Rule: rule, Reason: reason}, Record: rec})
	writeError(w, http.StatusForbidden, fmt.Sprintf("IronCurtain refused: %s (call %s)", h.redact(reason), res.CallID))
}

// authenticate accepts the agent token as "Authorization: Bearer <t>" or
// "token <t>" (what gh sends).
func (h *Handler) authenticate(w http.ResponseWriter, r *http.Request) (session.Session, bool) {
	tok, err := auth.Token(r.Header, auth.Authorization, auth.SchemeBearer, auth.SchemeToken)
	if errors.Is(err, auth.ErrRepeated) {
		// Readers differ on which one counts: none does.
		writeError(w, http.StatusUnauthorized, "the Authorization header is given more than once")
		return session.Session{}, false
	}
	if err != nil {
		writeError(w, http.StatusUnauthorized, "the agent token is required (Authorization: token <agent token>)")
		return session.Session{}, false
	}
	sess, err := h.d.Auth.Authenticate(r.Context(), tok)
	if err != nil {
		h.log.Warn("github relay request refused: unknown agent token", "remote", r.RemoteAddr, "token_fingerprint", session.Fingerprint(tok))
		writeError(w, http.StatusUnauthorized, "unknown agent token")
		return session.Session{}, false
	}
	return sess, true
}

func (h *Handler) restURL(path, query string) string {
	u := *h.rest
	u.Path = strings.TrimSuffix(h.rest.Path, "/") + path
	u.RawPath = ""
	u.RawQuery = query
	return u.String()
}

// redact removes the gateway's token from text.
func (h *Handler) redact(s string) string {
	if h.cfg.Token == "" {
		return s
	}
	return strings.ReplaceAll(s, h.cfg.Token, "[redacted]")
}

// readBody reads at most limit bytes of the request body.
func readBody(r *http.Request, limit int64) ([]byte, error) {
	if r.Body == nil || r.Method == http.MethodGet || r.Method == http.MethodHead {
		return nil, nil
	}
	b, err := io.ReadAll(io.LimitReader(r.Body, limit+1))
	if err != nil {
		return nil, errors.New("reading the request body failed")
	}
	if int64(len(b)) > limit {
		return nil, fmt.Errorf("the request body is larger than %d bytes", limit)
	}
	return b, nil
}

func copyRequestHeaders(dst, src http.Header) {
	for _, k := range forwardedRequestHeaders {
		if v, ok := src[k]; ok {
			dst[k] = append([]string(nil), v...)
		}
	}
}

// droppedResponseHeaders are hop-by-hop headers and cookies.
var droppedResponseHeaders = map[string]bool{"Connection": true, "Keep-Alive": true, "Proxy-Authenticate": true,
	"Proxy-Authorization": true, "Te": true, "Trailer": true, "Transfer-Encoding": true, "Upgrade": true, "Set-Cookie": true,
	"Content-Length": false}

func copyResponseHeaders(dst, src http.Header) {
	hop := map[string]bool{}
	for _, v := range src.Values("Connection") {
		for _, f := range strings.Split(v, ",") {
			hop[http.CanonicalHeaderKey(strings.TrimSpace(f))] = true
		}
	}
	for k, v := range src {
		if droppedResponseHeaders[k] || hop[k] {
			continue
		}
		dst[k] = append([]string(nil), v...)
	}
}

// writeError answers in GitHub's error shape, which gh prints.
func writeError(w http.ResponseWriter, status int, msg string) {
	w.Header().Set("Content-Type", "application/json; charset=utf-8")
	w.WriteHeader(status)
	_ = json.NewEncoder(w).Encode(map[string]string{"message": msg, "documentation_url": "https://ironcurtain.dev/docs/github-relay"})
}

func toolFor(method string) string {
	if method == http.MethodGet || method == http.MethodHead {
		return "github__pr_view"
	}
	return "github__pr_edit"
}

func withRoute(rec map[string]any, rt Route) map[string]any {
	if rt.Owner != "" {
		rec["owner"], rec["repo"] = rt.Owner, rt.Repo
	}
	if rt.Number != 0 {
		rec["number"] = rt.Number
	}
	rec["path"] = rt.Path
	return rec
}

func safeReason(err error) string {
	return strings.TrimPrefix(err.Error(), ErrRequest.Error()+": ")
}

func resultText(res servers.Result) string {
	var b strings.Builder
	for _, c := range res.Content {
		b.WriteString(c.Text)
	}
	if b.Len() == 0 {
		return "refused"
	}
	return clip(b.String())
}

// lookupContext carries the session to the author lookup the relay makes
// (through the github tool server) before its decision: the lookup's egress
// row names the session; there is no call id yet.
func lookupContext(ctx context.Context, session string) context.Context {
	return servers.WithCallInfo(ctx, servers.CallInfo{SessionID: session})
}
