package gate

import (
	"context"
	"runtime"
	"slices"
	"sync"
)

// Fair slots: a few slots for the CPU-heavy stretches of a call (the
// strict read of an MCP request body, the policy decision and the audit
// form), handed out round-robin between the sessions waiting, so a session
// that sends many requests gets its turn like one that sends few (issue 24
// item 12). A slot is never held across network or database I/O.

// fairGate hands out a fixed number of slots round-robin between the
// sessions waiting for one.
type fairGate struct {
	mu     sync.Mutex
	free   int
	queues map[string][]chan struct{}
	ring   []string // sessions with waiters, in turn order
}

// defaultFairSlots is the number of CPU-heavy stretches that run at once:
// enough to keep every core busy while a few stretches wait on the
// filesystem (the policy resolves paths).
func defaultFairSlots() int { return max(4, 2*runtime.GOMAXPROCS(0)) }

func newFairGate(slots int) *fairGate {
	return &fairGate{free: slots, queues: map[string][]chan struct{}{}}
}

// enter waits for a slot; the returned function gives it back (and may be
// called more than once). It returns ctx's error when ctx ends first.
func (g *fairGate) enter(ctx context.Context, sess string) (func(), error) {
	g.mu.Lock()
	if g.free > 0 && len(g.ring) == 0 {
		g.free--
		g.mu.Unlock()
		return g.leaver(), nil
	}
	ch := make(chan struct{})
	if len(g.queues[sess]) == 0 {
		g.ring = append(g.ring, sess)
	}
	g.queues[sess] = append(g.queues[sess], ch)
	g.mu.Unlock()
	select {
	case <-ch:
		return g.leaver(), nil
	case <-ctx.Done():
		g.mu.Lock()
		defer g.mu.Unlock()
		select {
		case <-ch:
			g.leaveLocked()
		default:
			q := removeChan(g.queues[sess], ch)
			if len(q) == 0 {
				delete(g.queues, sess)
				g.ring = removeSession(g.ring, sess)
			} else {
				g.queues[sess] = q
			}
		}
		return nil, ctx.Err()
	}
}

func (g *fairGate) leaver() func() {
	var once sync.Once
	return func() {
		once.Do(func() {
			g.mu.Lock()
			defer g.mu.Unlock()
			g.leaveLocked()
		})
	}
}

// leaveLocked gives a slot to the first waiter of the session whose turn
// it is, and moves that session to the end of the ring.
func (g *fairGate) leaveLocked() {
	if len(g.ring) == 0 {
		g.free++
		return
	}
	sess := g.ring[0]
	g.ring = g.ring[1:]
	q := g.queues[sess]
	ch := q[0]
	if len(q) == 1 {
		delete(g.queues, sess)
	} else {
		g.queues[sess] = q[1:]
		g.ring = append(g.ring, sess)
	}
	close(ch)
}

func removeSession(ring []string, sess string) []string {
	for i, s := range ring {
		if s == sess {
			return append(ring[:i], ring[i+1:]...)
		}
	}
	return ring
}

// removeChan removes ch from ws.
func removeChan(ws []chan struct{}, ch chan struct{}) []chan struct{} {
	if i := slices.Index(ws, ch); i >= 0 {
		return slices.Delete(ws, i, i+1)
	}
	return ws
}
