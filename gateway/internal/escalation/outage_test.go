package escalation

import (
	"context"
	"errors"
	"fmt"
	"io"
	"net"
	"os"
	"strconv"
	"testing"
	"time"

	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgconn"
	"github.com/moby/moby/client"
	"github.com/testcontainers/testcontainers-go"

	"ironcurtain.dev/gateway/internal/store/pgtest"
)

// decideEventually approves like an operator who retries while the
// database comes back (the ops API answers 503 meanwhile).
func decideEventually(t *testing.T, p *PG, ctx context.Context, id string) {
	t.Helper()
	deadline := time.Now().Add(60 * time.Second)
	for {
		_, err := p.Decide(ctx, id, Decision{Approve: true, By: "alice", Reason: "after the outage"})
		if err == nil {
			return
		}
		if time.Now().After(deadline) {
			t.Fatalf("approving after the outage: %v", err)
		}
		time.Sleep(100 * time.Millisecond)
	}
}

// approveAndResume approves id as decideEventually does and waits for the
// call waiting on it (done) to resume approved; it returns the call's result.
func approveAndResume(t *testing.T, p *PG, ctx context.Context, id string, done <-chan outcome) Result {
	t.Helper()
	decideEventually(t, p, ctx, id)
	select {
	case o := <-done:
		if o.err != nil || !o.res.Approved {
			t.Fatalf("outcome = %+v, %v; want approved", o.res, o.err)
		}
		return o.res
	case <-time.After(60 * time.Second):
		t.Fatal("the waiter did not resume after the approval")
	}
	return Result{}
}

// stopFor kills the shared Postgres server, keeps it down for d, and starts
// it again. It registers a cleanup that starts the server should the test
// fail in between, so later tests get a database.
func stopFor(t *testing.T, db *pgtest.DB, d time.Duration, during func()) {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	defer cancel()
	if err := db.Server.Stop(ctx); err != nil {
		t.Fatal(err)
	}
	started := false
	t.Cleanup(func() {
		if !started {
			_ = db.Server.Start(context.Background())
		}
	})
	down := time.Now()
	if during != nil {
		during()
	}
	time.Sleep(time.Until(down.Add(d)))
	if err := db.Server.Start(ctx); err != nil {
		t.Fatal(err)
	}
	started = true
	t.Logf("database down for %s (killed, restarted, ready)", time.Since(down).Round(time.Millisecond))
}

// TestWaiterSurvivesDatabaseOutage: Postgres is killed while a call waits
// for a human and comes back well before the escalation's deadline. The
// waiter neither gives up during the outage (its reads fail and are
// retried) nor when the listener reconnects and wakes it (the re-read hits
// a broken pooled connection); the approval given after the outage runs
// the call. Before the fix the first failed read refused the call and left
// the escalation pending with nobody waiting.
func TestWaiterSurvivesDatabaseOutage(t *testing.T) {
	tests := []struct {
		name string
		poll time.Duration
	}{
		{name: "waiter polls during the outage", poll: 100 * time.Millisecond},
		{name: "waiter woken by the listener reconnect", poll: time.Hour},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			db := pgtest.New(t, pgtest.Migrated())
			ctx := testCtx(t)
			p := newTestPG(t, db, Config{Timeout: 3 * time.Minute, PollInterval: tt.poll})
			id, done := escalateAsync(t, p, ctx, req("c1"))
			time.Sleep(200 * time.Millisecond) // the waiter is in its loop
			stopFor(t, db, 1500*time.Millisecond, func() {
				select {
				case o := <-done:
					t.Fatalf("the waiter gave up during the outage: %+v", o)
				case <-time.After(time.Second):
				}
			})
			select {
			case o := <-done:
				t.Fatalf("the waiter gave up when the database came back: %+v", o)
			case <-time.After(500 * time.Millisecond):
			}
			if res := approveAndResume(t, p, ctx, id, done); res.Status != StatusApproved || res.ID != id {
				t.Fatalf("outcome = %+v; want approved", res)
			}
			e, err := p.Get(ctx, id)
			if err != nil {
				t.Fatal(err)
			}
			if e.ConsumedByCallID != "c1" {
				t.Fatalf("consumed_by_call_id = %q, want c1 (the call runs on the approval)", e.ConsumedByCallID)
			}
		})
	}
}

// TestWaiterSurvivesTerminatedBackends: every connection of the gateway to
// its database is terminated (what a failover or pgbouncer restart does);
// the waiter re-reads through a broken pooled connection and retries.
func TestWaiterSurvivesTerminatedBackends(t *testing.T) {
	db := pgtest.New(t, pgtest.Migrated())
	ctx := testCtx(t)
	p := newTestPG(t, db, Config{Timeout: 3 * time.Minute, PollInterval: 50 * time.Millisecond})
	id, done := escalateAsync(t, p, ctx, req("c1"))
	admin, err := pgx.Connect(ctx, db.Server.AdminDSN())
	if err != nil {
		t.Fatal(err)
	}
	defer admin.Close(ctx)
	for i := 0; i < 5; i++ {
		if _, err := admin.Exec(ctx, `SELECT pg_terminate_backend(pid) FROM pg_stat_activity
WHERE datname = $1 AND pid <> pg_backend_pid()`, db.Name); err != nil {
			t.Fatal(err)
		}
		time.Sleep(100 * time.Millisecond)
		select {
		case o := <-done:
			t.Fatalf("the waiter gave up after its connections were terminated: %+v", o)
		default:
		}
	}
	approveAndResume(t, p, ctx, id, done)
}

// TestWaiterRefusedWhenDatabaseOutlastsDeadline: the database stays down
// past the escalation's deadline. The call is refused with
// ErrDatabaseUnavailable (no earlier: it waited out its time), and once the
// database is back the sweeper expires the row, so nothing stays pending.
func TestWaiterRefusedWhenDatabaseOutlastsDeadline(t *testing.T) {
	db := pgtest.New(t, pgtest.Migrated())
	ctx := testCtx(t)
	const timeout = 3 * time.Second
	p := newTestPG(t, db, Config{Timeout: timeout, PollInterval: 100 * time.Millisecond, SweepInterval: 200 * time.Millisecond})
	opened := time.Now()
	id, done := escalateAsync(t, p, ctx, req("c1"))
	var o outcome
	stopFor(t, db, timeout+attemptTimeout+2*time.Second, func() {
		select {
		case o = <-done:
		case <-time.After(timeout + attemptTimeout + time.Second):
			t.Fatal("the waiter did not end at its deadline while the database was down")
		}
	})
	if !errors.Is(o.err, ErrDatabaseUnavailable) {
		t.Fatalf("outcome = %+v, %v; want ErrDatabaseUnavailable", o.res, o.err)
	}
	if waited := o.at.Sub(opened); waited < timeout-500*time.Millisecond {
		t.Fatalf("refused after %s, before the escalation's deadline (%s)", waited, timeout)
	}
	deadline := time.Now().Add(30 * time.Second)
	for {
		e, err := p.Get(ctx, id)
		if err == nil && e.Status == StatusExpired {
			break
		}
		if time.Now().After(deadline) {
			t.Fatalf("escalation after the outage = %+v, %v; want expired by the sweeper", e.Status, err)
		}
		time.Sleep(100 * time.Millisecond)
	}
}

// pauseFor freezes the shared Postgres container (docker pause: connections
// stay open, nothing answers) for d, running during meanwhile, then thaws
// it. A cleanup thaws it should the test fail in between.
func pauseFor(t *testing.T, d time.Duration, during func()) {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	defer cancel()
	cli, err := testcontainers.NewDockerClientWithOpts(ctx)
	if err != nil {
		t.Fatalf("docker client: %v", err)
	}
	defer cli.Close()
	list, err := cli.ContainerList(ctx, client.ContainerListOptions{Filters: make(client.Filters).
		Add("label", pgtest.LabelKey).Add("label", pgtest.LabelPID+"="+strconv.Itoa(os.Getpid()))})
	if err != nil || len(list.Items) != 1 {
		t.Fatalf("finding this test binary's Postgres container: %d found, %v", len(list.Items), err)
	}
	id := list.Items[0].ID
	if _, err := cli.ContainerPause(ctx, id, client.ContainerPauseOptions{}); err != nil {
		t.Fatalf("pausing Postgres: %v", err)
	}
	thawed := false
	thaw := func() {
		if !thawed {
			thawed = true
			if _, err := cli.ContainerUnpause(context.Background(), id, client.ContainerUnpauseOptions{}); err != nil {
				t.Errorf("unpausing Postgres: %v", err)
			}
		}
	}
	defer thaw()
	paused := time.Now()
	if during != nil {
		during()
	}
	time.Sleep(time.Until(paused.Add(d)))
	thaw()
	t.Logf("database paused for %s", time.Since(paused).Round(time.Millisecond))
}

// TestWaiterSurvivesPausedDatabase: the database freezes (docker pause)
// while a call waits; its reads hang, time out after attemptTimeout and are
// retried; the approval given after the thaw runs the call.
func TestWaiterSurvivesPausedDatabase(t *testing.T) {
	db := pgtest.New(t, pgtest.Migrated())
	ctx := testCtx(t)
	p := newTestPG(t, db, Config{Timeout: 3 * time.Minute, PollInterval: 100 * time.Millisecond})
	id, done := escalateAsync(t, p, ctx, req("c1"))
	time.Sleep(200 * time.Millisecond)
	pauseFor(t, attemptTimeout+2*time.Second, func() {
		select {
		case o := <-done:
			t.Fatalf("the waiter gave up while the database was paused: %+v", o)
		case <-time.After(attemptTimeout + time.Second):
		}
	})
	approveAndResume(t, p, ctx, id, done)
}

// TestWaiterRefusedAtDeadlineWhilePaused: the database stays frozen past
// the escalation's deadline. The call is refused at the deadline (bounded
// by one attempt's timeout), not when the database thaws: before the fix a
// read on a frozen database hung until then.
func TestWaiterRefusedAtDeadlineWhilePaused(t *testing.T) {
	db := pgtest.New(t, pgtest.Migrated())
	ctx := testCtx(t)
	const timeout = 3 * time.Second
	p := newTestPG(t, db, Config{Timeout: timeout, PollInterval: 100 * time.Millisecond})
	opened := time.Now()
	_, done := escalateAsync(t, p, ctx, req("c1"))
	var o outcome
	pauseFor(t, timeout+attemptTimeout+5*time.Second, func() {
		select {
		case o = <-done:
		case <-time.After(timeout + 2*time.Second):
			t.Fatal("the waiter did not end at its deadline while the database was frozen")
		}
	})
	if !errors.Is(o.err, ErrDatabaseUnavailable) {
		t.Fatalf("outcome = %+v, %v; want ErrDatabaseUnavailable", o.res, o.err)
	}
	t.Logf("refused %s after opening (timeout %s)", o.at.Sub(opened).Round(time.Millisecond), timeout)
}

func TestBackoffDelays(t *testing.T) {
	tests := []struct {
		name      string
		base, max time.Duration
		steps     int
	}{
		{name: "waiter", base: retryBase, max: retryMax, steps: 12},
		{name: "listener", base: retryBase, max: listenMax, steps: 12},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			b := newBackoff(tt.base, tt.max)
			want := tt.base
			for i := 0; i < tt.steps; i++ {
				d := b.delay()
				if d < want/2 || d > want {
					t.Fatalf("step %d: delay %s outside [%s, %s]", i, d, want/2, want)
				}
				want = min(want*2, tt.max)
			}
			b.reset()
			if d := b.delay(); d > tt.base {
				t.Fatalf("after reset: delay %s > base %s", d, tt.base)
			}
		})
	}
	// Jitter: many waiters do not retry in step.
	seen := map[time.Duration]bool{}
	for i := 0; i < 50; i++ {
		seen[newBackoff(time.Second, time.Second).delay()] = true
	}
	if len(seen) < 10 {
		t.Fatalf("only %d distinct delays in 50 draws: no jitter", len(seen))
	}
}

func TestTransient(t *testing.T) {
	tests := []struct {
		name string
		err  error
		want bool
	}{
		{name: "connection refused", err: &net.OpError{Op: "dial", Err: errors.New("connection refused")}, want: true},
		{name: "broken connection", err: fmt.Errorf("reading: %w", io.ErrUnexpectedEOF), want: true},
		{name: "attempt timeout", err: context.DeadlineExceeded, want: true},
		{name: "admin shutdown", err: &pgconn.PgError{Code: "57P01"}, want: true},
		{name: "cannot connect now", err: &pgconn.PgError{Code: "57P03"}, want: true},
		{name: "connection exception", err: &pgconn.PgError{Code: "08006"}, want: true},
		{name: "too many connections", err: &pgconn.PgError{Code: "53300"}, want: true},
		{name: "serialization failure", err: &pgconn.PgError{Code: "40001"}, want: true},
		{name: "undefined table", err: &pgconn.PgError{Code: "42P01"}, want: false},
		{name: "no rows", err: pgx.ErrNoRows, want: false},
		{name: "not found", err: fmt.Errorf("x: %w", ErrNotFound), want: false},
		{name: "cancelled", err: context.Canceled, want: false},
		{name: "nil", err: nil, want: false},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			if got := transient(tt.err); got != tt.want {
				t.Fatalf("transient(%v) = %v, want %v", tt.err, got, tt.want)
			}
		})
	}
}
