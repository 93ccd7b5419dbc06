package mcphub

import (
	"context"
	"errors"
	"net/http"
	"sync"
	"time"

	"github.com/mark3labs/mcp-go/server"
)

// Admission: how much of the gateway one agent session can hold at once
// (issue 24 item 12). Four looping connections of one agent cut every
// other session from 302 to 21 calls/s; eight wide calls at once took the
// gateway to 2 GB. Two bounds:
//
//   - inflight: a per-agent-session cap on POST requests in flight (taken
//     before the body is read, so a queued request holds no body); more
//     wait in the session's own queue, and past MaxQueuedCalls they are
//     refused at once (HTTP 429, a clear JSON-RPC error).
//   - fair: a few slots for the CPU-heavy stretches of a request (the strict
//     read of the body, the policy decision and the audit form), handed out
//     round-robin between the sessions waiting (the gate's: gate.EnterFair).

// Defaults of Config.MaxCallsInFlight and Config.MaxQueuedCalls.
const (
	DefaultMaxCallsInFlight = 8
	DefaultMaxQueuedCalls   = 32
	// DefaultRefusalDelay is Config.RefusalDelay when zero.
	DefaultRefusalDelay = 250 * time.Millisecond
)

// errBusy refuses a request when its session's queue is full.
var errBusy = errors.New("too many requests in flight for this agent session")

// inflight caps the requests in flight per agent session.
type inflight struct {
	mu       sync.Mutex
	max      int
	maxQueue int
	m        map[string]*sessionSlots
}

type sessionSlots struct {
	n       int
	waiters []chan struct{}
}

func newInflight(max, maxQueue int) *inflight {
	return &inflight{max: max, maxQueue: maxQueue, m: map[string]*sessionSlots{}}
}

// acquire takes one of the session's slots, waiting in its queue; it
// returns errBusy when the queue is full and ctx's error when ctx ends
// first. release must be called exactly once after a nil error.
func (f *inflight) acquire(ctx context.Context, sess string) (release func(), err error) {
	f.mu.Lock()
	s := f.m[sess]
	if s == nil {
		s = &sessionSlots{}
		f.m[sess] = s
	}
	if s.n < f.max {
		s.n++
		f.mu.Unlock()
		return f.releaser(sess), nil
	}
	if len(s.waiters) >= f.maxQueue {
		f.mu.Unlock()
		return nil, errBusy
	}
	ch := make(chan struct{})
	s.waiters = append(s.waiters, ch)
	f.mu.Unlock()
	select {
	case <-ch: // the slot was handed over (n unchanged)
		return f.releaser(sess), nil
	case <-ctx.Done():
		f.mu.Lock()
		defer f.mu.Unlock()
		select {
		case <-ch: // handed over just now: pass it on
			f.releaseLocked(sess)
		default:
			s.waiters = removeWaiter(s.waiters, ch)
		}
		return nil, ctx.Err()
	}
}

func (f *inflight) releaser(sess string) func() {
	var once sync.Once
	return func() {
		once.Do(func() {
			f.mu.Lock()
			defer f.mu.Unlock()
			f.releaseLocked(sess)
		})
	}
}

func (f *inflight) releaseLocked(sess string) {
	s := f.m[sess]
	if len(s.waiters) > 0 {
		ch := s.waiters[0]
		s.waiters = s.waiters[1:]
		close(ch)
		return
	}
	s.n--
	if s.n == 0 {
		delete(f.m, sess)
	}
}

// inFlight reports the session's requests in flight and queued (tests).
func (f *inflight) inFlight(sess string) (running, queued int) {
	f.mu.Lock()
	defer f.mu.Unlock()
	if s := f.m[sess]; s != nil {
		return s.n, len(s.waiters)
	}
	return 0, 0
}

func removeWaiter(ws []chan struct{}, ch chan struct{}) []chan struct{} {
	for i, w := range ws {
		if w == ch {
			return append(ws[:i], ws[i+1:]...)
		}
	}
	return ws
}

// withAdmissionDefaults fills the zero admission, session and shape
// settings with their defaults.
func withAdmissionDefaults(cfg Config) Config {
	def := func(v *int, d int) {
		if *v == 0 {
			*v = d
		}
	}
	def(&cfg.MaxSessions, DefaultMaxSessions)
	def(&cfg.MaxSessionsPerToken, DefaultMaxSessionsPerToken)
	def(&cfg.MaxCallsInFlight, DefaultMaxCallsInFlight)
	def(&cfg.MaxQueuedCalls, DefaultMaxQueuedCalls)
	if cfg.RefusalDelay == 0 {
		cfg.RefusalDelay = DefaultRefusalDelay
	}
	reqBytes := int(cfg.MaxRequestBytes)
	if reqBytes == 0 {
		reqBytes = DefaultMaxRequestBytes
	}
	l := &cfg.JSONLimits
	def(&l.MaxBytes, reqBytes)
	def(&l.MaxString, reqBytes)
	def(&l.MaxDepth, DefaultJSONMaxDepth)
	def(&l.MaxMembers, DefaultJSONMaxMembers)
	def(&l.MaxElements, DefaultJSONMaxElements)
	return cfg
}

// startSweeper ends idle MCP sessions every quarter of the idle TTL (at
// least every second): their owner entries here, and mcp-go's state
// through a DELETE of the session, as a client would send it.
func (h *Hub) startSweeper() {
	every := max(h.cfg.SessionIdleTTL/4, time.Second)
	var mu sync.Mutex
	stopped := false
	var t *time.Timer
	t = time.AfterFunc(every, func() {
		h.sweepIdle(h.now())
		mu.Lock()
		defer mu.Unlock()
		if !stopped {
			t.Reset(every)
		}
	})
	h.stopSweep = func() {
		mu.Lock()
		defer mu.Unlock()
		stopped = true
		t.Stop()
	}
}

// sweepIdle ends the MCP sessions idle at now and returns how many.
func (h *Hub) sweepIdle(now time.Time) int {
	gone := h.owners.sweep(now)
	for _, id := range gone {
		h.endMCPSession(id)
	}
	if len(gone) > 0 {
		h.log.Info("idle MCP sessions ended", "sessions", len(gone), "idle_ttl", h.cfg.SessionIdleTTL)
	}
	return len(gone)
}

// endMCPSession drops mcp-go's state of an expired session.
func (h *Hub) endMCPSession(id string) {
	r, err := http.NewRequest(http.MethodDelete, "/mcp", nil)
	if err != nil {
		return
	}
	r.Header.Set(server.HeaderKeySessionID, id)
	h.http.ServeHTTP(discardWriter{h: http.Header{}}, r)
}

// discardWriter is the response writer of the hub's own DELETEs.
type discardWriter struct{ h http.Header }

func (d discardWriter) Header() http.Header         { return d.h }
func (d discardWriter) Write(b []byte) (int, error) { return len(b), nil }
func (d discardWriter) WriteHeader(int)             {}
