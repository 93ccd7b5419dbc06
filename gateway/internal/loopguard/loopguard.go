// Package loopguard is the per-session loop breaker and rate limit of the
// MCP hub. It watches three things of each agent session:
//
//   - calls per minute (a sliding-window estimate over two fixed minutes);
//   - identical calls: the same tool with the same canonical arguments more
//     than IdenticalCalls times within IdenticalWindow;
//   - consecutive denials: ConsecutiveDenials denied calls in a row (a call
//     that runs resets the count).
//
// Crossing a limit trips the session: the call that crossed it is the one
// that asks a human, through the escalation queue, whether the session may
// go on (the hub does that: mcphub/loop.go). While that one escalation is
// pending, the session's other calls are refused at once with a short
// message (they do not wait: a stuck agent would otherwise pile up waiting
// calls). An approval resumes the session with fresh counters; a denial, an
// expiry or no decision at all refuses its calls for Cooldown, after which
// it starts again with fresh counters.
//
// A Guard keeps its state in a Store. NewShared takes one that every
// replica shares (store.LoopBreaker, in Postgres): a session's calls on any
// replica count together, and a pause or cooldown holds on every replica.
// A shared store also derives a pause's end from the pause's escalation
// (State.Pause), so a pause outlives the replica that asked. With New the
// state is in this process's memory (memStore), bounded: a fixed amount per
// session, at most MaxDigests identical-call counters per session and
// MaxSessions sessions (the least recently seen is forgotten first; a
// paused or cooling session is never forgotten before its pause ends).
// A store that cannot be read refuses the call (Verdict Unavailable).
package loopguard

import (
	"context"
	"crypto/sha256"
	"encoding/json"
	"errors"
	"fmt"
	"sync"
	"time"
)

// Defaults applied when the corresponding Config field is zero. They are
// far above what an agent working normally does.
const (
	DefaultCallsPerMinute     = 1200
	DefaultIdenticalCalls     = 30
	DefaultIdenticalWindow    = time.Minute
	DefaultConsecutiveDenials = 40
	DefaultCooldown           = 10 * time.Minute
	DefaultMaxSessions        = 10000
	// MaxDigests bounds the identical-call counters kept per session.
	MaxDigests = 512
)

// Limit names, used in metrics and records.
const (
	LimitRate      = "rate"
	LimitIdentical = "identical"
	LimitDenials   = "denials"
)

// Config holds the limits; zero fields take the defaults.
type Config struct {
	CallsPerMinute     int
	IdenticalCalls     int
	IdenticalWindow    time.Duration
	ConsecutiveDenials int
	Cooldown           time.Duration
	MaxSessions        int
}

// WithDefaults returns c with zero fields set to the defaults; negative
// values are an error naming the field.
func (c Config) WithDefaults() (Config, error) {
	var errs []error
	neg := func(name string, bad bool) {
		if bad {
			errs = append(errs, fmt.Errorf("loop breaker: %s must not be negative", name))
		}
	}
	neg("calls_per_minute", c.CallsPerMinute < 0)
	neg("identical_calls", c.IdenticalCalls < 0)
	neg("identical_window", c.IdenticalWindow < 0)
	neg("consecutive_denials", c.ConsecutiveDenials < 0)
	neg("cooldown", c.Cooldown < 0)
	neg("max_sessions", c.MaxSessions < 0)
	if err := errors.Join(errs...); err != nil {
		return c, err
	}
	if c.CallsPerMinute == 0 {
		c.CallsPerMinute = DefaultCallsPerMinute
	}
	if c.IdenticalCalls == 0 {
		c.IdenticalCalls = DefaultIdenticalCalls
	}
	if c.IdenticalWindow == 0 {
		c.IdenticalWindow = DefaultIdenticalWindow
	}
	if c.ConsecutiveDenials == 0 {
		c.ConsecutiveDenials = DefaultConsecutiveDenials
	}
	if c.Cooldown == 0 {
		c.Cooldown = DefaultCooldown
	}
	if c.MaxSessions == 0 {
		c.MaxSessions = DefaultMaxSessions
	}
	return c, nil
}

// Verdict is what Before says about a call.
type Verdict int

// Verdicts.
const (
	// Proceed: no limit crossed; the call goes through the pipeline.
	Proceed Verdict = iota
	// Trip: this call crossed a limit; the session is now paused and this
	// call must ask a human (Check.Reason), then call Resolve.
	Trip
	// Paused: a pause is pending a human's decision; refuse the call.
	Paused
	// Cooling: an operator stopped the session's calls until Check.Until.
	Cooling
	// Unavailable: the shared state could not be read; refuse the call.
	Unavailable
)

// Check is Before's answer.
type Check struct {
	Verdict Verdict
	// Limit is the limit crossed (Trip, and Paused/Cooling: the one that
	// paused the session).
	Limit string
	// Reason says why, for the operator and the agent ("the agent seems
	// stuck: 40 denied calls in a row in 52s").
	Reason string
	// EscalationID is the pause's escalation (Paused), once known.
	EscalationID string
	// Until is when a cooldown ends (Cooling).
	Until time.Time
}

// Outcome is what became of a call, for the denial count.
type Outcome int

// Outcomes.
const (
	// Ran: the tool ran (successfully or not): resets the denial count.
	Ran Outcome = iota
	// Denied: policy or a human denied it.
	Denied
	// Other: neither (refused for an outage, timed out, ...).
	Other
)

// Session states (State.Status).
const (
	StatusRunning = "running"
	StatusPaused  = "paused"
	StatusCooling = "cooling"
)

// State is one session's loop-breaker state as a Store keeps it.
type State struct {
	Status       string // StatusRunning ("" is running), StatusPaused, StatusCooling
	Limit        string
	Reason       string
	EscalationID string
	PausedAt     time.Time
	Until        time.Time // end of a cooldown
	// Rate: calls in the current and the previous fixed minute.
	Minute    time.Time
	Cur, Prev int
	// Consecutive denials.
	Denials                 int
	FirstDenial, LastDenial time.Time
	// Generation is bumped when the counters start over: identical-call
	// counters of an older generation no longer count.
	Generation int64
	// Pause is the pause's escalation as the store sees it (shared stores).
	Pause PauseRecord
}

// PauseRecord is what a shared store read of a paused session's
// escalation. Known false: the store does not derive it (memory).
type PauseRecord struct {
	Known     bool
	Found     bool   // the escalation's row exists
	Status    string // pending, approved, denied, expired, cancelled
	DecidedAt time.Time
}

// Counter is one identical-call counter.
type Counter struct {
	First time.Time
	N     int
}

// Store keeps sessions' states.
type Store interface {
	// Update loads session's state (zero when new) and, when digest is not
	// nil, its identical-call counter of the state's generation (zero when
	// none), runs fn, and saves both, atomically with respect to every
	// other Update of the session. A new Generation drops every counter of
	// the session.
	Update(ctx context.Context, session string, now time.Time, digest *[32]byte, fn func(*State, *Counter)) error
}

// OutcomeCounter is a Store that counts After's outcome itself, in one
// step, with the same effect as After's Update (Ran: the denial count
// starts over; Denied: one more denial in a row; running sessions only).
type OutcomeCounter interface {
	CountOutcome(ctx context.Context, session string, o Outcome, now time.Time) error
}

// Sweeper is a Store that forgets stale sessions now and then.
type Sweeper interface {
	Sweep(ctx context.Context, now time.Time, identicalWindow time.Duration) error
}

// Timing of a shared store.
const (
	// StoreTimeout bounds one Update.
	StoreTimeout = 3 * time.Second
	// PauseRecordGrace: a shared pause whose escalation row does not exist
	// this long after the trip was abandoned (the replica that asked died
	// before writing it): the session goes on with fresh counters.
	PauseRecordGrace = 2 * time.Minute
	// SweepEvery is how often a Guard asks a Sweeper to forget stale state.
	SweepEvery = 5 * time.Minute
)

// Guard tracks sessions. It is safe for concurrent use.
type Guard struct {
	cfg   Config
	m     Metrics
	store Store

	sweepMu   sync.Mutex
	lastSweep time.Time
}

// Metrics is what the guard reports; nil-safe implementations are fine.
type Metrics interface {
	Trip(limit string)
	Refused(state string)
	Resolved(result string)
}

type noMetrics struct{}

func (noMetrics) Trip(string)     {}
func (noMetrics) Refused(string)  {}
func (noMetrics) Resolved(string) {}

// New returns a guard with cfg (zero fields: defaults) whose state is in
// this process's memory. m may be nil.
func New(cfg Config, m Metrics) (*Guard, error) {
	cfg, err := cfg.WithDefaults()
	if err != nil {
		return nil, err
	}
	return NewShared(cfg, m, newMemStore(cfg.MaxSessions, cfg.IdenticalWindow))
}

// NewShared returns a guard whose state is in s (store.LoopBreaker: every
// replica shares it).
func NewShared(cfg Config, m Metrics, s Store) (*Guard, error) {
	cfg, err := cfg.WithDefaults()
	if err != nil {
		return nil, err
	}
	if s == nil {
		return nil, errors.New("loop breaker: no store")
	}
	if m == nil {
		m = noMetrics{}
	}
	return &Guard{cfg: cfg, m: m, store: s}, nil
}

// Config returns the limits in force.
func (g *Guard) Config() Config { return g.cfg }

// Shared reports whether the state outlives this process (a shared store).
func (g *Guard) Shared() bool {
	_, mem := g.store.(*memStore)
	return !mem
}

// Digest is the identity of a call for the identical-call limit: the tool
// and the canonical JSON of its arguments (encoding/json sorts map keys).
func Digest(tool string, args map[string]any) [32]byte {
	b, err := json.Marshal(args)
	if err != nil {
		b = []byte(err.Error())
	}
	h := sha256.New()
	h.Write([]byte(tool))
	h.Write([]byte{0})
	h.Write(b)
	var d [32]byte
	h.Sum(d[:0])
	return d
}

func (g *Guard) update(session string, now time.Time, digest *[32]byte, fn func(*State, *Counter)) error {
	ctx, cancel := context.WithTimeout(context.Background(), StoreTimeout)
	defer cancel()
	g.maybeSweep(now)
	return g.store.Update(ctx, session, now, digest, fn)
}

// maybeSweep asks a Sweeper to forget stale state, at most every
// SweepEvery, in the background.
func (g *Guard) maybeSweep(now time.Time) {
	sw, ok := g.store.(Sweeper)
	if !ok {
		return
	}
	g.sweepMu.Lock()
	due := now.Sub(g.lastSweep) >= SweepEvery
	if due {
		g.lastSweep = now
	}
	g.sweepMu.Unlock()
	if due {
		go func() {
			ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
			defer cancel()
			_ = sw.Sweep(ctx, now, g.cfg.IdenticalWindow) // best effort; the next sweep retries
		}()
	}
}

// Before counts a call of session (tool is the exposed name, digest its
// Digest) at now and says whether it may proceed.
func (g *Guard) Before(session, tool string, digest [32]byte, now time.Time) Check {
	var chk Check
	if m, ok := g.store.(*memStore); ok {
		// In memory: no timeout, nothing escapes (the hot path of every
		// call; BenchmarkBefore).
		m.update(session, now, &digest, func(s *State, c *Counter) { chk = g.before(s, c, tool, now) })
		return chk
	}
	// What escapes to the store is declared here, so the memory path
	// above allocates none of it.
	d, shared := digest, new(Check)
	err := g.update(session, now, &d, func(s *State, c *Counter) {
		*shared = g.before(s, c, tool, now)
	})
	if err != nil {
		g.m.Refused("unavailable")
		return Check{Verdict: Unavailable, Reason: "the loop breaker's state could not be read"}
	}
	return *shared
}

func (g *Guard) before(s *State, c *Counter, tool string, now time.Time) Check {
	if s.Status == StatusPaused && s.Pause.Known {
		g.derivePause(s, now)
		if s.Status == StatusRunning {
			*c = Counter{} // resumed: fresh counters
		}
	}
	switch s.Status {
	case StatusPaused:
		g.m.Refused("paused")
		return Check{Verdict: Paused, Limit: s.Limit, Reason: s.Reason, EscalationID: s.EscalationID}
	case StatusCooling:
		if now.Before(s.Until) {
			g.m.Refused("cooldown")
			return Check{Verdict: Cooling, Limit: s.Limit, Reason: s.Reason, Until: s.Until}
		}
		reset(s)
		*c = Counter{}
	}

	// Rate: a sliding-window estimate over the current and previous minute.
	minute := now.Truncate(time.Minute)
	switch {
	case minute.Equal(s.Minute):
	case minute.Sub(s.Minute) == time.Minute:
		s.Prev, s.Cur, s.Minute = s.Cur, 0, minute
	default:
		s.Prev, s.Cur, s.Minute = 0, 0, minute
	}
	s.Cur++
	frac := 1 - float64(now.Sub(minute))/float64(time.Minute)
	if rate := float64(s.Prev)*frac + float64(s.Cur); rate > float64(g.cfg.CallsPerMinute) {
		return g.trip(s, now, LimitRate, fmt.Sprintf("the agent is calling tools too fast: about %d calls in the last minute (the limit is %d a minute)", int(rate), g.cfg.CallsPerMinute))
	}

	// Identical calls within the window.
	if c.N == 0 || now.Sub(c.First) > g.cfg.IdenticalWindow {
		*c = Counter{First: now}
	}
	c.N++
	if c.N > g.cfg.IdenticalCalls {
		return g.trip(s, now, LimitIdentical, fmt.Sprintf("the agent seems stuck: %d identical calls to %s in %s", c.N, tool, roundDur(now.Sub(c.First))))
	}

	// Consecutive denials (counted by After).
	if s.Denials >= g.cfg.ConsecutiveDenials {
		return g.trip(s, now, LimitDenials, fmt.Sprintf("the agent seems stuck: %d denied calls in a row in %s", s.Denials, roundDur(s.LastDenial.Sub(s.FirstDenial))))
	}
	return Check{Verdict: Proceed}
}

// derivePause ends a shared pause from its escalation: approved resumes
// the session; denied, expired or cancelled cools it down from the
// decision; no escalation row long after the trip was abandoned.
func (g *Guard) derivePause(s *State, now time.Time) {
	p := s.Pause
	switch {
	case p.Found && p.Status == "approved":
		g.m.Resolved("approved")
		reset(s)
	case p.Found && p.Status != "pending":
		g.m.Resolved("denied")
		s.Status, s.Until = StatusCooling, p.DecidedAt.Add(g.cfg.Cooldown)
	case !p.Found && now.Sub(s.PausedAt) > PauseRecordGrace:
		reset(s)
	}
}

func roundDur(d time.Duration) time.Duration {
	if d < time.Second {
		return d.Round(time.Millisecond)
	}
	return d.Round(time.Second)
}

// trip pauses s.
func (g *Guard) trip(s *State, now time.Time, limit, reason string) Check {
	s.Status, s.Limit, s.Reason, s.EscalationID, s.PausedAt = StatusPaused, limit, reason, "", now
	g.m.Trip(limit)
	return Check{Verdict: Trip, Limit: limit, Reason: reason}
}

// Escalated records the pause's escalation id (shown to refused calls; a
// shared store derives the pause's end from it).
func (g *Guard) Escalated(session, escalationID string) error {
	return g.update(session, time.Time{}, nil, func(s *State, _ *Counter) {
		if s.Status == StatusPaused {
			s.EscalationID = escalationID
		}
	})
}

// Resolve ends session's pause: approved resumes it with fresh counters;
// otherwise its calls are refused until now+Cooldown, which it returns.
func (g *Guard) Resolve(session string, approved bool, now time.Time) time.Time {
	until, _ := g.ResolvePause(session, "", approved, now)
	return until
}

// ResolvePause is Resolve for the pause of escalation escID only ("": any
// pause): another replica may have ended it already (from the escalation)
// and the session may have been paused again since. It returns the end of
// the session's cooldown, if it has one.
func (g *Guard) ResolvePause(session, escID string, approved bool, now time.Time) (time.Time, error) {
	var until time.Time
	err := g.update(session, now, nil, func(s *State, _ *Counter) {
		if s.Status != StatusPaused || (escID != "" && s.EscalationID != escID) {
			if s.Status == StatusCooling {
				until = s.Until
			}
			return
		}
		if approved {
			g.m.Resolved("approved")
			reset(s)
			return
		}
		g.m.Resolved("denied")
		s.Status, s.Until = StatusCooling, now.Add(g.cfg.Cooldown)
		until = s.Until
	})
	if err != nil && !approved && until.IsZero() {
		until = now.Add(g.cfg.Cooldown) // what the agent is told; the escalation keeps the truth
	}
	return until, err
}

// Abandon ends session's pause without a decision (the pause could not be
// put to a human: its record was not written). The session goes on with
// fresh counters; it trips again if it keeps looping.
func (g *Guard) Abandon(session string) { _ = g.AbandonPause(session, "") }

// AbandonPause is Abandon for the pause of escalation escID only ("": any).
func (g *Guard) AbandonPause(session, escID string) error {
	return g.update(session, time.Time{}, nil, func(s *State, _ *Counter) {
		if s.Status == StatusPaused && (escID == "" || s.EscalationID == escID) {
			reset(s)
		}
	})
}

// After counts what became of a call that Before let proceed.
func (g *Guard) After(session string, o Outcome, now time.Time) {
	if o == Other {
		return
	}
	if oc, ok := g.store.(OutcomeCounter); ok {
		ctx, cancel := context.WithTimeout(context.Background(), StoreTimeout)
		defer cancel()
		_ = oc.CountOutcome(ctx, session, o, now) // a lost count is not a decision
		return
	}
	_ = g.update(session, now, nil, func(s *State, _ *Counter) { // a lost count is not a decision
		if s.Status != "" && s.Status != StatusRunning {
			return
		}
		switch o {
		case Ran:
			s.Denials = 0
		case Denied:
			if s.Denials == 0 {
				s.FirstDenial = now
			}
			s.LastDenial = now
			s.Denials++
		}
	})
}

// reset starts s over: running, fresh counters, a new generation.
func reset(s *State) {
	*s = State{Status: StatusRunning, Generation: s.Generation + 1}
}

// Sessions is the number of sessions tracked in memory (for tests and
// metrics; 0 with a shared store).
func (g *Guard) Sessions() int {
	if m, ok := g.store.(*memStore); ok {
		return m.len()
	}
	return 0
}

// memStore keeps states in memory, bounded (see the package comment).
type memStore struct {
	mu       sync.Mutex
	max      int
	window   time.Duration
	sessions map[string]*memSession
}

type memSession struct {
	lastSeen time.Time
	st       State
	digests  map[[32]byte]Counter
	scratch  Counter // the counter an update works on
}

func newMemStore(maxSessions int, window time.Duration) *memStore {
	return &memStore{max: maxSessions, window: window, sessions: map[string]*memSession{}}
}

func (m *memStore) len() int {
	m.mu.Lock()
	defer m.mu.Unlock()
	return len(m.sessions)
}

// Update implements Store.
func (m *memStore) Update(_ context.Context, session string, now time.Time, digest *[32]byte, fn func(*State, *Counter)) error {
	m.update(session, now, digest, fn)
	return nil
}

func (m *memStore) update(session string, now time.Time, digest *[32]byte, fn func(*State, *Counter)) {
	m.mu.Lock()
	defer m.mu.Unlock()
	ms := m.sessions[session]
	if ms == nil {
		if len(m.sessions) >= m.max {
			m.evict(now)
		}
		ms = &memSession{digests: map[[32]byte]Counter{}}
		m.sessions[session] = ms
	}
	if !now.IsZero() {
		ms.lastSeen = now
	}
	c := &ms.scratch // the session's own: held under m.mu, no allocation per call
	*c = Counter{}
	if digest != nil {
		*c = ms.digests[*digest]
	}
	gen := ms.st.Generation
	fn(&ms.st, c)
	if ms.st.Generation != gen {
		clear(ms.digests)
	}
	if digest != nil && c.N > 0 {
		if _, ok := ms.digests[*digest]; !ok && len(ms.digests) >= MaxDigests {
			ms.pruneDigests(now, m.window)
		}
		ms.digests[*digest] = *c
	}
}

// pruneDigests drops expired counters; when none expired, it drops them all
// (a session with MaxDigests distinct calls in a window is not repeating
// one; the rate limit still applies).
func (ms *memSession) pruneDigests(now time.Time, window time.Duration) {
	for k, d := range ms.digests {
		if now.Sub(d.First) > window {
			delete(ms.digests, k)
		}
	}
	if len(ms.digests) >= MaxDigests {
		clear(ms.digests)
	}
}

func (m *memStore) evict(now time.Time) {
	var oldest string
	var oldestSeen time.Time
	for id, s := range m.sessions {
		if s.st.Status == StatusPaused || (s.st.Status == StatusCooling && now.Before(s.st.Until)) {
			continue
		}
		if oldest == "" || s.lastSeen.Before(oldestSeen) {
			oldest, oldestSeen = id, s.lastSeen
		}
	}
	if oldest != "" {
		delete(m.sessions, oldest)
	}
}
