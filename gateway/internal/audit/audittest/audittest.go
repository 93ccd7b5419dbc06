// Package audittest is an in-memory audit sink for tests: it keeps every
// event it is given, in order, and reads them back by kind.
package audittest

import (
	"context"
	"sync"

	"ironcurtain.dev/gateway/internal/audit"
)

// Sink records audit events in memory; the zero value is ready to use and
// safe for concurrent use.
type Sink struct {
	mu     sync.Mutex
	events []audit.Event
	fail   error
}

var _ audit.Sink = (*Sink)(nil)

// Record keeps e; it fails (keeping nothing) only while FailWith set an error.
func (s *Sink) Record(_ context.Context, e audit.Event) error {
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.fail != nil {
		return s.fail
	}
	s.events = append(s.events, e)
	return nil
}

// FailWith makes every later Record return err, as a store that is down
// does; nil makes Record keep events again.
func (s *Sink) FailWith(err error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.fail = err
}

// Events returns a copy of the recorded events, in order.
func (s *Sink) Events() []audit.Event {
	s.mu.Lock()
	defer s.mu.Unlock()
	return append([]audit.Event(nil), s.events...)
}

// Decisions returns the recorded decisions, in order.
func (s *Sink) Decisions() []*audit.ToolCallDecision { return of[*audit.ToolCallDecision](s) }

// Egress returns the recorded egress events, in order.
func (s *Sink) Egress() []*audit.EgressEvent { return of[*audit.EgressEvent](s) }

// Outcome returns the outcome of the call callID, or nil.
func (s *Sink) Outcome(callID string) *audit.ToolCallOutcome {
	for _, o := range of[*audit.ToolCallOutcome](s) {
		if o.CallID == callID {
			return o
		}
	}
	return nil
}

// of returns the recorded events of type T, in order.
func of[T audit.Event](s *Sink) []T {
	var out []T
	for _, e := range s.Events() {
		if v, ok := e.(T); ok {
			out = append(out, v)
		}
	}
	return out
}
