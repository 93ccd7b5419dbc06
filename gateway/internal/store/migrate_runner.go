package store

import (
	"context"
	"errors"
	"fmt"

	"github.com/golang-migrate/migrate/v4"
	"github.com/golang-migrate/migrate/v4/database"
	migratepgx "github.com/golang-migrate/migrate/v4/database/pgx/v5"
	"github.com/golang-migrate/migrate/v4/source/iofs"
	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgxpool"
	"github.com/jackc/pgx/v5/stdlib"

	"ironcurtain.dev/migrations"
)

// runner is golang-migrate on the embedded migrations, used while conn holds
// migrateLockKey.
type runner struct {
	conn *pgxpool.Conn
	m    *migrate.Migrate
}

// withRunner runs fn on a runner holding the migration advisory lock (the
// same key as before golang-migrate, so replicas of an older release
// serialise with this one), after making sure the version table exists in
// the layout golang-migrate and older releases both read.
func withRunner(ctx context.Context, pool *pgxpool.Pool, fn func(*runner) error) error {
	conn, err := pool.Acquire(ctx)
	if err != nil {
		return fmt.Errorf("acquiring connection: %w", err)
	}
	defer conn.Release()
	if _, err := conn.Exec(ctx, `SELECT pg_advisory_lock($1)`, migrateLockKey); err != nil {
		return fmt.Errorf("taking migration lock: %w", err)
	}
	defer func() {
		_, _ = conn.Exec(context.WithoutCancel(ctx), `SELECT pg_advisory_unlock($1)`, migrateLockKey)
	}()
	if err := ensureVersionTable(ctx, conn); err != nil {
		return err
	}
	m, err := newMigrate(pool)
	if err != nil {
		return err
	}
	defer func() { _, _ = m.Close() }()
	return fn(&runner{conn: conn, m: m})
}

// ensureVersionTable creates the version table as every release has (one
// row; golang-migrate finds it and does not create its own) and drops the
// row "version 0, clean" that releases before golang-migrate wrote for "none
// applied": golang-migrate reads a version as a migration that exists and
// says "none" with no row. Nothing else of an existing table changes, so a
// database migrated by an older release continues where it is.
func ensureVersionTable(ctx context.Context, conn *pgxpool.Conn) error {
	_, err := conn.Exec(ctx, `
CREATE TABLE IF NOT EXISTS `+versionTable+` (
    singleton  boolean     PRIMARY KEY DEFAULT true CHECK (singleton),
    version    integer     NOT NULL,
    dirty      boolean     NOT NULL,
    updated_at timestamptz NOT NULL DEFAULT now()
);
COMMENT ON TABLE `+versionTable+` IS 'Schema version applied by ironcurtain migrate (one row); dirty means a migration did not finish.';
COMMENT ON COLUMN `+versionTable+`.singleton IS 'Always true: the table holds one row.';
COMMENT ON COLUMN `+versionTable+`.version IS 'Applied migration version (no row, or 0 as older releases wrote: none).';
COMMENT ON COLUMN `+versionTable+`.dirty IS 'True while (or if) a migration to or from version is running or failed half-way.';
COMMENT ON COLUMN `+versionTable+`.updated_at IS 'When the version last changed.';
DELETE FROM `+versionTable+` WHERE version = 0 AND NOT dirty;`)
	if err != nil {
		return fmt.Errorf("creating %s: %w", versionTable, err)
	}
	return nil
}

// newMigrate opens golang-migrate on the embedded files and on a
// database/sql view of pool (closing it does not close pool).
func newMigrate(pool *pgxpool.Pool) (*migrate.Migrate, error) {
	src, err := iofs.New(migrations.FS(), ".")
	if err != nil {
		return nil, fmt.Errorf("reading migrations: %w", err)
	}
	db := stdlib.OpenDBFromPool(pool)
	drv, err := migratepgx.WithInstance(db, &migratepgx.Config{MigrationsTable: versionTable})
	if err != nil {
		_ = db.Close()
		_ = src.Close()
		return nil, fmt.Errorf("opening migration driver: %w", plainDBError(err))
	}
	m, err := migrate.NewWithInstance("iofs", src, "pgx5", drv)
	if err != nil {
		_ = drv.Close()
		_ = src.Close()
		return nil, fmt.Errorf("opening migration runner: %w", err)
	}
	return m, nil
}

// cleanState reads the version under the lock and refuses a dirty schema or
// one newer than this binary (latest); aheadHint ends that error.
func (r *runner) cleanState(ctx context.Context, latest int, aheadHint string) (SchemaState, error) {
	st, err := lockedState(ctx, r.conn)
	if err != nil {
		return st, err
	}
	if st.Dirty {
		return st, fmt.Errorf("version %d is dirty; run `ironcurtain migrate force N` first", st.Version)
	}
	if st.Version > latest {
		return st, fmt.Errorf("database is at version %d, newer than this binary's %d%s", st.Version, latest, aheadHint)
	}
	return st, nil
}

// step runs one migration up (n = +1) or down (n = -1) from version from.
// golang-migrate sends each file as one simple-protocol query, which
// Postgres runs as one implicit transaction (no migration has its own
// BEGIN/COMMIT), so a failed step applied nothing: the dirty mark
// golang-migrate leaves is set back to from, clean, as before golang-migrate.
func (r *runner) step(ctx context.Context, n, from int) error {
	if err := ctx.Err(); err != nil {
		return err
	}
	err := r.m.Steps(n)
	if err == nil {
		return nil
	}
	err = plainDBError(err)
	st, serr := lockedState(context.WithoutCancel(ctx), r.conn)
	if serr != nil {
		return errors.Join(err, serr)
	}
	if !st.Dirty {
		return err
	}
	if ferr := r.force(from); ferr != nil {
		return errors.Join(err, fmt.Errorf("clearing dirty flag: %w", ferr))
	}
	return err
}

// force records version, clean (0: no row, golang-migrate's "none").
func (r *runner) force(version int) error {
	if version == 0 {
		version = database.NilVersion
	}
	return r.m.Force(version)
}

// plainDBError drops the migration's SQL text, which golang-migrate's
// database.Error prints in full, keeping the line and the cause.
func plainDBError(err error) error {
	var e database.Error
	var p *database.Error
	switch {
	case errors.As(err, &p) && p != nil:
		e = *p
	case errors.As(err, &e):
	default:
		return err
	}
	what := e.Err
	if what == "" {
		what = "migration failed"
	}
	if e.OrigErr == nil {
		return fmt.Errorf("%s in line %d", what, e.Line)
	}
	return fmt.Errorf("%s in line %d: %w", what, e.Line, e.OrigErr)
}

// lockedState reads the version row on the locked connection (no row: 0).
func lockedState(ctx context.Context, conn *pgxpool.Conn) (SchemaState, error) {
	var st SchemaState
	err := conn.QueryRow(ctx, `SELECT version, dirty, updated_at FROM `+versionTable).Scan(&st.Version, &st.Dirty, &st.UpdatedAt)
	if err != nil && !errors.Is(err, pgx.ErrNoRows) {
		return st, fmt.Errorf("reading schema version: %w", err)
	}
	st.Version = max(st.Version, 0)
	return st, nil
}
