package pgtest_test

import (
	"context"
	"os"
	"testing"
	"time"

	"ironcurtain.dev/gateway/internal/store"
	"ironcurtain.dev/gateway/internal/store/pgtest"
)

func TestMain(m *testing.M) { os.Exit(pgtest.Main(m)) }

func TestFreshDatabases(t *testing.T) {
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	a := pgtest.New(t)
	b := pgtest.New(t, pgtest.Migrated())
	if a.Name == b.Name {
		t.Fatalf("two tests share database %s", a.Name)
	}
	if _, err := a.Pool.Exec(ctx, `CREATE TABLE only_in_a (x int)`); err != nil {
		t.Fatal(err)
	}
	var n int
	if err := b.Pool.QueryRow(ctx, `SELECT count(*) FROM pg_class WHERE relname = 'only_in_a'`).Scan(&n); err != nil || n != 0 {
		t.Fatalf("database b sees a's table: n=%d err=%v", n, err)
	}
	if err := store.CheckSchema(ctx, b.Pool); err != nil {
		t.Fatalf("migrated database is not current: %v", err)
	}
	if err := store.CheckSchema(ctx, a.Pool); err == nil {
		t.Fatal("empty database reported as current")
	}
}

func TestDroppedAfterTest(t *testing.T) {
	var name string
	t.Run("inner", func(t *testing.T) { name = pgtest.New(t).Name })
	srv := pgtest.Shared(t)
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	pool, err := store.Open(ctx, srv.AdminDSN())
	if err != nil {
		t.Fatal(err)
	}
	defer pool.Close()
	var n int
	if err := pool.QueryRow(ctx, `SELECT count(*) FROM pg_database WHERE datname = $1`, name).Scan(&n); err != nil || n != 0 {
		t.Fatalf("database %s still exists after its test (n=%d, err=%v)", name, n, err)
	}
}

// TestStopStart kills the server and brings it back on the same address:
// the pool recovers. Not parallel: it stops the shared server.
func TestStopStart(t *testing.T) {
	db := pgtest.New(t, pgtest.Migrated())
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	defer cancel()
	if _, err := db.Pool.Exec(ctx, `INSERT INTO sessions (id) VALUES ('before')`); err != nil {
		t.Fatal(err)
	}
	if err := db.Server.Stop(ctx); err != nil {
		t.Fatal(err)
	}
	qctx, qcancel := context.WithTimeout(ctx, 3*time.Second)
	err := db.Pool.Ping(qctx)
	qcancel()
	if err == nil {
		t.Fatal("ping succeeded while the server is stopped")
	}
	if err := db.Server.Start(ctx); err != nil {
		t.Fatal(err)
	}
	var n int
	if err := db.Pool.QueryRow(ctx, `SELECT count(*) FROM sessions WHERE id = 'before'`).Scan(&n); err != nil || n != 1 {
		t.Fatalf("after restart: n=%d err=%v (committed row lost or pool did not recover)", n, err)
	}
}
