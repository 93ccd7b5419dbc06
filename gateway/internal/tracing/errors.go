package tracing

import (
	"log/slog"
	"sync"
	"time"

	"go.opentelemetry.io/otel"
)

// DefaultErrorEvery is how often export errors are logged at most.
const DefaultErrorEvery = time.Minute

// errorLog turns the SDK's errors (an unreachable collector fails every
// batch) into at most one JSON log line per interval, with the count of
// the errors it summarises, instead of otel's default plain-text line per
// error on stderr.
type errorLog struct {
	log   *slog.Logger
	every time.Duration
	now   func() time.Time

	mu         sync.Mutex
	last       time.Time
	suppressed int
}

func (e *errorLog) Handle(err error) {
	e.mu.Lock()
	now := e.now()
	if !e.last.IsZero() && now.Sub(e.last) < e.every {
		e.suppressed++
		e.mu.Unlock()
		return
	}
	n := e.suppressed
	e.last, e.suppressed = now, 0
	e.mu.Unlock()
	e.log.Warn("traces: exporting spans failed; spans are dropped, the gateway goes on", "err", err, "errors_since_last_line", n)
}

// LogErrors sends the OpenTelemetry SDK's errors to log, at most one line
// per every (DefaultErrorEvery when zero). Setup's caller installs it.
func LogErrors(log *slog.Logger, every time.Duration) {
	otel.SetErrorHandler(newErrorLog(log, every, time.Now))
}

func newErrorLog(log *slog.Logger, every time.Duration, now func() time.Time) *errorLog {
	if every <= 0 {
		every = DefaultErrorEvery
	}
	return &errorLog{log: log, every: every, now: now}
}
