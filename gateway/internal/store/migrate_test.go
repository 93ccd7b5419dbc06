package store_test

import (
	"context"
	"errors"
	"os"
	"strings"
	"testing"
	"time"

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
