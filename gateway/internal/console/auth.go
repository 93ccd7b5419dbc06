package console

import (
	"crypto/rand"
	"crypto/sha256"
	"crypto/subtle"
	"encoding/base64"
	"net/http"
	"net/url"
	"strings"
	"sync"
	"time"
)

// Sign-in sessions of the console (operators, not agents).
const (
	// SessionIdle ends a console session nobody used for this long.
	SessionIdle = 30 * time.Minute
	// SessionMax ends a console session this long after sign-in.
	SessionMax = 12 * time.Hour
	// MaxSessions bounds the sessions held; signing in beyond it ends the
	// oldest.
	MaxSessions = 1000
	// cookieName is the session cookie. With TLS it carries the __Host-
	// prefix: the browser then only accepts it Secure, host-only, Path=/.
	cookieName = "ic_console"
	csrfField  = "csrf"
)

// opSession is one signed-in operator.
type opSession struct {
	operator string
	csrf     string
	created  time.Time
	lastSeen time.Time
}

// sessionStore keeps console sessions in memory, keyed by the SHA-256 of
// the random id the cookie holds (the id itself is never stored).
type sessionStore struct {
	mu   sync.Mutex
	m    map[[sha256.Size]byte]*opSession
	now  func() time.Time
	idle time.Duration
	max  time.Duration
}

func newSessionStore(now func() time.Time) *sessionStore {
	return &sessionStore{m: map[[sha256.Size]byte]*opSession{}, now: now, idle: SessionIdle, max: SessionMax}
}

func randomToken() string {
	b := make([]byte, 32)
	_, _ = rand.Read(b) // crypto/rand.Read never fails (Go 1.24+: it panics instead)
	return base64.RawURLEncoding.EncodeToString(b)
}

// create starts a session for operator and returns its cookie value.
func (s *sessionStore) create(operator string) (string, *opSession) {
	id := randomToken()
	now := s.now()
	sess := &opSession{operator: operator, csrf: randomToken(), created: now, lastSeen: now}
	s.mu.Lock()
	defer s.mu.Unlock()
	s.sweepLocked(now)
	if len(s.m) >= MaxSessions {
		var oldest [sha256.Size]byte
		var at time.Time
		for k, v := range s.m {
			if at.IsZero() || v.created.Before(at) {
				oldest, at = k, v.created
			}
		}
		delete(s.m, oldest)
	}
	s.m[sha256.Sum256([]byte(id))] = sess
	return id, sess
}

// get returns the live session of a cookie value and marks it used.
func (s *sessionStore) get(id string) (opSession, bool) {
	if id == "" || len(id) > 128 {
		return opSession{}, false
	}
	k := sha256.Sum256([]byte(id))
	now := s.now()
	s.mu.Lock()
	defer s.mu.Unlock()
	sess, ok := s.m[k]
	if !ok {
		return opSession{}, false
	}
	if now.Sub(sess.lastSeen) > s.idle || now.Sub(sess.created) > s.max {
		delete(s.m, k)
		return opSession{}, false
	}
	sess.lastSeen = now
	return *sess, true
}

func (s *sessionStore) remove(id string) {
	s.mu.Lock()
	delete(s.m, sha256.Sum256([]byte(id)))
	s.mu.Unlock()
}

func (s *sessionStore) sweepLocked(now time.Time) {
	for k, v := range s.m {
		if now.Sub(v.lastSeen) > s.idle || now.Sub(v.created) > s.max {
			delete(s.m, k)
		}
	}
}

// secure reports whether the browser reaches the console over TLS: the
// ops port serves TLS, or Deps.Secure says a TLS proxy fronts it, or the
// proxy says so (X-Forwarded-Proto only ever makes the cookie stricter).
func (c *Console) secure(r *http.Request) bool {
	return c.deps.Secure || r.TLS != nil || strings.EqualFold(r.Header.Get("X-Forwarded-Proto"), "https")
}

func (c *Console) cookieName(r *http.Request) string {
	if c.secure(r) {
		return "__Host-" + cookieName
	}
	return cookieName
}

func (c *Console) setCookie(w http.ResponseWriter, r *http.Request, value string, maxAge int) {
	http.SetCookie(w, &http.Cookie{
		Name:     c.cookieName(r),
		Value:    value,
		Path:     "/",
		MaxAge:   maxAge,
		HttpOnly: true,
		Secure:   c.secure(r),
		SameSite: http.SameSiteStrictMode,
	})
}

type ctxKey struct{}

// current returns the signed-in session of a request that passed requireSession.
func current(r *http.Request) opSession {
	s, _ := r.Context().Value(ctxKey{}).(opSession)
	return s
}

// sameOrigin refuses a state-changing request another site made. A current
// browser says where the request came from in Sec-Fetch-Site, which must be
// same-origin; its Origin is then the console's own or "null" (the console's
// Referrer-Policy no-referrer makes browsers send Origin: null on their own
// form posts). Without Sec-Fetch-Site, an Origin, when sent, must be the
// console's own.
func sameOrigin(r *http.Request) bool {
	site := r.Header.Get("Sec-Fetch-Site")
	if site != "" && site != "same-origin" {
		return false
	}
	origin := r.Header.Get("Origin")
	switch {
	case origin == "":
		return true // not a browser; the CSRF token still applies
	case origin == "null":
		return site == "same-origin"
	}
	u, err := url.Parse(origin)
	if err != nil || u.Host == "" {
		return false
	}
	return strings.EqualFold(u.Host, r.Host)
}

// checkCSRF compares the form's CSRF token with the session's.
func checkCSRF(r *http.Request, sess opSession) bool {
	got := r.PostFormValue(csrfField)
	return got != "" && subtle.ConstantTimeCompare([]byte(got), []byte(sess.csrf)) == 1
}
