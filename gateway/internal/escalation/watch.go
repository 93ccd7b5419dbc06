package escalation

import (
	"context"
	"fmt"
)

// watchAll is the listener key of Watch subscriptions: escalation ids are
// UUIDs (or call-chosen ids without "*"), so it names no escalation.
const watchAll = "*"

// Watch returns a channel that is signalled whenever any escalation may have
// changed: opened, decided, expired or cancelled, on any replica (the same
// LISTEN/NOTIFY that wakes waiting calls), and after the listener reconnects
// (notifications sent meanwhile were lost). Signals coalesce: a watcher that
// is slow to read sees one signal for many changes and should re-read what it
// shows. stop ends the subscription.
func (p *PG) Watch() (changed <-chan struct{}, stop func()) {
	return p.listener.subscribe(watchAll)
}

// notifyOpened announces a new pending escalation to watchers (waiters of
// other escalations ignore it). A failure is logged: watchers also re-read
// on their own schedule, and no waiting call depends on it.
func (p *PG) notifyOpened(ctx context.Context, id string) {
	if _, err := p.pool.Exec(ctx, `SELECT pg_notify($1, $2)`, notifyChannel, id); err != nil {
		p.log.Warn("announcing a new escalation to watchers", "escalation", id, "err", fmt.Errorf("notifying: %w", err))
	}
}
