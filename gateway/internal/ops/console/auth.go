package console

import (
	"context"
	"crypto/rand"
	"crypto/sha256"
	"crypto/subtle"
	"encoding/base64"
	"net/http"
	"net/url"
	"strings"
	"sync"
	"time"

	"ironcurtain.dev/gateway/internal/store"
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

// SignIns keeps console sessions, keyed by the SHA-256 of the random id
// the cookie holds (the id itself is never stored). store.ConsoleSessions
// keeps them in Postgres, shared by every replica (Deps.SignIns); without
// one they live in this process's memory (memSignIns).
type SignIns interface {
	// Create stores a new session, sweeping ended ones and ending the
	// oldest beyond max.
	Create(ctx context.Context, digest [sha256.Size]byte, s store.ConsoleSession, idle, maxAge time.Duration, max int) error
	// Use returns the live session of digest and marks it used at now.
	Use(ctx context.Context, digest [sha256.Size]byte, now time.Time, idle, maxAge time.Duration) (store.ConsoleSession, bool, error)
	// Delete ends a session.
	Delete(ctx context.Context, digest [sha256.Size]byte) error
}

var _ SignIns = store.ConsoleSessions{}

// sessionStore is the console's view of its sign-ins.
type sessionStore struct {
	be   SignIns
	now  func() time.Time
	idle time.Duration
	max  time.Duration
}

func newSessionStore(be SignIns, now func() time.Time) *sessionStore {
	if be == nil {
		be = &memSignIns{m: map[[sha256.Size]byte]store.ConsoleSession{}}
	}
	return &sessionStore{be: be, now: now, idle: SessionIdle, max: SessionMax}
}

func randomToken() string {
	b := make([]byte, 32)
	_, _ = rand.Read(b) // crypto/rand.Read never fails (Go 1.24+: it panics instead)
	return base64.RawURLEncoding.EncodeToString(b)
}

// create starts a session for operator and returns its cookie value.
func (s *sessionStore) create(ctx context.Context, operator string) (string, opSession, error) {
	id := randomToken()
	now := s.now()
	sess := store.ConsoleSession{Operator: operator, CSRF: randomToken(), Created: now, LastSeen: now}
	if err := s.be.Create(ctx, sha256.Sum256([]byte(id)), sess, s.idle, s.max, MaxSessions); err != nil {
		return "", opSession{}, err
	}
	return id, opSession{operator: operator, csrf: sess.CSRF, created: now, lastSeen: now}, nil
}

// get returns the live session of a cookie value and marks it used. An
// error (the store unreachable) is no session: the caller refuses.
func (s *sessionStore) get(ctx context.Context, id string) (opSession, bool, error) {
	if id == "" || len(id) > 128 {
		return opSession{}, false, nil
	}
	v, ok, err := s.be.Use(ctx, sha256.Sum256([]byte(id)), s.now(), s.idle, s.max)
	if err != nil || !ok {
		return opSession{}, false, err
	}
	return opSession{operator: v.Operator, csrf: v.CSRF, created: v.Created, lastSeen: v.LastSeen}, true, nil
}

func (s *sessionStore) remove(ctx context.Context, id string) error {
	return s.be.Delete(ctx, sha256.Sum256([]byte(id)))
}

// memSignIns keeps sign-ins in memory: one replica only.
type memSignIns struct {
	mu sync.Mutex
	m  map[[sha256.Size]byte]store.ConsoleSession
}

func ended(v store.ConsoleSession, now time.Time, idle, maxAge time.Duration) bool {
	return now.Sub(v.LastSeen) > idle || now.Sub(v.Created) > maxAge
}

func (m *memSignIns) Create(_ context.Context, digest [sha256.Size]byte, s store.ConsoleSession, idle, maxAge time.Duration, max int) error {
	m.mu.Lock()
	defer m.mu.Unlock()
	for k, v := range m.m {
		if ended(v, s.Created, idle, maxAge) {
			delete(m.m, k)
		}
	}
	for len(m.m) >= max {
		var oldest [sha256.Size]byte
		var at time.Time
		for k, v := range m.m {
			if at.IsZero() || v.Created.Before(at) {
				oldest, at = k, v.Created
			}
		}
		delete(m.m, oldest)
	}
	m.m[digest] = s
	return nil
}

func (m *memSignIns) Use(_ context.Context, digest [sha256.Size]byte, now time.Time, idle, maxAge time.Duration) (store.ConsoleSession, bool, error) {
	m.mu.Lock()
	defer m.mu.Unlock()
	v, ok := m.m[digest]
	if !ok {
		return store.ConsoleSession{}, false, nil
	}
	if ended(v, now, idle, maxAge) {
		delete(m.m, digest)
		return store.ConsoleSession{}, false, nil
	}
	if now.After(v.LastSeen) {
		v.LastSeen = now
	}
	m.m[digest] = v
	return v, true, nil
}

func (m *memSignIns) Delete(_ context.Context, digest [sha256.Size]byte) error {
	m.mu.Lock()
	delete(m.m, digest)
	m.mu.Unlock()
	return nil
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
