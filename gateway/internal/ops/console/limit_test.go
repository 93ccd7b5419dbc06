package console

import (
	"context"
	"net/http"
	"net/http/httptest"
	"net/url"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"
)

// delays records the sign-in waits instead of sleeping; block, when set,
// holds every wait until it is closed.
type delays struct {
	mu    sync.Mutex
	got   []time.Duration
	block chan struct{}
}

func (d *delays) sleep(ctx context.Context, dur time.Duration) {
	d.mu.Lock()
	d.got = append(d.got, dur)
	b := d.block
	d.mu.Unlock()
	if b != nil {
		select {
		case <-b:
		case <-ctx.Done():
		}
	}
}

func (d *delays) all() []time.Duration {
	d.mu.Lock()
	defer d.mu.Unlock()
	return append([]time.Duration(nil), d.got...)
}

// signInFrom posts the sign-in form from addr (a same-origin browser).
func signInFrom(w *world, addr, token string) int {
	req := httptest.NewRequest(http.MethodPost, "http://ops.test/ui/signin", strings.NewReader(url.Values{"token": {token}}.Encode()))
	req.Header.Set("Content-Type", "application/x-www-form-urlencoded")
	req.Header.Set("Origin", "http://ops.test")
	req.RemoteAddr = addr
	rec := httptest.NewRecorder()
	w.c.Handler().ServeHTTP(rec, req)
	return rec.Code
}

// TestValidTokenSignsInAfterFailures: failed sign-ins from an address (a
// proxy every operator shares) never lock the real operator out; the
// failures' own answers are slowed.
func TestValidTokenSignsInAfterFailures(t *testing.T) {
	w := newWorld(t, "x")
	now := t0
	w.c.now = func() time.Time { return now }
	w.c.failures.now = w.c.now
	d := &delays{}
	w.c.failures.sleep = d.sleep
	const proxy = "10.0.0.1:5000"
	for i := range 20 {
		if code := signInFrom(w, proxy, "wrong-token-wrong-token-wrong"); code != http.StatusUnauthorized {
			t.Fatalf("failure %d: status %d, want 401", i+1, code)
		}
		now = now.Add(time.Second)
	}
	if code := signInFrom(w, proxy, operatorToken); code != http.StatusSeeOther {
		t.Fatalf("the valid token after 20 failures from its address: status %d, want 303", code)
	}
	got := d.all()
	if len(got) != 20-freeFailures {
		t.Fatalf("%d failures waited, want %d (the first %d answer at once): %v", len(got), 20-freeFailures, freeFailures, got)
	}
	if got[0] != baseDelay || got[1] != 2*baseDelay || got[len(got)-1] != maxDelay {
		t.Fatalf("delays %v: want %v, %v, ... up to %v", got, baseDelay, 2*baseDelay, maxDelay)
	}
}

func TestFailDelay(t *testing.T) {
	for _, tc := range []struct {
		n    int
		want time.Duration
	}{
		{1, 0}, {freeFailures, 0},
		{freeFailures + 1, baseDelay}, {freeFailures + 2, 2 * baseDelay}, {freeFailures + 3, 4 * baseDelay},
		{freeFailures + 5, maxDelay}, {1000, maxDelay}, {1 << 30, maxDelay},
	} {
		if got := failDelay(tc.n); got != tc.want {
			t.Errorf("failDelay(%d) = %v, want %v", tc.n, got, tc.want)
		}
	}
}

// TestSignInFailuresSlowed: the delay is per address and ends after a
// failWindow without failures; another address is not slowed.
func TestSignInFailuresSlowed(t *testing.T) {
	w := newWorld(t, "x")
	now := t0
	w.c.now = func() time.Time { return now }
	w.c.failures.now = w.c.now
	d := &delays{}
	w.c.failures.sleep = d.sleep
	for range freeFailures + 2 {
		signInFrom(w, "10.0.0.1:1", "wrong-token-wrong-token-wrong")
	}
	if got := d.all(); len(got) != 2 || got[1] != 2*baseDelay {
		t.Fatalf("delays %v, want [%v %v]", got, baseDelay, 2*baseDelay)
	}
	signInFrom(w, "10.0.0.2:1", "wrong-token-wrong-token-wrong")
	if got := d.all(); len(got) != 2 {
		t.Fatalf("another address's first failure waited: %v", got)
	}
	now = now.Add(failWindow + time.Second)
	signInFrom(w, "10.0.0.1:1", "wrong-token-wrong-token-wrong")
	if got := d.all(); len(got) != 2 {
		t.Fatalf("after a quiet window the count did not start over: %v", got)
	}
}

// TestSignInWaitsBounded: at most maxHeld failures wait at once over all
// addresses; the next failure is answered 429 at once, and a valid token
// still signs in.
func TestSignInWaitsBounded(t *testing.T) {
	w := newWorld(t, "x")
	d := &delays{block: make(chan struct{})}
	w.c.failures.sleep = d.sleep
	for range freeFailures {
		signInFrom(w, "10.0.0.1:1", "wrong-token-wrong-token-wrong")
	}
	var wg sync.WaitGroup
	codes := make(chan int, maxHeld)
	for range maxHeld {
		wg.Add(1)
		go func() {
			defer wg.Done()
			codes <- signInFrom(w, "10.0.0.1:1", "wrong-token-wrong-token-wrong")
		}()
	}
	deadline := time.Now().Add(10 * time.Second)
	for len(d.all()) < maxHeld {
		if time.Now().After(deadline) {
			t.Fatalf("only %d failures waiting", len(d.all()))
		}
		time.Sleep(time.Millisecond)
	}
	// Another address's failure: past the global free failures, it would
	// wait, and no slot is free.
	if code := signInFrom(w, "10.0.0.9:1", "wrong-token-wrong-token-wrong"); code != http.StatusTooManyRequests {
		t.Fatalf("a failure beyond %d waiting: %d, want 429", maxHeld, code)
	}
	if code := signInFrom(w, "10.0.0.1:1", operatorToken); code != http.StatusSeeOther {
		t.Fatalf("the valid token while %d failures wait: %d, want 303", maxHeld, code)
	}
	close(d.block)
	wg.Wait()
	close(codes)
	for c := range codes {
		if c != http.StatusUnauthorized {
			t.Fatalf("a held failure answered %d, want 401", c)
		}
	}
}

// TestSignInFailuresSlowedGlobally: many addresses failing at once are
// slowed too (each one's first failures are free, their sum is not); a
// valid token still signs in at once.
func TestSignInFailuresSlowedGlobally(t *testing.T) {
	w := newWorld(t, "x")
	now := t0
	w.c.now = func() time.Time { return now }
	w.c.failures.now = w.c.now
	d := &delays{}
	w.c.failures.sleep = d.sleep
	for i := range globalFreeFailures + 2 {
		signInFrom(w, "10.1.0."+strconv.Itoa(i)+":1", "wrong-token-wrong-token-wrong")
	}
	if got := d.all(); len(got) != 2 || got[0] != baseDelay || got[1] != 2*baseDelay {
		t.Fatalf("delays %v, want [%v %v] after %d free failures over all addresses", got, baseDelay, 2*baseDelay, globalFreeFailures)
	}
	if code := signInFrom(w, "10.1.0.1:1", operatorToken); code != http.StatusSeeOther {
		t.Fatalf("the valid token: %d", code)
	}
	if got := d.all(); len(got) != 2 {
		t.Fatalf("a valid sign-in waited: %v", got)
	}
	now = now.Add(failWindow + time.Second)
	signInFrom(w, "10.1.9.9:1", "wrong-token-wrong-token-wrong")
	if got := d.all(); len(got) != 2 {
		t.Fatalf("after a quiet window the global count did not start over: %v", got)
	}
}
