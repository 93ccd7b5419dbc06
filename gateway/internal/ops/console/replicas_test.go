package console

import (
	"context"
	"net/http"
	"net/url"
	"testing"
	"time"

	"ironcurtain.dev/gateway/internal/store"
	"ironcurtain.dev/gateway/internal/store/pgtest"
)

// replicaConsole is one replica's console on db, with the shared sign-ins.
func replicaConsole(t *testing.T, db *pgtest.DB, now func() time.Time) *Console {
	t.Helper()
	c, _ := pgConsoleWith(t, db, func(d *Deps) {
		d.SignIns, d.Now = store.ConsoleSessions{Pool: db.Pool}, now
	})
	return c
}

// TestSignInWorksOnEveryReplica: two consoles on one database behave as
// one: a sign-in on one works on the other (same CSRF token), a sign-out
// on either ends it on both, and the idle and maximum lifetimes hold for
// both.
func TestSignInWorksOnEveryReplica(t *testing.T) {
	db := pgtest.New(t, pgtest.Migrated())
	now := time.Now().UTC().Truncate(time.Millisecond)
	clock := func() time.Time { return now }
	a, b := replicaConsole(t, db, clock), replicaConsole(t, db, clock)

	ca := (&world{c: a}).signIn(t)
	cb := &client{t: t, h: b.Handler(), cookie: ca.cookie, csrf: ca.csrf}
	if res := cb.get("/ui/escalations"); res.Code != http.StatusOK {
		t.Fatalf("replica b with replica a's cookie: %d", res.Code)
	}
	if got := b.sessionsCSRF(t, cb); got != ca.csrf {
		t.Fatal("replica b sees another CSRF token")
	}
	// A form posted to b with the CSRF token a rendered is accepted.
	if res := cb.post("/ui/timeline/verify", url.Values{"csrf": {ca.csrf}, "session": {"nobody"}}, ""); res.Code != http.StatusOK {
		t.Fatalf("replica b refused replica a's CSRF token: %d", res.Code)
	}

	// Idle: used on b just now, so a's use later counts from there.
	now = now.Add(SessionIdle - time.Second)
	if res := cb.get("/ui/escalations"); res.Code != http.StatusOK {
		t.Fatalf("before the idle timeout: %d", res.Code)
	}
	now = now.Add(SessionIdle - time.Second)
	if res := ca.get("/ui/escalations"); res.Code != http.StatusOK {
		t.Fatalf("replica a after replica b kept the session alive: %d", res.Code)
	}
	now = now.Add(SessionIdle + time.Second)
	if res := cb.get("/ui/escalations"); res.Code != http.StatusSeeOther {
		t.Fatalf("after the idle timeout: %d", res.Code)
	}

	// Sign-out on b ends the session on a.
	ca = (&world{c: a}).signIn(t)
	cb = &client{t: t, h: b.Handler(), cookie: ca.cookie, csrf: ca.csrf}
	if res := cb.post("/ui/signout", url.Values{"csrf": {ca.csrf}}, ""); res.Code != http.StatusSeeOther {
		t.Fatalf("sign-out on b: %d", res.Code)
	}
	if res := ca.get("/ui/escalations"); res.Code != http.StatusSeeOther {
		t.Fatalf("replica a after sign-out on b: %d", res.Code)
	}

	// Maximum lifetime, whatever the use.
	ca = (&world{c: a}).signIn(t)
	cb = &client{t: t, h: b.Handler(), cookie: ca.cookie}
	for range int(SessionMax/SessionIdle) + 1 {
		now = now.Add(SessionIdle - time.Minute)
		ca.get("/ui/escalations")
	}
	if res := cb.get("/ui/escalations"); res.Code != http.StatusSeeOther {
		t.Fatalf("past the maximum lifetime on replica b: %d", res.Code)
	}
}

// TestSignInStoreDownRefuses: with the sign-in store unreachable a page is
// refused (503), never served.
func TestSignInStoreDownRefuses(t *testing.T) {
	db := pgtest.New(t, pgtest.Migrated())
	c := replicaConsole(t, db, time.Now)
	cl := (&world{c: c}).signIn(t)
	if _, err := db.Pool.Exec(context.Background(), `ALTER TABLE console_sessions RENAME TO console_sessions_gone`); err != nil {
		t.Fatal(err)
	}
	if res := cl.get("/ui/escalations"); res.Code != http.StatusServiceUnavailable {
		t.Fatalf("page with the store down: %d, want 503", res.Code)
	}
	anon := &client{t: t, h: c.Handler()}
	if res := anon.post("/ui/signin", url.Values{"token": {operatorToken}}, ""); res.Code != http.StatusServiceUnavailable || len(res.Result().Cookies()) != 0 {
		t.Fatalf("sign-in with the store down: %d", res.Code)
	}
}
