package console

import (
	"context"
	"net"
	"net/http"
	"sync"
	"time"
)

// Sign-in failures are slowed, never turned into a lock-out: a valid
// operator token always signs in at once (behind a proxy every operator
// shares one address, and a guesser there must not lock them out). A failed
// sign-in's answer waits failDelay(n), where n counts the failures from the
// same address with no failWindow-long pause between them: the first
// freeFailures answer at once (typos), then 250 ms, doubling up to 4 s.
// Over all addresses the same holds with globalFreeFailures per failWindow
// (many addresses guessing at once are slowed too). At most maxHeld failed
// sign-ins wait at once; beyond that a failure is answered 429 at once
// (goroutines and connections stay bounded). Operator tokens are long random secrets and are compared in
// constant time (opsapi.Operators.Authenticate); this only keeps a guesser
// slow and the log readable.
const (
	freeFailures = 3
	// globalFreeFailures: failures per failWindow over all addresses
	// before every failure waits.
	globalFreeFailures = 30
	baseDelay          = 250 * time.Millisecond
	maxDelay           = 4 * time.Second
	failWindow         = time.Minute
	maxHeld            = 32
	maxFailHosts       = 10000
)

// failDelay is how long the answer to an address's n-th failure waits.
func failDelay(n int) time.Duration { return backoff(n, freeFailures) }

// backoff is 0 for the first free failures, then baseDelay doubling up to
// maxDelay.
func backoff(n, free int) time.Duration {
	if n <= free {
		return 0
	}
	d := baseDelay
	for i := free + 1; i < n && d < maxDelay; i++ {
		d *= 2
	}
	return min(d, maxDelay)
}

type failLimiter struct {
	mu    sync.Mutex
	hosts map[string]*failCount
	now   func() time.Time
	held  chan struct{} // one slot per failure waiting out its delay
	// all counts the failures over every address (its since: the start of
	// the current failWindow).
	all failCount
	// sleep waits d or until ctx ends (tests replace it).
	sleep func(ctx context.Context, d time.Duration)
}

type failCount struct {
	n    int
	last time.Time
}

func newFailLimiter(now func() time.Time) *failLimiter {
	return &failLimiter{hosts: map[string]*failCount{}, now: now, held: make(chan struct{}, maxHeld), sleep: sleepCtx}
}

func sleepCtx(ctx context.Context, d time.Duration) {
	t := time.NewTimer(d)
	defer t.Stop()
	select {
	case <-t.C:
	case <-ctx.Done():
	}
}

func clientHost(r *http.Request) string {
	h, _, err := net.SplitHostPort(r.RemoteAddr)
	if err != nil {
		return r.RemoteAddr
	}
	return h
}

// fail counts a failed sign-in from host and returns how long its answer
// waits.
func (l *failLimiter) fail(host string) time.Duration {
	l.mu.Lock()
	defer l.mu.Unlock()
	now := l.now()
	f := l.hosts[host]
	if f == nil || now.Sub(f.last) > failWindow {
		if f == nil && len(l.hosts) >= maxFailHosts {
			for k, v := range l.hosts {
				if now.Sub(v.last) > failWindow {
					delete(l.hosts, k)
				}
			}
			if len(l.hosts) >= maxFailHosts {
				clear(l.hosts) // many clients failing at once: start over (maxHeld still bounds the waits)
			}
		}
		f = &failCount{}
		l.hosts[host] = f
	}
	f.n++
	f.last = now
	if now.Sub(l.all.last) > failWindow {
		l.all = failCount{last: now}
	}
	l.all.n++
	return max(failDelay(f.n), backoff(l.all.n, globalFreeFailures))
}

// wait holds a failed sign-in's answer for d. It reports false, at once,
// when maxHeld answers are already waiting (the caller answers 429).
func (l *failLimiter) wait(ctx context.Context, d time.Duration) bool {
	if d <= 0 {
		return true
	}
	select {
	case l.held <- struct{}{}:
	default:
		return false
	}
	defer func() { <-l.held }()
	l.sleep(ctx, d)
	return true
}
