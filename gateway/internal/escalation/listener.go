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
// every waiter, since notifications sent meanwhile were lost.
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
// backoff.
func (l *listener) run(ctx context.Context) {
	backoff := 100 * time.Millisecond
	for ctx.Err() == nil {
		err := l.listenOnce(ctx)
		if ctx.Err() != nil {
			return
		}
		l.m.listenerReconnects.Inc()
		l.log.Warn("escalation listener lost its connection; reconnecting", "err", err, "in", backoff)
		select {
		case <-ctx.Done():
			return
		case <-time.After(backoff):
		}
		backoff = min(backoff*2, 5*time.Second)
	}
}

func (l *listener) listenOnce(ctx context.Context) error {
	conn, err := pgx.ConnectConfig(ctx, l.pool.Config().ConnConfig.Copy())
	if err != nil {
		return err
	}
	defer conn.Close(context.WithoutCancel(ctx))
	if _, err := conn.Exec(ctx, "LISTEN "+notifyChannel); err != nil {
		return err
	}
	l.once.Do(func() { close(l.ready) })
	l.wakeAll() // anything decided while we were not listening
	for {
		n, err := conn.WaitForNotification(ctx)
		if err != nil {
			return err
		}
		l.wake(n.Payload)
	}
}
