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
// A Guard's memory is bounded: a fixed amount per session, at most
// MaxDigests identical-call counters per session and MaxSessions sessions
// (the least recently seen is forgotten first; a paused or cooling session
// is never forgotten before its pause ends).
package loopguard

import (
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

type state int

const (
	running state = iota
	paused
	cooling
)

type digestCount struct {
	first time.Time
	n     int
}

type sessionState struct {
	lastSeen time.Time
	// rate: calls in the current and the previous fixed minute.
	minute       time.Time
	cur, prev    int
	digests      map[[32]byte]*digestCount
	denials      int
	firstDenial  time.Time
	lastDenial   time.Time
	state        state
	limit        string
	reason       string
	escalationID string
	until        time.Time
}

// Guard tracks sessions. It is safe for concurrent use.
type Guard struct {
	cfg Config
	m   Metrics

	mu       sync.Mutex
	sessions map[string]*sessionState
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

// New returns a guard with cfg (zero fields: defaults). m may be nil.
func New(cfg Config, m Metrics) (*Guard, error) {
	cfg, err := cfg.WithDefaults()
	if err != nil {
		return nil, err
	}
	if m == nil {
		m = noMetrics{}
	}
	return &Guard{cfg: cfg, m: m, sessions: map[string]*sessionState{}}, nil
}

// Config returns the limits in force.
func (g *Guard) Config() Config { return g.cfg }

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

// Before counts a call of session (tool is the exposed name, digest its
// Digest) at now and says whether it may proceed.
func (g *Guard) Before(session, tool string, digest [32]byte, now time.Time) Check {
	g.mu.Lock()
	defer g.mu.Unlock()
	s := g.session(session, now)
	switch s.state {
	case paused:
		g.m.Refused("paused")
		return Check{Verdict: Paused, Limit: s.limit, Reason: s.reason, EscalationID: s.escalationID}
	case cooling:
		if now.Before(s.until) {
			g.m.Refused("cooldown")
			return Check{Verdict: Cooling, Limit: s.limit, Reason: s.reason, Until: s.until}
		}
		s.reset()
	}

	// Rate: a sliding-window estimate over the current and previous minute.
	minute := now.Truncate(time.Minute)
	switch {
	case minute.Equal(s.minute):
	case minute.Sub(s.minute) == time.Minute:
		s.prev, s.cur, s.minute = s.cur, 0, minute
	default:
		s.prev, s.cur, s.minute = 0, 0, minute
	}
	s.cur++
	frac := 1 - float64(now.Sub(minute))/float64(time.Minute)
	if rate := float64(s.prev)*frac + float64(s.cur); rate > float64(g.cfg.CallsPerMinute) {
		return g.trip(s, LimitRate, fmt.Sprintf("the agent is calling tools too fast: about %d calls in the last minute (the limit is %d a minute)", int(rate), g.cfg.CallsPerMinute))
	}

	// Identical calls within the window.
	d := s.digests[digest]
	if d == nil || now.Sub(d.first) > g.cfg.IdenticalWindow {
		if d == nil && len(s.digests) >= MaxDigests {
			s.pruneDigests(now, g.cfg.IdenticalWindow)
		}
		d = &digestCount{first: now}
		s.digests[digest] = d
	}
	d.n++
	if d.n > g.cfg.IdenticalCalls {
		return g.trip(s, LimitIdentical, fmt.Sprintf("the agent seems stuck: %d identical calls to %s in %s", d.n, tool, roundDur(now.Sub(d.first))))
	}

	// Consecutive denials (counted by After).
	if s.denials >= g.cfg.ConsecutiveDenials {
		return g.trip(s, LimitDenials, fmt.Sprintf("the agent seems stuck: %d denied calls in a row in %s", s.denials, roundDur(s.lastDenial.Sub(s.firstDenial))))
	}
	return Check{Verdict: Proceed}
}

func roundDur(d time.Duration) time.Duration {
	if d < time.Second {
		return d.Round(time.Millisecond)
	}
	return d.Round(time.Second)
}

// trip pauses s.
func (g *Guard) trip(s *sessionState, limit, reason string) Check {
	s.state, s.limit, s.reason, s.escalationID = paused, limit, reason, ""
	g.m.Trip(limit)
	return Check{Verdict: Trip, Limit: limit, Reason: reason}
}

// Escalated records the pause's escalation id (shown to refused calls).
func (g *Guard) Escalated(session, escalationID string) {
	g.mu.Lock()
	defer g.mu.Unlock()
	if s := g.sessions[session]; s != nil && s.state == paused {
		s.escalationID = escalationID
	}
}

// Resolve ends session's pause: approved resumes it with fresh counters;
// otherwise its calls are refused until now+Cooldown, which it returns.
func (g *Guard) Resolve(session string, approved bool, now time.Time) time.Time {
	g.mu.Lock()
	defer g.mu.Unlock()
	s := g.session(session, now)
	if approved {
		g.m.Resolved("approved")
		s.reset()
		return time.Time{}
	}
	g.m.Resolved("denied")
	s.state, s.until = cooling, now.Add(g.cfg.Cooldown)
	return s.until
}

// Abandon ends session's pause without a decision (the pause could not be
// put to a human: its record was not written). The session goes on with
// fresh counters; it trips again if it keeps looping.
func (g *Guard) Abandon(session string) {
	g.mu.Lock()
	defer g.mu.Unlock()
	if s := g.sessions[session]; s != nil && s.state == paused {
		s.reset()
	}
}

// After counts what became of a call that Before let proceed.
func (g *Guard) After(session string, o Outcome, now time.Time) {
	g.mu.Lock()
	defer g.mu.Unlock()
	s := g.sessions[session]
	if s == nil || s.state != running {
		return
	}
	switch o {
	case Ran:
		s.denials = 0
	case Denied:
		if s.denials == 0 {
			s.firstDenial = now
		}
		s.lastDenial = now
		s.denials++
	}
}

func (s *sessionState) reset() {
	*s = sessionState{lastSeen: s.lastSeen, digests: map[[32]byte]*digestCount{}}
}

// pruneDigests drops expired counters; when none expired, it drops them all
// (a session with MaxDigests distinct calls in a window is not repeating
// one; the rate limit still applies).
func (s *sessionState) pruneDigests(now time.Time, window time.Duration) {
	for k, d := range s.digests {
		if now.Sub(d.first) > window {
			delete(s.digests, k)
		}
	}
	if len(s.digests) >= MaxDigests {
		clear(s.digests)
	}
}

// session returns session's state, creating it (and forgetting the least
// recently seen running session when there are MaxSessions).
func (g *Guard) session(id string, now time.Time) *sessionState {
	s := g.sessions[id]
	if s == nil {
		if len(g.sessions) >= g.cfg.MaxSessions {
			g.evict(now)
		}
		s = &sessionState{digests: map[[32]byte]*digestCount{}}
		g.sessions[id] = s
	}
	s.lastSeen = now
	return s
}

func (g *Guard) evict(now time.Time) {
	var oldest string
	var oldestSeen time.Time
	for id, s := range g.sessions {
		if s.state == paused || (s.state == cooling && now.Before(s.until)) {
			continue
		}
		if oldest == "" || s.lastSeen.Before(oldestSeen) {
			oldest, oldestSeen = id, s.lastSeen
		}
	}
	if oldest != "" {
		delete(g.sessions, oldest)
	}
}

// Sessions is the number of sessions tracked (for tests and metrics).
func (g *Guard) Sessions() int {
	g.mu.Lock()
	defer g.mu.Unlock()
	return len(g.sessions)
}
