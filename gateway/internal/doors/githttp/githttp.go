// Package githttp is the gateway's git smart HTTP door on the agent port:
// /git/<host>/<owner>/<repo>[.git]/{info/refs, git-upload-pack,
// git-receive-pack}, so that a plain `git clone`/`git fetch`/`git push` in
// the agent's shell works through the gateway (with
// url.<gateway>/git/github.com/.insteadOf https://github.com/), under the
// same policy, escalations and audit as the git tools.
//
// Every request is authenticated with the agent token (the HTTP Basic
// password, any user name, or a Bearer header) and names an https upstream
// whose domain is in servers.git.allowed_domains; anything else is refused.
// The agent never talks to the upstream and never sees a credential: the
// door works in the git server's gateway-private mirror of the upstream
// (gitmirror.UpstreamMirror), which fetches and pushes with the gateway's
// credentials.
//
//   - Clone and fetch: info/refs?service=git-upload-pack is decided as a
//     git__fetch of the upstream URL (policy, escalation, write-ahead
//     record); its execution refreshes the mirror. The advertisement and the
//     following git-upload-pack requests of that session are served from the
//     mirror by git upload-pack (hooks off, the gateway's config only) for
//     a bounded time after the decision.
//   - Push: the ref-update commands are parsed strictly (gitwire); the pack
//     is indexed into a fresh quarantine of the mirror with index-pack
//     --strict (fsck) and --fix-thin (bases from the mirror only), bounded in
//     bytes, objects and time; the mirror is refreshed from the upstream and
//     each update is classified from the objects (create, fast-forward,
//     force, delete), whatever old id the client claimed. The whole push is
//     one call of git__push through the gate (gate.Gate.Do):
//     the push invariants and compiled rules decide, an escalation makes
//     the client wait with "waiting for approval of <id>" on the side band,
//     the decision naming every ref update is recorded before anything
//     runs, and an allowed push goes upstream from the mirror (objects from
//     the quarantine) without force. The client gets report-status per
//     ref: our refusal reason, or the upstream's own rejection.
//
// Refusals before any policy question (malformed pkt-lines, invalid ref
// names, limits, packs failing fsck) are recorded as denied git__push calls
// and answered in a form git prints.
package githttp

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"net/http"
	"strconv"
	"strings"
	"sync"
	"time"

	"ironcurtain.dev/gateway/internal/audit"
	"ironcurtain.dev/gateway/internal/auth"
	"ironcurtain.dev/gateway/internal/gate"
	"ironcurtain.dev/gateway/internal/gitmirror"
	"ironcurtain.dev/gateway/internal/gitwire"
	"ironcurtain.dev/gateway/internal/servers"
	"ironcurtain.dev/gateway/internal/session"
	"ironcurtain.dev/gateway/policy"
)

// Prefix is the path the door is mounted under.
const Prefix = "/git/"

// RuleHostNotServed is the rule of a refusal of an upstream outside
// servers.git.allowed_domains (the door serves nothing else).
const RuleHostNotServed = "structural-git-http-host"

// Tools the door's actions count as in the pipeline.
const (
	ToolPush  = "git__push"
	ToolFetch = "git__fetch"
)

// Defaults applied when the corresponding Config field is zero.
const (
	DefaultMaxPackBytes = 512 << 20
	DefaultMaxObjects   = 1 << 20
	DefaultMaxRefs      = 256
	DefaultTimeout      = 10 * time.Minute
	DefaultFetchGrant   = 10 * time.Minute
	DefaultFresh        = 10 * time.Second
)

// Config holds the door's limits.
type Config struct {
	// MaxPackBytes caps the pack of one push (and so the request body).
	MaxPackBytes int64
	// MaxObjects caps the objects in one pushed pack (from its header,
	// before any of it is indexed).
	MaxObjects int
	// MaxRefs caps the ref updates of one push.
	MaxRefs int
	// Timeout bounds receiving, indexing and classifying a push, and
	// serving one upload-pack request (not the wait for a human, which the
	// escalation timeout bounds, nor the upstream push, bounded by the git
	// server's network timeout).
	Timeout time.Duration
	// Fresh is how long the refs a session's receive-pack advertisement
	// showed (read from the upstream) classify its push without another
	// request to the upstream (git asks for the refs just before it
	// pushes), unless the door pushed to the repository since; likewise
	// how long after a refresh of the mirror a push without them is
	// classified against the mirror without refreshing it again.
	// Classification is then against the refs the client was shown; the
	// upstream push is never forced, so an upstream that moved in between
	// rejects a non-fast-forward itself. Negative: refresh at every push.
	Fresh time.Duration
	// FetchGrant is how long an allowed info/refs?service=git-upload-pack
	// lets the same session's upload-pack requests for that repository be
	// served from the mirror.
	FetchGrant time.Duration
	// MaxScanBytes bounds the commit messages and added blobs of one push
	// scanned for secrets (secrets.max_push_bytes); default
	// gitscan.DefaultMaxBytes. A larger push is escalated.
	MaxScanBytes int64
	// UnsafeUpstreams (tests only) maps a host as named in the path to the
	// base URL git really talks to (a local test server). Policy and
	// records still see https://<host>/<owner>/<repo>.git.
	UnsafeUpstreams map[string]string
}

// Gate is the one call pipeline every door hands its calls to (*gate.Gate).
type Gate interface {
	Do(ctx context.Context, c gate.Call) gate.Result
}

// Mirrors gives the gateway-private mirror of an upstream
// (*gitmirror.Mirrors, shared with the git server).
type Mirrors interface {
	UpstreamMirror(ctx context.Context, url string) (*gitmirror.UpstreamMirror, error)
}

// Allowlist says whether an upstream is served (*policy.Engine).
type Allowlist interface {
	GitDoorAllowed(url string) (policy.GitRemote, bool)
}

// Deps are the door's collaborators (all required but Audit and Logger).
type Deps struct {
	Gate    Gate
	Auth    session.Authenticator
	Mirrors Mirrors
	Allow   Allowlist
	// Audit receives an egress row for each upstream fetch and push a
	// door call makes, carrying the call's id (nil: none).
	Audit audit.Sink
	// Secrets scans what a push adds for secrets (nil: no scanning).
	Secrets SecretSource
	Logger  *slog.Logger
}

// Handler serves the door.
type Handler struct {
	cfg  Config
	d    Deps
	log  *slog.Logger
	now  func() time.Time
	mu   sync.Mutex
	fetc map[grantKey]time.Time // fetch grants: until when
	last map[string]time.Time   // mirrors (by transport URL): last refresh
	// shown are the upstream refs each session's last receive-pack
	// advertisement showed, moved when the door last pushed to each
	// upstream (by transport URL): shown refs read before that are stale.
	shown map[grantKey]shownRefs
	moved map[string]time.Time
}

// shownRefs are the refs of an advertisement and when reading them began.
type shownRefs struct {
	refs map[string]string
	at   time.Time
}

type grantKey struct{ session, url string }

// New validates cfg and deps.
func New(cfg Config, d Deps) (*Handler, error) {
	if d.Gate == nil || d.Auth == nil || d.Mirrors == nil || d.Allow == nil {
		return nil, errors.New("creating git HTTP door: hub, authenticator, mirrors and allowlist are required")
	}
	if cfg.Fresh == 0 {
		cfg.Fresh = DefaultFresh
	}
	if cfg.MaxPackBytes < 0 || cfg.MaxObjects < 0 || cfg.MaxScanBytes < 0 || cfg.MaxRefs < 0 || cfg.Timeout < 0 || cfg.FetchGrant < 0 {
		return nil, errors.New("creating git HTTP door: limits must not be negative")
	}
	if cfg.MaxPackBytes == 0 {
		cfg.MaxPackBytes = DefaultMaxPackBytes
	}
	if cfg.MaxObjects == 0 {
		cfg.MaxObjects = DefaultMaxObjects
	}
	if cfg.MaxRefs == 0 {
		cfg.MaxRefs = DefaultMaxRefs
	}
	if cfg.Timeout == 0 {
		cfg.Timeout = DefaultTimeout
	}
	if cfg.FetchGrant == 0 {
		cfg.FetchGrant = DefaultFetchGrant
	}
	log := d.Logger
	if log == nil {
		log = slog.New(slog.DiscardHandler)
	}
	return &Handler{cfg: cfg, d: d, log: log, now: time.Now, fetc: map[grantKey]time.Time{}, last: map[string]time.Time{},
		shown: map[grantKey]shownRefs{}, moved: map[string]time.Time{}}, nil
}

// repo is the upstream repository a request names.
type repo struct {
	host, owner, name string
	url               string // what policy and records see: https://host/owner/name.git
	transport         string // what git talks to (url, unless UnsafeUpstreams)
}

// ServeHTTP routes a /git/ request.
func (h *Handler) ServeHTTP(w http.ResponseWriter, r *http.Request) {
	rp, service, err := parsePath(r.URL.Path)
	if err != nil {
		http.Error(w, "not found: "+err.Error(), http.StatusNotFound)
		return
	}
	switch {
	case service == "info/refs" && r.Method == http.MethodGet:
	case (service == "git-upload-pack" || service == "git-receive-pack") && r.Method == http.MethodPost:
	default:
		w.Header().Set("Allow", "GET, POST")
		http.Error(w, "method not allowed", http.StatusMethodNotAllowed)
		return
	}
	sess, ok := h.authenticate(w, r)
	if !ok {
		return
	}
	rp.transport = rp.url
	if base, ok := h.cfg.UnsafeUpstreams[rp.host]; ok {
		rp.transport = strings.TrimSuffix(base, "/") + "/" + rp.owner + "/" + rp.name + ".git"
	}
	refs := service == "info/refs"
	if refs {
		service = r.URL.Query().Get("service")
		if service != "git-upload-pack" && service != "git-receive-pack" {
			http.Error(w, "only the smart HTTP protocol is served: ask for ?service=git-upload-pack or git-receive-pack", http.StatusForbidden)
			return
		}
	}
	// Decided before anything reaches the upstream (a mirror refresh is a
	// request to it, naming the path): the path is secret-scanned, then
	// the host must be served.
	if h.pathRefused(w, r, sess, rp, service, refs) || !h.allowed(w, r, sess, rp, service, refs) {
		return
	}
	switch {
	case refs && service == "git-upload-pack":
		h.uploadPackRefs(w, r, sess, rp)
	case refs:
		h.receivePackRefs(w, r, sess, rp)
	case service == "git-upload-pack":
		h.uploadPack(w, r, sess, rp)
	default:
		h.receivePack(w, r, sess, rp)
	}
}

// allowed refuses (and records) an upstream outside the allowlist.
func (h *Handler) allowed(w http.ResponseWriter, r *http.Request, sess session.Session, rp repo, service string, refs bool) bool {
	if _, ok := h.d.Allow.GitDoorAllowed(rp.url); ok {
		return true
	}
	reason := fmt.Sprintf("%s is not in the gateway's git allowlist (servers.git.allowed_domains)", rp.host)
	tool := ToolFetch
	if service == "git-receive-pack" {
		tool = ToolPush
	}
	res := h.d.Gate.Do(r.Context(), gate.Call{Session: sess, Tool: tool,
		Refused: &policy.Decision{Status: policy.Deny, Rule: RuleHostNotServed, Reason: reason},
		Record:  map[string]any{"remote": rp.url, "door": "git-http", "service": service}})
	msg := fmt.Sprintf("IronCurtain refused %s: %s (call %s)", rp.url, reason, res.CallID)
	if refs {
		writeRefsError(w, service, msg)
	} else {
		http.Error(w, msg, http.StatusForbidden)
	}
	return false
}

// authenticate accepts the agent token as the Basic password or a Bearer
// token of the one Authorization header; without one it asks git for
// credentials.
func (h *Handler) authenticate(w http.ResponseWriter, r *http.Request) (session.Session, bool) {
	tok, err := token(r.Header)
	if err != nil {
		w.Header().Set("WWW-Authenticate", `Basic realm="ironcurtain"`)
		http.Error(w, "the agent token is required (as the password)", http.StatusUnauthorized)
		return session.Session{}, false
	}
	sess, err := h.d.Auth.Authenticate(r.Context(), tok)
	if err != nil {
		h.log.Warn("git HTTP request refused: unknown agent token", "remote", r.RemoteAddr, "token_fingerprint", session.Fingerprint(tok))
		w.Header().Set("WWW-Authenticate", `Basic realm="ironcurtain"`)
		http.Error(w, "unknown agent token", http.StatusUnauthorized)
		return session.Session{}, false
	}
	return sess, true
}

// token is the agent token of the one Authorization header of h: a Bearer
// token or the Basic password (any user name).
func token(h http.Header) (string, error) {
	return auth.Token(h, auth.Authorization, auth.SchemeBearer, auth.SchemeBasic)
}

// parsePath reads /git/<host>/<owner>/<repo>[.git]/<service>.
func parsePath(p string) (repo, string, error) {
	rest, ok := strings.CutPrefix(p, Prefix)
	if !ok {
		return repo{}, "", errors.New("not a git path")
	}
	parts := strings.SplitN(rest, "/", 4)
	if len(parts) != 4 {
		return repo{}, "", errors.New("the path must be /git/<host>/<owner>/<repo>.git/...")
	}
	host, owner, name, service := parts[0], parts[1], strings.TrimSuffix(parts[2], ".git"), parts[3]
	if !validHost(host) {
		return repo{}, "", fmt.Errorf("invalid host %q", clip(host))
	}
	if !validSegment(owner) || !validSegment(name) {
		return repo{}, "", errors.New("invalid owner or repository name")
	}
	switch service {
	case "info/refs", "git-upload-pack", "git-receive-pack":
	default:
		return repo{}, "", errors.New("unknown git service")
	}
	return repo{host: host, owner: owner, name: name, url: "https://" + host + "/" + owner + "/" + name + ".git"}, service, nil
}

// validHost accepts a lower-case DNS name with an optional port.
func validHost(h string) bool {
	name, port, hasPort := strings.Cut(h, ":")
	if name == "" || len(h) > 255 || name[0] == '-' || name[0] == '.' || strings.Contains(name, "..") {
		return false
	}
	for i := 0; i < len(name); i++ {
		c := name[i]
		if !(c >= 'a' && c <= 'z' || c >= '0' && c <= '9' || c == '.' || c == '-') {
			return false
		}
	}
	if hasPort {
		if port == "" || len(port) > 5 || port[0] == '0' {
			return false
		}
		for i := 0; i < len(port); i++ {
			if port[i] < '0' || port[i] > '9' {
				return false
			}
		}
	}
	return true
}

// validSegment accepts an owner or repository name: ASCII letters, digits,
// '.', '_', '-', not starting with '.' or '-', not ending with '.', no "..".
func validSegment(s string) bool {
	if s == "" || len(s) > 100 || s[0] == '.' || s[0] == '-' || s[len(s)-1] == '.' || strings.Contains(s, "..") {
		return false
	}
	for i := 0; i < len(s); i++ {
		c := s[i]
		if !(c >= 'a' && c <= 'z' || c >= 'A' && c <= 'Z' || c >= '0' && c <= '9' || c == '.' || c == '_' || c == '-') {
			return false
		}
	}
	return true
}

func clip(s string) string {
	if len(s) > 80 {
		return s[:80] + "…"
	}
	return s
}

// refreshed notes that the mirror of url was just refreshed.
func (h *Handler) refreshed(url string) {
	h.mu.Lock()
	defer h.mu.Unlock()
	now := h.now()
	if len(h.last) > 4096 {
		for k, t := range h.last {
			if now.Sub(t) > h.cfg.Fresh {
				delete(h.last, k)
			}
		}
	}
	h.last[url] = now
}

// fresh reports whether the mirror of url was refreshed within Config.Fresh.
func (h *Handler) fresh(url string) bool {
	if h.cfg.Fresh < 0 {
		return false
	}
	h.mu.Lock()
	defer h.mu.Unlock()
	t, ok := h.last[url]
	return ok && h.now().Sub(t) <= h.cfg.Fresh
}

// stale forgets the last refresh of the mirror of url and every
// advertisement of it shown so far: the door pushed to it.
func (h *Handler) stale(url string) {
	h.mu.Lock()
	defer h.mu.Unlock()
	delete(h.last, url)
	h.moved[url] = h.now()
}

// show keeps the refs a session's advertisement of url showed, read from
// the upstream from at.
func (h *Handler) show(session, url string, refs map[string]string, at time.Time) {
	h.mu.Lock()
	defer h.mu.Unlock()
	now := h.now()
	if len(h.shown) > 4096 {
		for k, s := range h.shown {
			if now.Sub(s.at) > h.cfg.Fresh {
				delete(h.shown, k)
			}
		}
		for k, t := range h.moved {
			if now.Sub(t) > h.cfg.Fresh {
				delete(h.moved, k)
			}
		}
	}
	h.shown[grantKey{session, url}] = shownRefs{refs: refs, at: at}
}

// shownRefs returns the refs the session's last advertisement of url
// showed, when they were read within Config.Fresh and after the door's
// last push to url began to complete (never with a negative Fresh).
func (h *Handler) shownRefs(session, url string) (map[string]string, bool) {
	if h.cfg.Fresh < 0 {
		return nil, false
	}
	h.mu.Lock()
	defer h.mu.Unlock()
	s, ok := h.shown[grantKey{session, url}]
	if !ok || h.now().Sub(s.at) > h.cfg.Fresh {
		return nil, false
	}
	if moved, ok := h.moved[url]; ok && !s.at.After(moved) {
		return nil, false
	}
	return s.refs, true
}

// egress records the door's own traffic with the upstream for a call (an
// egress row carrying the call's id, like the fetch tool's).
func (h *Handler) egress(ctx context.Context, rp repo, method string, start time.Time, bytesUp int64, err error) {
	if h.d.Audit == nil {
		return
	}
	host, port := rp.host, 443
	if hp, ps, ok := strings.Cut(rp.host, ":"); ok {
		host = hp
		if n, perr := strconv.Atoi(ps); perr == nil {
			port = n
		}
	}
	ev := servers.NewEgressEvent(ctx, servers.Egress{Start: start, Kind: "git", Method: method, Host: host, Port: port})
	ev.Decision, ev.Reason = "allow", "git "+method+" of "+rp.url+" by the git HTTP door"
	ev.BytesUp, ev.Duration = bytesUp, h.now().Sub(start)
	if err != nil {
		ev.Error = gitwire.Sanitize(err.Error())
	}
	if rerr := h.d.Audit.Record(context.WithoutCancel(ctx), ev); rerr != nil {
		h.log.Warn("git HTTP door: recording the upstream traffic failed", "repo", rp.url, "err", rerr)
	}
}
