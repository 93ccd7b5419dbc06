package gate

import (
	"context"
	"errors"
	"fmt"
	"sync"
	"time"
)

// DefaultShutdownGrace is how long Shutdown lets calls that already run on a
// server finish before it cancels them. With the HTTP listeners' shutdown
// around it, a gateway stop stays well within the 10 s Docker and Compose
// give before SIGKILL.
const DefaultShutdownGrace = 4 * time.Second

// errShuttingDown is the cause of a call's cancelled wait for a human.
var errShuttingDown = errors.New("the gateway is shutting down")

// lifecycle tracks the calls in the pipeline and the two stages of a
// shutdown: stopping (waits for a human end at once, no new call starts on a
// server) and aborting (calls still running on a server are cancelled).
type lifecycle struct {
	stopping context.Context
	stop     context.CancelFunc
	aborting context.Context
	abort    context.CancelFunc

	mu    sync.Mutex
	n     int           // calls in the pipeline
	empty chan struct{} // closed when n drops to 0 (nil: nobody waits)
}

func newLifecycle() *lifecycle {
	l := &lifecycle{}
	l.stopping, l.stop = context.WithCancel(context.Background())
	l.aborting, l.abort = context.WithCancel(context.Background())
	return l
}

// enter counts a call in; the returned func counts it out.
func (l *lifecycle) enter() (leave func()) {
	l.mu.Lock()
	l.n++
	l.mu.Unlock()
	return func() {
		l.mu.Lock()
		defer l.mu.Unlock()
		l.n--
		if l.n == 0 && l.empty != nil {
			close(l.empty)
			l.empty = nil
		}
	}
}

// idle returns a channel closed once no call is in the pipeline.
func (l *lifecycle) idle() <-chan struct{} {
	l.mu.Lock()
	defer l.mu.Unlock()
	if l.n == 0 {
		ch := make(chan struct{})
		close(ch)
		return ch
	}
	if l.empty == nil {
		l.empty = make(chan struct{})
	}
	return l.empty
}

func (l *lifecycle) running() int {
	l.mu.Lock()
	defer l.mu.Unlock()
	return l.n
}

// Shutdown stops the gate for a gateway stop, promptly:
//
//  1. every call waiting for a human stops waiting at once: its escalation
//     stays pending (it survives for the next gateway), its outcome is
//     recorded (refused, "gateway shutting down; escalation <id> is still
//     pending") and the agent is told to retry after an operator approved;
//     allowed calls that have not started on a server are refused;
//  2. calls already running on a server get Config.ShutdownGrace to finish,
//     then they are cancelled and their outcome recorded.
//
// It returns once every call has recorded its outcome, or with ctx's error.
func (g *Gate) Shutdown(ctx context.Context) error {
	g.life.stop()
	grace := time.NewTimer(g.cfg.ShutdownGrace)
	defer grace.Stop()
	select {
	case <-g.life.idle():
	case <-grace.C:
		g.log.Warn("tool calls still running after the shutdown grace; cancelling them", "calls", g.life.running(), "grace", g.cfg.ShutdownGrace)
	case <-ctx.Done():
	}
	g.life.abort()
	select {
	case <-g.life.idle():
		return nil
	case <-ctx.Done():
		return fmt.Errorf("%d tool calls did not record their outcome: %w", g.life.running(), ctx.Err())
	}
}

// InFlight returns the number of calls in the pipeline, outcome records
// still being written included.
func (g *Gate) InFlight() int { return g.life.running() }
