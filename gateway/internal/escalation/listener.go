package escalation

import (
	"context"
	"log/slog"
	"sync"
	"time"

	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgxpool"
)

// listener holds one LISTEN connection per gateway and wakes the waiters of
// the escalation named in each notification. After a reconnect it wakes
// every waiter, since notifications sent meanwhile were lost; a waiter whose
// re-read fails retries it (PG.wait) rather than giving up.
type listener struct {
	pool *pgxpool.Pool
	log  *slog.Logger
	m    *metrics

	mu      sync.Mutex
	waiters map[string]map[chan struct{}]struct{}
	ready   chan struct{} // closed once the first LISTEN succeeded
	once    sync.Once
}

func newListener(pool *pgxpool.Pool, log *slog.Logger, m *metrics) *listener {
	return &listener{pool: pool, log: log, m: m, waiters: map[string]map[chan struct{}]struct{}{}, ready: make(chan struct{})}
}

// subscribe returns a channel signalled when id may have changed.
func (l *listener) subscribe(id string) (<-chan struct{}, func()) {
	ch := make(chan struct{}, 1)
	l.mu.Lock()
	if l.waiters[id] == nil {
		l.waiters[id] = map[chan struct{}]struct{}{}
	}
	l.waiters[id][ch] = struct{}{}
	l.mu.Unlock()
	return ch, func() {
		l.mu.Lock()
		delete(l.waiters[id], ch)
		if len(l.waiters[id]) == 0 {
			delete(l.waiters, id)
		}
		l.mu.Unlock()
	}
}

func (l *listener) wake(id string) {
	l.mu.Lock()
	defer l.mu.Unlock()
	for ch := range l.waiters[id] {
		select {
		case ch <- struct{}{}:
		default:
		}
	}
	for ch := range l.waiters[watchAll] { // Watch: every change
		select {
		case ch <- struct{}{}:
		default:
		}
	}
}

func (l *listener) wakeAll() {
	l.mu.Lock()
	defer l.mu.Unlock()
	for _, set := range l.waiters {
		for ch := range set {
			select {
			case ch <- struct{}{}:
			default:
			}
		}
	}
}

// run keeps a LISTEN connection open until ctx ends, reconnecting with
// jittered exponential back-off (retryBase doubling to listenMax), reset
// once a connection has listened. The outage is logged when it starts and
// when it ends, not once per attempt.
func (l *listener) run(ctx context.Context) {
	b := newBackoff(retryBase, listenMax)
	var down time.Time // when the connection was lost (zero: listening)
	attempts := 0
	for ctx.Err() == nil {
		listened, err := l.listenOnce(ctx, func() {
			if !down.IsZero() {
				l.log.Info("escalation listener reconnected", "after", time.Since(down).Round(time.Millisecond), "attempts", attempts)
			}
			down, attempts = time.Time{}, 0
			b.reset()
		})
		if ctx.Err() != nil {
			return
		}
		if listened || down.IsZero() {
			down = time.Now()
			l.m.listenerReconnects.Inc()
			l.log.Warn("escalation listener lost its connection; reconnecting with back-off", "err", err)
		}
		attempts++
		select {
		case <-ctx.Done():
			return
		case <-time.After(b.delay()):
		}
	}
}

// listenOnce connects, listens and delivers notifications until the
// connection fails. listening runs once LISTEN succeeded; listened reports
// whether it did.
func (l *listener) listenOnce(ctx context.Context, listening func()) (listened bool, err error) {
	cctx, cancel := context.WithTimeout(ctx, attemptTimeout)
	conn, err := pgx.ConnectConfig(cctx, l.pool.Config().ConnConfig.Copy())
	if err != nil {
		cancel()
		return false, err
	}
	defer conn.Close(context.WithoutCancel(ctx))
	_, err = conn.Exec(cctx, "LISTEN "+notifyChannel)
	cancel()
	if err != nil {
		return false, err
	}
	l.once.Do(func() { close(l.ready) })
	listening()
	l.wakeAll() // anything decided while we were not listening
	for {
		n, err := conn.WaitForNotification(ctx)
		if err != nil {
			return true, err
		}
		l.wake(n.Payload)
	}
}
