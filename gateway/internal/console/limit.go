package console

import (
	"net"
	"net/http"
	"sync"
	"time"
)

// Sign-in failures allowed per client address in failWindow; beyond them
// sign-in answers 429 until the window passes. Operator tokens are long
// random secrets; this only keeps a guesser from trying fast.
const (
	maxFailures  = 10
	failWindow   = time.Minute
	maxFailHosts = 10000
)

type failLimiter struct {
	mu    sync.Mutex
	hosts map[string]*failCount
	now   func() time.Time
}

type failCount struct {
	n     int
	since time.Time
}

func newFailLimiter(now func() time.Time) *failLimiter {
	return &failLimiter{hosts: map[string]*failCount{}, now: now}
}

func clientHost(r *http.Request) string {
	h, _, err := net.SplitHostPort(r.RemoteAddr)
	if err != nil {
		return r.RemoteAddr
	}
	return h
}

// blocked reports whether the client has used up its failures.
func (l *failLimiter) blocked(host string) bool {
	l.mu.Lock()
	defer l.mu.Unlock()
	f := l.hosts[host]
	if f == nil {
		return false
	}
	if l.now().Sub(f.since) > failWindow {
		delete(l.hosts, host)
		return false
	}
	return f.n >= maxFailures
}

// fail counts a failed sign-in.
func (l *failLimiter) fail(host string) {
	l.mu.Lock()
	defer l.mu.Unlock()
	now := l.now()
	f := l.hosts[host]
	if f == nil || now.Sub(f.since) > failWindow {
		if len(l.hosts) >= maxFailHosts {
			for k, v := range l.hosts {
				if now.Sub(v.since) > failWindow {
					delete(l.hosts, k)
				}
			}
			if len(l.hosts) >= maxFailHosts {
				clear(l.hosts) // many clients failing at once: start over
			}
		}
		f = &failCount{since: now}
		l.hosts[host] = f
	}
	f.n++
}
