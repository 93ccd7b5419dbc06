package escalation

import (
	"testing"
	"time"

	"ironcurtain.dev/gateway/internal/store/pgtest"
)

// TestWatchSeesOpenAndDecide: a watcher (the console's live view) is
// signalled when an escalation is opened and when it is decided, through
// the same LISTEN/NOTIFY as the waiters.
func TestWatchSeesOpenAndDecide(t *testing.T) {
	db := pgtest.New(t, pgtest.Migrated())
	p := newTestPG(t, db, Config{Timeout: time.Minute, PollInterval: time.Hour})
	ctx := testCtx(t)
	changed, stop := p.Watch()
	defer stop()

	expect := func(what string) {
		t.Helper()
		select {
		case <-changed:
		case <-time.After(5 * time.Second):
			t.Fatalf("no watch signal after %s", what)
		}
	}
	start := time.Now()
	id, done := escalateAsync(t, p, ctx, req("call-watch"))
	expect("opening")
	t.Logf("open → watch signal: %s", time.Since(start))
	if _, err := p.Decide(ctx, id, Decision{Approve: true, By: "alice"}); err != nil {
		t.Fatal(err)
	}
	expect("deciding")
	if o := <-done; o.err != nil || !o.res.Approved {
		t.Fatalf("escalate: %+v", o)
	}
	stop()
	select {
	case <-changed:
		// a signal sent before stop may still be buffered; none after
	default:
	}
}
