package escalation

import (
	"context"
	"errors"
	"io"
	"log/slog"
	"testing"
	"time"

	"github.com/jackc/pgx/v5"
	"github.com/prometheus/client_golang/prometheus/testutil"
)

func retryPG(t *testing.T) *PG {
	t.Helper()
	m, err := newMetrics(nil)
	if err != nil {
		t.Fatal(err)
	}
	return &PG{log: slog.New(slog.DiscardHandler), m: m, closing: make(chan struct{})}
}

// failing returns an op that fails with err n times, then succeeds, and
// records the deadline of each attempt's context.
func failing(n int, err error, deadlines *[]time.Duration) func(context.Context) error {
	return func(ctx context.Context) error {
		if d, ok := ctx.Deadline(); ok && deadlines != nil {
			*deadlines = append(*deadlines, time.Until(d))
		}
		if n > 0 {
			n--
			return err
		}
		return nil
	}
}

func TestRetryUntil(t *testing.T) {
	broken := io.ErrUnexpectedEOF
	tests := []struct {
		name      string
		op        func(context.Context) error
		deadline  time.Duration
		want      error // nil: success
		wantTries float64
		maxTime   time.Duration
		minTime   time.Duration
	}{
		{name: "success at once", op: failing(0, broken, nil), deadline: time.Minute, wantTries: 0, maxTime: 100 * time.Millisecond},
		{name: "a blip is retried", op: failing(3, broken, nil), deadline: time.Minute, wantTries: 3, maxTime: 2 * time.Second},
		{name: "a final error is not retried", op: failing(3, pgx.ErrNoRows, nil), deadline: time.Minute, want: pgx.ErrNoRows, wantTries: 0, maxTime: 100 * time.Millisecond},
		{name: "an outage past the deadline refuses at the deadline", op: failing(1<<30, broken, nil), deadline: 700 * time.Millisecond,
			want: ErrDatabaseUnavailable, minTime: 650 * time.Millisecond, maxTime: 1500 * time.Millisecond},
		{name: "a passed deadline still gets one attempt", op: failing(0, broken, nil), deadline: -time.Minute, wantTries: 0, maxTime: 100 * time.Millisecond},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			p := retryPG(t)
			start := time.Now()
			err := p.retryUntil(context.Background(), start.Add(tt.deadline), nil, "test", tt.op)
			took := time.Since(start)
			if tt.want == nil && err != nil || tt.want != nil && !errors.Is(err, tt.want) {
				t.Fatalf("err = %v, want %v", err, tt.want)
			}
			if tt.want == ErrDatabaseUnavailable && !errors.Is(err, broken) {
				t.Fatalf("the cause is lost: %v", err)
			}
			if got := testutil.ToFloat64(p.m.readRetries); tt.want != ErrDatabaseUnavailable && got != tt.wantTries {
				t.Fatalf("retries = %v, want %v", got, tt.wantTries)
			}
			if took > tt.maxTime || took < tt.minTime {
				t.Fatalf("took %s, want between %s and %s", took, tt.minTime, tt.maxTime)
			}
		})
	}
}

// TestRetryAttemptDeadline: each attempt is bounded (a frozen database
// does not answer), by attemptTimeout or a second past the escalation's
// deadline, and never by less than a second.
func TestRetryAttemptDeadline(t *testing.T) {
	tests := []struct {
		name     string
		deadline time.Duration
		min, max time.Duration
	}{
		{name: "far deadline", deadline: time.Hour, min: attemptTimeout - 100*time.Millisecond, max: attemptTimeout},
		{name: "near deadline", deadline: time.Second, min: 1900 * time.Millisecond, max: 2 * time.Second},
		{name: "passed deadline", deadline: -time.Hour, min: 900 * time.Millisecond, max: time.Second},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			var ds []time.Duration
			if err := retryPG(t).retryUntil(context.Background(), time.Now().Add(tt.deadline), nil, "test", failing(0, nil, &ds)); err != nil {
				t.Fatal(err)
			}
			if len(ds) != 1 || ds[0] < tt.min || ds[0] > tt.max {
				t.Fatalf("attempt deadlines %v, want one in [%s, %s]", ds, tt.min, tt.max)
			}
		})
	}
}

func TestRetryStops(t *testing.T) {
	broken := io.ErrUnexpectedEOF
	t.Run("caller gone", func(t *testing.T) {
		ctx, cancel := context.WithCancel(context.Background())
		time.AfterFunc(200*time.Millisecond, cancel)
		err := retryPG(t).retryUntil(ctx, time.Now().Add(time.Minute), nil, "test", failing(1<<30, broken, nil))
		if !errors.Is(err, context.Canceled) {
			t.Fatalf("err = %v, want context.Canceled", err)
		}
	})
	t.Run("gateway closing", func(t *testing.T) {
		p := retryPG(t)
		time.AfterFunc(200*time.Millisecond, func() { close(p.closing) })
		if err := p.retryUntil(context.Background(), time.Now().Add(time.Minute), nil, "test", failing(1<<30, broken, nil)); !errors.Is(err, ErrShuttingDown) {
			t.Fatalf("err = %v, want ErrShuttingDown", err)
		}
	})
	t.Run("a wake cuts the back-off short", func(t *testing.T) {
		p := retryPG(t)
		wake := make(chan struct{}, 1)
		// Fail until the back-off reaches 1-2 s, waking during the last
		// failed attempt: the next attempt follows at once.
		var at []time.Time
		op := func(context.Context) error {
			at = append(at, time.Now())
			if len(at) == 8 {
				wake <- struct{}{}
			}
			if len(at) <= 8 {
				return broken
			}
			return nil
		}
		if err := p.retryUntil(context.Background(), time.Now().Add(time.Minute), wake, "test", op); err != nil {
			t.Fatal(err)
		}
		if gap := at[8].Sub(at[7]); gap > 500*time.Millisecond {
			t.Fatalf("attempt 9 followed attempt 8 after %s (the back-off there is 1-2 s): the wake did not cut it short", gap)
		}
		if gap := at[7].Sub(at[6]); gap < 500*time.Millisecond {
			t.Fatalf("attempt 8 followed attempt 7 after %s: no back-off", gap)
		}
	})
}
