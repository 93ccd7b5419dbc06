package egress

import (
	"context"
	"fmt"
	"sort"
	"sync"
	"time"

	"github.com/google/uuid"

	"ironcurtain.dev/gateway/internal/audit"
)

// Unauthenticated requests must not cost a database row each (anyone who can reach the port
// could write about 1,000 rows a second): they are counted per source address and written as
// one row per source per window.
const (
	authAggWindow     = time.Minute
	authAggMaxSources = 1024 // beyond this many sources in one window, the rest are counted as "other sources"
	authAggOther      = "other sources"
)

// authFailures aggregates auth failures per client address.
type authFailures struct {
	mu      sync.Mutex
	sources map[string]*authAgg
}

type authAgg struct {
	count       int
	first, last time.Time
	lastReason  string
}

func newAuthFailures() *authFailures { return &authFailures{sources: map[string]*authAgg{}} }

// add counts one failure of source.
func (a *authFailures) add(source, reason string, at time.Time) {
	a.mu.Lock()
	defer a.mu.Unlock()
	s, ok := a.sources[source]
	if !ok {
		if len(a.sources) >= authAggMaxSources {
			source = authAggOther
			s = a.sources[source]
		}
		if s == nil {
			s = &authAgg{first: at}
			a.sources[source] = s
		}
	}
	s.count++
	s.last = at
	s.lastReason = reason
}

// take returns the window's events (one per source, sorted by source) and starts a new one.
func (a *authFailures) take() []*audit.EgressEvent {
	a.mu.Lock()
	sources := a.sources
	a.sources = map[string]*authAgg{}
	a.mu.Unlock()
	names := make([]string, 0, len(sources))
	for s := range sources {
		names = append(names, s)
	}
	sort.Strings(names)
	out := make([]*audit.EgressEvent, 0, len(names))
	for _, src := range names {
		s := sources[src]
		ev := audit.NewEgressEvent(audit.EgressFields{ID: uuid.NewString(), Time: s.first, Kind: "auth-failures"})
		ev.Decision, ev.Rule = decisionDeny, ruleAuth
		ev.Reason = fmt.Sprintf("%d proxy requests without a valid agent token from %s between %s and %s (last: %s)",
			s.count, src, s.first.UTC().Format(time.RFC3339), s.last.UTC().Format(time.RFC3339), s.lastReason)
		ev.Duration = s.last.Sub(s.first)
		out = append(out, ev)
	}
	return out
}

// flushAuthFailures writes the window's aggregated rows.
func (p *Proxy) flushAuthFailures() {
	for _, ev := range p.authFails.take() {
		ctx, cancel := context.WithTimeout(context.Background(), recordTimeout)
		err := p.sink.Record(ctx, ev)
		cancel()
		if err != nil {
			p.metrics.auditFailures.Inc()
			p.log.Error("egress: recording aggregated auth failures failed", "error", err.Error(), "summary", ev.Reason)
			continue
		}
		p.log.Warn("egress: unauthenticated proxy requests", "summary", ev.Reason)
	}
}

// runAuthFlusher flushes every window until ctx ends, then once more.
func (p *Proxy) runAuthFlusher(ctx context.Context, every time.Duration) {
	t := time.NewTicker(every)
	defer t.Stop()
	for {
		select {
		case <-ctx.Done():
			p.flushAuthFailures()
			return
		case <-t.C:
			p.flushAuthFailures()
		}
	}
}
