package store_test

import (
	"context"
	"errors"
	"os"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/jackc/pgx/v5/pgconn"
	"github.com/jackc/pgx/v5/pgxpool"

	"ironcurtain.dev/gateway/internal/store"
	"ironcurtain.dev/gateway/internal/store/pgtest"
	"ironcurtain.dev/migrations"
)

func TestMain(m *testing.M) { os.Exit(pgtest.Main(m)) }

func testCtx(t *testing.T) context.Context {
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	t.Cleanup(cancel)
	return ctx
}

// TestMigrateUpDownUp is the CI check: every migration applies, reverts
// completely and applies again.
func TestMigrateUpDownUp(t *testing.T) {
	db := pgtest.New(t)
	ctx := testCtx(t)
	latest, err := migrations.Latest()
	if err != nil {
		t.Fatal(err)
	}

	if err := store.CheckSchema(ctx, db.Pool); !errors.Is(err, store.ErrSchemaMissing) {
		t.Fatalf("CheckSchema on an empty database = %v, want ErrSchemaMissing", err)
	}
	up, err := store.MigrateUp(ctx, db.Pool, 0)
	if err != nil {
		t.Fatalf("up: %v", err)
	}
	if len(up) != latest {
		t.Fatalf("up applied %d migrations, want %d", len(up), latest)
	}
	if err := store.CheckSchema(ctx, db.Pool); err != nil {
		t.Fatalf("CheckSchema after up: %v", err)
	}
	tablesUp := userRelations(t, db)

	down, err := store.MigrateDown(ctx, db.Pool, latest)
	if err != nil {
		t.Fatalf("down: %v", err)
	}
	if len(down) != latest {
		t.Fatalf("down reverted %d migrations, want %d", len(down), latest)
	}
	if left := userRelations(t, db); len(left) != 1 || left[0] != "ironcurtain_schema_version" {
		t.Fatalf("after down these relations are left: %v", left)
	}
	if _, err := store.MigrateUp(ctx, db.Pool, 0); err != nil {
		t.Fatalf("up again: %v", err)
	}
	if again := userRelations(t, db); strings.Join(again, ",") != strings.Join(tablesUp, ",") {
		t.Fatalf("relations after up-down-up = %v, want %v", again, tablesUp)
	}
	// Up when current is a no-op.
	if again, err := store.MigrateUp(ctx, db.Pool, 0); err != nil || len(again) != 0 {
		t.Fatalf("second up = %v, %v; want nothing to do", again, err)
	}
}

func TestMigrateStepwise(t *testing.T) {
	db := pgtest.New(t)
	ctx := testCtx(t)
	latest, _ := migrations.Latest()
	for v := 1; v <= latest; v++ {
		if _, err := store.MigrateUp(ctx, db.Pool, v); err != nil {
			t.Fatalf("up to %d: %v", v, err)
		}
		st, err := store.Status(ctx, db.Pool)
		if err != nil || st.Version != v || st.Dirty {
			t.Fatalf("status after up to %d = %+v, %v", v, st, err)
		}
	}
	for v := latest; v >= 1; v-- {
		if _, err := store.MigrateDown(ctx, db.Pool, 1); err != nil {
			t.Fatalf("down from %d: %v", v, err)
		}
	}
	if st, _ := store.Status(ctx, db.Pool); st.Version != 0 {
		t.Fatalf("version after all downs = %d", st.Version)
	}
}

// TestEveryColumnCommented keeps `\d+` self-explanatory for operators.
func TestEveryColumnCommented(t *testing.T) {
	db := pgtest.New(t, pgtest.Migrated())
	ctx := testCtx(t)
	rows, err := db.Pool.Query(ctx, `
SELECT c.relname, coalesce(a.attname, '')
FROM pg_class c
JOIN pg_namespace n ON n.oid = c.relnamespace AND n.nspname = 'public'
LEFT JOIN pg_attribute a ON a.attrelid = c.oid AND a.attnum > 0 AND NOT a.attisdropped
WHERE c.relkind IN ('r', 'v')
  AND ((a.attname IS NULL AND obj_description(c.oid, 'pg_class') IS NULL)
    OR (a.attname IS NOT NULL AND col_description(c.oid, a.attnum) IS NULL)
    OR obj_description(c.oid, 'pg_class') IS NULL)
ORDER BY 1, 2`)
	if err != nil {
		t.Fatal(err)
	}
	defer rows.Close()
	for rows.Next() {
		var rel, col string
		if err := rows.Scan(&rel, &col); err != nil {
			t.Fatal(err)
		}
		t.Errorf("no COMMENT ON %s.%s", rel, col)
	}
	if err := rows.Err(); err != nil {
		t.Fatal(err)
	}
}

func TestCheckSchemaStates(t *testing.T) {
	latest, _ := migrations.Latest()
	tests := []struct {
		name    string
		version int
		dirty   bool
		wantErr error
		wantRun string
	}{
		{name: "current", version: latest},
		{name: "behind", version: latest - 1, wantErr: store.ErrSchemaBehind, wantRun: "ironcurtain migrate up"},
		{name: "ahead", version: latest + 1, wantErr: store.ErrSchemaAhead, wantRun: "upgrade the gateway"},
		{name: "dirty", version: latest, dirty: true, wantErr: store.ErrSchemaDirty, wantRun: "ironcurtain migrate force"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			db := pgtest.New(t, pgtest.Migrated())
			ctx := testCtx(t)
			if _, err := db.Pool.Exec(ctx, `UPDATE ironcurtain_schema_version SET version = $1, dirty = $2`, tt.version, tt.dirty); err != nil {
				t.Fatal(err)
			}
			err := store.CheckSchema(ctx, db.Pool)
			if tt.wantErr == nil {
				if err != nil {
					t.Fatalf("CheckSchema = %v, want nil", err)
				}
				return
			}
			if !errors.Is(err, tt.wantErr) || !strings.Contains(err.Error(), tt.wantRun) {
				t.Fatalf("CheckSchema = %v, want %v saying %q", err, tt.wantErr, tt.wantRun)
			}
		})
	}
}

func TestForceClearsDirty(t *testing.T) {
	db := pgtest.New(t, pgtest.Migrated())
	ctx := testCtx(t)
	latest, _ := migrations.Latest()
	if _, err := db.Pool.Exec(ctx, `UPDATE ironcurtain_schema_version SET dirty = true`); err != nil {
		t.Fatal(err)
	}
	if _, err := store.MigrateUp(ctx, db.Pool, 0); err == nil || !strings.Contains(err.Error(), "dirty") {
		t.Fatalf("up on a dirty schema = %v, want a dirty error", err)
	}
	if err := store.Force(ctx, db.Pool, latest); err != nil {
		t.Fatal(err)
	}
	if err := store.CheckSchema(ctx, db.Pool); err != nil {
		t.Fatalf("after force: %v", err)
	}
	if err := store.Force(ctx, db.Pool, latest+1); err == nil {
		t.Fatal("force to an unknown version succeeded")
	}
}

// TestFailedMigrationIsNotDirty: a migration that fails inside its
// transaction leaves the previous version, clean.
func TestFailedMigrationRollsBack(t *testing.T) {
	db := pgtest.New(t, pgtest.Migrated())
	ctx := testCtx(t)
	// Make the latest down migration fail, whichever it is, by adding
	// objects that depend on every column of every table (a view's * is
	// expanded when it is created): a down that drops a column or a table
	// then fails.
	if _, err := db.Pool.Exec(ctx, `
DO $$
DECLARE r record;
BEGIN
  FOR r IN SELECT tablename FROM pg_tables WHERE schemaname = 'public' AND tablename <> 'ironcurtain_schema_version' LOOP
    EXECUTE format('CREATE VIEW %I AS SELECT * FROM %I', 'blocker_' || r.tablename, r.tablename);
  END LOOP;
END $$`); err != nil {
		t.Fatal(err)
	}
	if _, err := store.MigrateDown(ctx, db.Pool, 1); err == nil {
		t.Fatal("down succeeded although a view depends on the schema")
	}
	st, err := store.Status(ctx, db.Pool)
	latest, _ := migrations.Latest()
	if err != nil || st.Dirty || st.Version != latest {
		t.Fatalf("status after failed down = %+v, %v; want version %d, clean", st, err, latest)
	}
}

func TestOpenErrors(t *testing.T) {
	ctx := testCtx(t)
	tests := []struct {
		name, dsn, want string
	}{
		{name: "empty", dsn: "", want: "IRONCURTAIN_DATABASE_URL"},
		{name: "garbage keeps secrets out", dsn: "postgres://u:s3cret@%zz/db", want: "cannot be parsed"},
		{name: "nobody listening", dsn: "postgres://u:s3cret@127.0.0.1:1/db?connect_timeout=1", want: "connecting to 127.0.0.1:1"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			_, err := store.Open(ctx, tt.dsn)
			if err == nil || !strings.Contains(err.Error(), tt.want) {
				t.Fatalf("Open = %v, want error containing %q", err, tt.want)
			}
			if strings.Contains(err.Error(), "s3cret") {
				t.Fatalf("error leaks the password: %v", err)
			}
		})
	}
}

func userRelations(t *testing.T, db *pgtest.DB) []string {
	t.Helper()
	rows, err := db.Pool.Query(context.Background(), `
SELECT c.relname FROM pg_class c JOIN pg_namespace n ON n.oid = c.relnamespace
WHERE n.nspname = 'public' AND c.relkind IN ('r', 'v') ORDER BY 1`)
	if err != nil {
		t.Fatal(err)
	}
	defer rows.Close()
	var out []string
	for rows.Next() {
		var s string
		if err := rows.Scan(&s); err != nil {
			t.Fatal(err)
		}
		out = append(out, s)
	}
	return out
}

// oldRunnerSetup is what the runner before golang-migrate ran before every
// command: its version table, with the row "version 0, clean" for "nothing
// applied" (later commands updated that row).
const oldRunnerSetup = `
CREATE TABLE IF NOT EXISTS ironcurtain_schema_version (
    singleton  boolean     PRIMARY KEY DEFAULT true CHECK (singleton),
    version    integer     NOT NULL,
    dirty      boolean     NOT NULL,
    updated_at timestamptz NOT NULL DEFAULT now()
);
COMMENT ON TABLE ironcurtain_schema_version IS 'Schema version applied by ironcurtain migrate (one row); dirty means a migration did not finish.';
COMMENT ON COLUMN ironcurtain_schema_version.singleton IS 'Always true: the table holds one row.';
COMMENT ON COLUMN ironcurtain_schema_version.version IS 'Applied migration version (0: none).';
COMMENT ON COLUMN ironcurtain_schema_version.dirty IS 'True while (or if) a migration to version is running or failed half-way.';
COMMENT ON COLUMN ironcurtain_schema_version.updated_at IS 'When the version last changed.';
INSERT INTO ironcurtain_schema_version (version, dirty) VALUES (0, false) ON CONFLICT DO NOTHING;`

// migrateLikeOldRunner leaves db as the old runner's `migrate up --to n` did:
// migrations 1..n applied, its table at version n, clean.
func migrateLikeOldRunner(t *testing.T, db *pgtest.DB, n int) {
	t.Helper()
	ctx := testCtx(t)
	all, err := migrations.All()
	if err != nil {
		t.Fatal(err)
	}
	if _, err := db.Pool.Exec(ctx, oldRunnerSetup); err != nil {
		t.Fatal(err)
	}
	for _, m := range all[:n] {
		if _, err := db.Pool.Exec(ctx, m.Up); err != nil {
			t.Fatalf("applying %04d_%s: %v", m.Version, m.Name, err)
		}
		if _, err := db.Pool.Exec(ctx, `UPDATE ironcurtain_schema_version SET version = $1, dirty = false, updated_at = now()`, m.Version); err != nil {
			t.Fatal(err)
		}
	}
}

// TestUpgradeFromOldRunner: a database the runner before golang-migrate
// migrated to version N is recognised: up applies N+1.. only and lands on
// the latest version, its table keeps its layout and comments.
func TestUpgradeFromOldRunner(t *testing.T) {
	latest, _ := migrations.Latest()
	for _, n := range []int{0, 1, latest - 1, latest} {
		t.Run(strconv.Itoa(n), func(t *testing.T) {
			db := pgtest.New(t)
			ctx := testCtx(t)
			migrateLikeOldRunner(t, db, n)
			if st, err := store.Status(ctx, db.Pool); err != nil || st.Version != n || st.Dirty {
				t.Fatalf("Status of the old runner's database = %+v, %v; want version %d, clean", st, err, n)
			}
			up, err := store.MigrateUp(ctx, db.Pool, 0)
			if err != nil {
				t.Fatalf("up from the old runner's version %d: %v", n, err)
			}
			if len(up) != latest-n {
				t.Fatalf("up applied %d migrations, want %d", len(up), latest-n)
			}
			for i, a := range up {
				if a.Version != n+1+i || a.Direction != "up" {
					t.Fatalf("step %d = %+v, want up to %d", i, a, n+1+i)
				}
			}
			if err := store.CheckSchema(ctx, db.Pool); err != nil {
				t.Fatalf("CheckSchema after up: %v", err)
			}
			var cols string
			if err := db.Pool.QueryRow(ctx, `SELECT string_agg(attname, ',' ORDER BY attnum) FROM pg_attribute
WHERE attrelid = 'ironcurtain_schema_version'::regclass AND attnum > 0 AND NOT attisdropped`).Scan(&cols); err != nil {
				t.Fatal(err)
			}
			if cols != "singleton,version,dirty,updated_at" {
				t.Fatalf("version table columns = %s", cols)
			}
			// And back down to nothing and up again on the same table.
			if _, err := store.MigrateDown(ctx, db.Pool, latest); err != nil {
				t.Fatalf("down: %v", err)
			}
			if again, err := store.MigrateUp(ctx, db.Pool, 0); err != nil || len(again) != latest {
				t.Fatalf("up again = %d steps, %v; want %d", len(again), err, latest)
			}
		})
	}
}

// TestOldRunnerDirtyIsRecognised: a dirty mark the old runner left stops up
// until the operator forces a version.
func TestOldRunnerDirtyIsRecognised(t *testing.T) {
	db := pgtest.New(t)
	ctx := testCtx(t)
	latest, _ := migrations.Latest()
	migrateLikeOldRunner(t, db, latest-1)
	if _, err := db.Pool.Exec(ctx, `UPDATE ironcurtain_schema_version SET version = $1, dirty = true`, latest); err != nil {
		t.Fatal(err)
	}
	if err := store.CheckSchema(ctx, db.Pool); !errors.Is(err, store.ErrSchemaDirty) {
		t.Fatalf("CheckSchema = %v, want ErrSchemaDirty", err)
	}
	if _, err := store.MigrateUp(ctx, db.Pool, 0); err == nil || !strings.Contains(err.Error(), "dirty") {
		t.Fatalf("up on the old runner's dirty mark = %v, want a dirty error", err)
	}
	if err := store.Force(ctx, db.Pool, latest-1); err != nil {
		t.Fatal(err)
	}
	if up, err := store.MigrateUp(ctx, db.Pool, 0); err != nil || len(up) != 1 {
		t.Fatalf("up after force = %v, %v; want the last migration", up, err)
	}
	if err := store.CheckSchema(ctx, db.Pool); err != nil {
		t.Fatalf("CheckSchema after force and up: %v", err)
	}
}

// TestConcurrentMigrateUp: two replicas migrating an empty database at once
// both succeed; every migration runs exactly once.
func TestConcurrentMigrateUp(t *testing.T) {
	db := pgtest.New(t)
	ctx := testCtx(t)
	latest, _ := migrations.Latest()
	pools := []*pgxpool.Pool{db.Pool, pgtest.Connect(t, db)}
	applied := make([]int, len(pools))
	errs := make([]error, len(pools))
	var wg sync.WaitGroup
	for i, pool := range pools {
		wg.Go(func() {
			done, err := store.MigrateUp(ctx, pool, 0)
			applied[i], errs[i] = len(done), err
		})
	}
	wg.Wait()
	for i, err := range errs {
		if err != nil {
			t.Fatalf("replica %d: %v", i, err)
		}
	}
	if applied[0]+applied[1] != latest {
		t.Fatalf("replicas applied %v migrations, want %d in all", applied, latest)
	}
	if err := store.CheckSchema(ctx, db.Pool); err != nil {
		t.Fatalf("CheckSchema: %v", err)
	}
}

// TestMigrateWaitsForTheLock: a runner of any release holding the advisory
// lock (the key is unchanged) makes up wait; up gives up with its context.
func TestMigrateWaitsForTheLock(t *testing.T) {
	db := pgtest.New(t)
	ctx := testCtx(t)
	other := pgtest.Connect(t, db)
	conn, err := other.Acquire(ctx)
	if err != nil {
		t.Fatal(err)
	}
	defer conn.Release()
	const oldKey int64 = 0x49634d6967726174
	if _, err := conn.Exec(ctx, `SELECT pg_advisory_lock($1)`, oldKey); err != nil {
		t.Fatal(err)
	}
	short, cancel := context.WithTimeout(ctx, 2*time.Second)
	defer cancel()
	if _, err := store.MigrateUp(short, db.Pool, 0); !errors.Is(err, context.DeadlineExceeded) {
		t.Fatalf("up while another runner holds the lock = %v, want a deadline error", err)
	}
	if st, err := store.Status(ctx, db.Pool); err != nil || st.Version != 0 {
		t.Fatalf("status after the refused up = %+v, %v; want nothing applied", st, err)
	}
	if _, err := conn.Exec(ctx, `SELECT pg_advisory_unlock($1)`, oldKey); err != nil {
		t.Fatal(err)
	}
	if _, err := store.MigrateUp(ctx, db.Pool, 0); err != nil {
		t.Fatalf("up after the lock is free: %v", err)
	}
}

// TestFailedMigrationErrorIsShort: the error names the cause (a Postgres
// error, reachable with errors.As), not the migration's whole SQL.
func TestFailedMigrationErrorIsShort(t *testing.T) {
	db := pgtest.New(t)
	ctx := testCtx(t)
	// A table the first migration creates, already there: 0001 fails.
	if _, err := db.Pool.Exec(ctx, `CREATE TABLE sessions (x int)`); err != nil {
		t.Fatal(err)
	}
	_, err := store.MigrateUp(ctx, db.Pool, 0)
	var pgErr *pgconn.PgError
	if !errors.As(err, &pgErr) {
		t.Fatalf("up = %v, want a Postgres error", err)
	}
	all, _ := migrations.All()
	if strings.Contains(err.Error(), strings.TrimSpace(all[0].Up)[:40]) {
		t.Fatalf("error carries the migration's SQL: %v", err)
	}
	if st, err := store.Status(ctx, db.Pool); err != nil || st.Version != 0 || st.Dirty {
		t.Fatalf("status after the failed first migration = %+v, %v; want 0, clean", st, err)
	}
}
