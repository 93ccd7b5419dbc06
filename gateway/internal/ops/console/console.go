// Package console is the operator console served at /ui/ on the ops port:
// server-rendered pages (html/template, assets embedded, nothing fetched at
// run time) to decide escalations, mint and revoke sessions, read a
// session's timeline and verify its hash chain, and see the loaded policy.
// Every decision works without JavaScript; the one script only refreshes
// the pending escalations when the server-sent event stream (fed by the
// escalations' LISTEN/NOTIFY) says they changed.
//
// The console renders strings the agent wrote, so it treats them as hostile
// (SECURITY-NOTES "The operator console renders what the agent wrote"):
// they are escaped by html/template and shown as text (never HTML, markdown
// or a link), bidi and invisible characters are shown as visible marks
// (Neutralise), long values are cut to a preview and a bounded "show all"
// (Text), and pages are bounded in bytes. Operators sign in with their
// operator token and get a server-side session (HttpOnly, SameSite=Strict
// cookie; Secure with TLS); every state change needs the session's CSRF
// token and a same-origin request; a strict Content-Security-Policy allows
// no inline script and no framing.
package console

import (
	"context"
	"embed"
	"errors"
	"html/template"
	"io/fs"
	"log/slog"
	"net/http"
	"strconv"
	"time"

	"github.com/go-chi/chi/v5"

	"ironcurtain.dev/gateway/internal/audit"

	"ironcurtain.dev/gateway/internal/escalation"
	"ironcurtain.dev/gateway/internal/ops/opsapi"
)

//go:embed templates/*.html
var templateFS embed.FS

//go:embed assets
var assetFS embed.FS

// Escalations is what the console needs from the escalator (*escalation.PG).
type Escalations interface {
	ListEach(ctx context.Context, f escalation.ListFilter, fn func(*escalation.Escalation) error) error
	Get(ctx context.Context, id string) (escalation.Escalation, error)
	Decide(ctx context.Context, id string, d escalation.Decision) (escalation.Escalation, error)
}

// Deps are the console's collaborators. Operators, Escalations and Store
// are required.
type Deps struct {
	Operators   *opsapi.Operators
	Escalations Escalations
	// Watch, when set, signals escalation changes (escalation.PG.Watch);
	// without it the console has no live updates (pages still work).
	Watch func() (<-chan struct{}, func())
	Store Store
	// Sessions mints and revokes per-run sessions (nil: the sessions page
	// lists activity only).
	Sessions SessionAdmin
	// Policy reports the loaded policy (nil: the policy page says unknown).
	Policy func() PolicyStatus
	// SignIns keeps operators' sign-ins (store.ConsoleSessions: in
	// Postgres, shared by every replica); nil: in this process's memory.
	SignIns SignIns
	// Secure marks the cookie Secure (the ops port serves TLS, or a TLS
	// proxy fronts it).
	Secure bool
	Logger *slog.Logger
	Now    func() time.Time
}

// PolicyStatus is what the policy page shows about the loaded policy.
type PolicyStatus struct {
	Version  string
	LoadedAt time.Time
	Dir      string
	Rules    int
	Tools    int
	Warnings []string
	Shadow   string // the shadow policy's version ("" when none is loaded)
}

// Console serves /ui/.
type Console struct {
	deps     Deps
	log      *slog.Logger
	now      func() time.Time
	sessions *sessionStore
	failures *failLimiter
	pages    map[string]*template.Template
	streams  chan struct{} // bounds the open event streams
}

// MaxStreams bounds the event streams open at once.
const MaxStreams = 64

// New returns the console. Mount it at /ui (it serves paths under /ui/).
func New(d Deps) (*Console, error) {
	if d.Operators == nil || d.Escalations == nil || d.Store == nil {
		return nil, errors.New("creating console: operators, escalations and store are required")
	}
	c := &Console{deps: d, log: d.Logger, now: d.Now, streams: make(chan struct{}, MaxStreams)}
	if c.log == nil {
		c.log = slog.New(slog.DiscardHandler)
	}
	if c.now == nil {
		c.now = time.Now
	}
	c.sessions = newSessionStore(d.SignIns, c.now)
	c.failures = newFailLimiter(c.now)
	var err error
	if c.pages, err = parsePages(); err != nil {
		return nil, err
	}
	return c, nil
}

// Handler returns the console's routes, all under /ui/.
func (c *Console) Handler() http.Handler {
	r := chi.NewRouter()
	r.Use(securityHeaders)
	assets, _ := fs.Sub(assetFS, "assets")
	r.Handle("/ui/assets/*", http.StripPrefix("/ui/assets/", assetHandler(assets)))
	r.Get("/ui/signin", c.signinPage)
	r.Post("/ui/signin", c.signin)
	r.Get("/ui", func(w http.ResponseWriter, r *http.Request) { http.Redirect(w, r, "/ui/", http.StatusSeeOther) })
	r.Group(func(r chi.Router) {
		r.Use(c.requireSession)
		r.Get("/ui/", func(w http.ResponseWriter, r *http.Request) {
			http.Redirect(w, r, "/ui/escalations", http.StatusSeeOther)
		})
		r.Post("/ui/signout", c.signout)
		r.Get("/ui/escalations", c.escalationsPage)
		r.Get("/ui/escalations/pending", c.pendingFragment)
		r.Get("/ui/escalation", c.escalationPage)
		r.Post("/ui/escalation/decide", c.decide)
		r.Get("/ui/events", c.events)
		r.Get("/ui/sessions", c.sessionsPage)
		r.Post("/ui/sessions/create", c.createSession)
		r.Post("/ui/sessions/revoke", c.revokeSession)
		r.Get("/ui/timeline", c.timelinePage)
		r.Post("/ui/timeline/verify", c.verify)
		r.Get("/ui/policy", c.policyPage)
	})
	r.NotFound(func(w http.ResponseWriter, r *http.Request) {
		c.errorPage(w, r, http.StatusNotFound, "No such page.")
	})
	r.MethodNotAllowed(func(w http.ResponseWriter, r *http.Request) {
		c.errorPage(w, r, http.StatusMethodNotAllowed, "Method not allowed.")
	})
	// Mounted inside another chi router (the ops API), route on the whole
	// path with a routing context of its own.
	return http.HandlerFunc(func(w http.ResponseWriter, req *http.Request) {
		r.ServeHTTP(w, req.WithContext(context.WithValue(req.Context(), chi.RouteCtxKey, nil)))
	})
}

// securityHeaders sets the headers every console response carries.
func securityHeaders(next http.Handler) http.Handler {
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		h := w.Header()
		h.Set("Content-Security-Policy", ContentSecurityPolicy)
		h.Set("X-Frame-Options", "DENY")
		h.Set("X-Content-Type-Options", "nosniff")
		h.Set("Referrer-Policy", "no-referrer")
		h.Set("Cross-Origin-Opener-Policy", "same-origin")
		h.Set("Cross-Origin-Resource-Policy", "same-origin")
		h.Set("Permissions-Policy", "camera=(), microphone=(), geolocation=(), payment=()")
		if h.Get("Cache-Control") == "" {
			h.Set("Cache-Control", "no-store")
		}
		next.ServeHTTP(w, r)
	})
}

// ContentSecurityPolicy allows only the console's own script, style and
// images, no inline script or style, no framing, no plugins, no base
// changes, and forms that post back to the console only.
const ContentSecurityPolicy = "default-src 'none'; script-src 'self'; style-src 'self'; img-src 'self'; " +
	"connect-src 'self'; form-action 'self'; frame-ancestors 'none'; base-uri 'none'"

func assetHandler(assets fs.FS) http.Handler {
	files := http.FileServerFS(assets)
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		w.Header().Set("Cache-Control", "private, max-age=300")
		files.ServeHTTP(w, r)
	})
}

// requireSession lets signed-in operators through; a page request without a
// session goes to sign-in, anything else is refused. A POST must come from
// the console itself and carry the session's CSRF token.
func (c *Console) requireSession(next http.Handler) http.Handler {
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		ck, err := r.Cookie(c.cookieName(r))
		var sess opSession
		ok := false
		if err == nil {
			if sess, ok, err = c.sessions.get(r.Context(), ck.Value); err != nil {
				c.log.Error("console: reading the sign-in session", "err", err)
				c.errorPage(w, r, http.StatusServiceUnavailable, "The console cannot check your sign-in right now (its database is unreachable); try again shortly.")
				return
			}
		}
		if !ok {
			if r.Method == http.MethodGet && r.URL.Path != "/ui/events" && r.URL.Path != "/ui/escalations/pending" {
				http.Redirect(w, r, "/ui/signin", http.StatusSeeOther)
				return
			}
			c.errorPage(w, r, http.StatusUnauthorized, "Sign in first.")
			return
		}
		if r.Method != http.MethodGet && r.Method != http.MethodHead {
			r.Body = http.MaxBytesReader(w, r.Body, maxForm)
			if !sameOrigin(r) {
				c.log.Warn("console: refused a cross-site request", "path", r.URL.Path, "origin", r.Header.Get("Origin"), "sec_fetch_site", r.Header.Get("Sec-Fetch-Site"), "operator", sess.operator)
				c.errorPage(w, r, http.StatusForbidden, "Refused: this request did not come from the console.")
				return
			}
			if bad := badFormText(r); bad != "" {
				c.errorPage(w, r, http.StatusBadRequest, "The form field "+bad+" is not valid text (invalid UTF-8 or a NUL byte).")
				return
			}
			if !checkCSRF(r, sess) {
				c.log.Warn("console: refused a request without a valid CSRF token", "path", r.URL.Path, "operator", sess.operator)
				c.errorPage(w, r, http.StatusForbidden, "Refused: the form's CSRF token is missing or wrong. Reload the page and try again.")
				return
			}
		}
		next.ServeHTTP(w, r.WithContext(context.WithValue(r.Context(), ctxKey{}, sess)))
	})
}

// badFormText names the first form field (of a parsed body) whose name or
// value Postgres could not take, or "" (the form was too large or not a
// form: the CSRF check refuses it).
func badFormText(r *http.Request) string {
	if err := r.ParseForm(); err != nil {
		return ""
	}
	for k, vs := range r.PostForm {
		if audit.CheckText(k) != nil {
			return "name"
		}
		for _, v := range vs {
			if audit.CheckText(v) != nil {
				return strconv.Quote(oneLine(k, 40))
			}
		}
	}
	return ""
}

// maxForm bounds a form body.
const maxForm = 64 << 10

func (c *Console) signinPage(w http.ResponseWriter, r *http.Request) {
	c.render(w, r, http.StatusOK, "signin", page{Title: "Sign in"})
}

func (c *Console) signin(w http.ResponseWriter, r *http.Request) {
	r.Body = http.MaxBytesReader(w, r.Body, maxForm)
	if !sameOrigin(r) {
		c.log.Warn("console: refused a cross-site sign-in", "origin", r.Header.Get("Origin"), "sec_fetch_site", r.Header.Get("Sec-Fetch-Site"), "host", r.Host)
		c.errorPage(w, r, http.StatusForbidden, "Refused: this request did not come from the console.")
		return
	}
	// A valid token signs in at once, whatever failed before it from the
	// same address; only failures wait (limit.go).
	token := r.PostFormValue("token")
	name, ok := c.deps.Operators.Authenticate(token)
	if !ok {
		host := clientHost(r)
		d := c.failures.fail(host)
		c.log.Warn("console: sign-in refused", "remote", r.RemoteAddr, "delay", d)
		if !c.failures.wait(r.Context(), d) {
			w.Header().Set("Retry-After", "5")
			c.render(w, r, http.StatusTooManyRequests, "signin", page{Title: "Sign in", Error: "That is not a valid operator token. Too many failed sign-ins are waiting right now; try again in a few seconds."})
			return
		}
		c.render(w, r, http.StatusUnauthorized, "signin", page{Title: "Sign in", Error: "That is not a valid operator token."})
		return
	}
	id, _, err := c.sessions.create(r.Context(), name)
	if err != nil {
		c.log.Error("console: storing the sign-in session", "operator", name, "err", err)
		c.render(w, r, http.StatusServiceUnavailable, "signin", page{Title: "Sign in", Error: "Signing in is not possible right now (the console's database is unreachable); try again shortly."})
		return
	}
	c.setCookie(w, r, id, int(SessionMax/time.Second))
	c.log.Info("console: operator signed in", "operator", name, "remote", r.RemoteAddr)
	http.Redirect(w, r, "/ui/escalations", http.StatusSeeOther)
}

func (c *Console) signout(w http.ResponseWriter, r *http.Request) {
	if ck, err := r.Cookie(c.cookieName(r)); err == nil {
		if err := c.sessions.remove(r.Context(), ck.Value); err != nil {
			c.log.Error("console: ending the sign-in session", "err", err)
			c.errorPage(w, r, http.StatusServiceUnavailable, "Signing out did not reach the console's database; try again.")
			return
		}
	}
	c.setCookie(w, r, "", -1)
	http.Redirect(w, r, "/ui/signin", http.StatusSeeOther)
}

// ErrUnavailable is what a Store or SessionAdmin returns for a feature the
// gateway does not have (e.g. minted sessions without their store).
var ErrUnavailable = errors.New("not available on this gateway")
