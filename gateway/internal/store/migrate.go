package store

import (
	"context"
	"errors"
	"fmt"
	"time"

	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgxpool"

	"ironcurtain.dev/migrations"
)

// versionTable records the applied schema version and whether a migration
// was interrupted (dirty). It is created by the migrator, not by a migration.
const versionTable = "ironcurtain_schema_version"

// migrateLockKey serialises concurrent `migrate` runs (pg_advisory_lock).
const migrateLockKey int64 = 0x49634d6967726174 // "IcMigrat"

// Errors returned by CheckSchema; the error text says what to run.
var (
	ErrSchemaMissing = errors.New("database schema is not initialised")
	ErrSchemaBehind  = errors.New("database schema is older than this gateway")
	ErrSchemaAhead   = errors.New("database schema is newer than this gateway")
	ErrSchemaDirty   = errors.New("database schema is dirty")
)

// SchemaState is the schema version found in the database.
type SchemaState struct {
	Version   int       // applied version, 0 when nothing is applied
	Dirty     bool      // a migration to Version was interrupted
	UpdatedAt time.Time // when the version last changed (zero if never)
	Latest    int       // highest version embedded in this binary
}

// Current reports whether the schema is exactly what this binary needs.
func (s SchemaState) Current() bool { return !s.Dirty && s.Version == s.Latest }

// Status reads the schema state without changing anything.
func Status(ctx context.Context, pool *pgxpool.Pool) (SchemaState, error) {
	latest, err := migrations.Latest()
	if err != nil {
		return SchemaState{}, fmt.Errorf("reading schema status: %w", err)
	}
	st := SchemaState{Latest: latest}
	var exists bool
	if err := pool.QueryRow(ctx, `SELECT to_regclass($1) IS NOT NULL`, versionTable).Scan(&exists); err != nil {
		return SchemaState{}, fmt.Errorf("reading schema status: %w", err)
	}
	if !exists {
		return st, nil
	}
	err = pool.QueryRow(ctx, `SELECT version, dirty, updated_at FROM `+versionTable).Scan(&st.Version, &st.Dirty, &st.UpdatedAt)
	if err != nil && !errors.Is(err, pgx.ErrNoRows) {
		return SchemaState{}, fmt.Errorf("reading schema status: %w", err)
	}
	return st, nil
}

// CheckSchema returns nil only when the schema is exactly the version this
// binary embeds and not dirty. Otherwise the error says what to run; the
// gateway refuses to start on it. It never changes the schema.
func CheckSchema(ctx context.Context, pool *pgxpool.Pool) error {
	st, err := Status(ctx, pool)
	if err != nil {
		return fmt.Errorf("checking schema: %w", err)
	}
	return st.Check()
}

// Check is CheckSchema on an already read state.
func (s SchemaState) Check() error {
	switch {
	case s.Dirty:
		prev := s.Version - 1
		return fmt.Errorf("%w: a migration to version %d did not finish; inspect the database, then run `ironcurtain migrate force %d` (if it was rolled back) or `ironcurtain migrate force %d` (if it was applied) and `ironcurtain migrate up`",
			ErrSchemaDirty, s.Version, prev, s.Version)
	case s.Version == 0 && s.Latest > 0:
		return fmt.Errorf("%w: run `ironcurtain migrate up` (needs version %d)", ErrSchemaMissing, s.Latest)
	case s.Version < s.Latest:
		return fmt.Errorf("%w: it is at version %d and this gateway needs %d; run `ironcurtain migrate up`", ErrSchemaBehind, s.Version, s.Latest)
	case s.Version > s.Latest:
		return fmt.Errorf("%w: it is at version %d and this gateway knows only up to %d; upgrade the gateway, or run `ironcurtain migrate down` with the newer binary", ErrSchemaAhead, s.Version, s.Latest)
	}
	return nil
}

// Applied is one migration step that ran.
type Applied struct {
	Version   int
	Name      string
	Direction string // up | down
	Took      time.Duration
}

// MigrateUp applies every embedded migration above the current version, up to
// target (0 = the latest). Each migration runs in its own transaction together
// with the version bump; the version row is marked dirty before and cleared
// with it, so a crash half-way is visible to CheckSchema.
func MigrateUp(ctx context.Context, pool *pgxpool.Pool, target int) ([]Applied, error) {
	all, err := migrations.All()
	if err != nil {
		return nil, fmt.Errorf("migrating up: %w", err)
	}
	if target == 0 && len(all) > 0 {
		target = all[len(all)-1].Version
	}
	if target < 0 || target > len(all) {
		return nil, fmt.Errorf("migrating up: target version %d does not exist (latest is %d)", target, len(all))
	}
	var done []Applied
	err = withMigrateLock(ctx, pool, func(conn *pgxpool.Conn) error {
		st, err := lockedState(ctx, conn)
		if err != nil {
			return err
		}
		if st.Dirty {
			return fmt.Errorf("version %d is dirty; run `ironcurtain migrate force N` first", st.Version)
		}
		if st.Version > len(all) {
			return fmt.Errorf("database is at version %d, newer than this binary's %d", st.Version, len(all))
		}
		for _, m := range all[st.Version:target] {
			start := time.Now()
			if err := step(ctx, conn, m.Version, m.Version-1, m.Up); err != nil {
				return fmt.Errorf("applying %04d_%s: %w", m.Version, m.Name, err)
			}
			done = append(done, Applied{Version: m.Version, Name: m.Name, Direction: "up", Took: time.Since(start)})
		}
		return nil
	})
	if err != nil {
		return done, fmt.Errorf("migrating up: %w", err)
	}
	return done, nil
}

// MigrateDown reverts the latest steps applied migrations (steps >= 1).
func MigrateDown(ctx context.Context, pool *pgxpool.Pool, steps int) ([]Applied, error) {
	if steps < 1 {
		return nil, errors.New("migrating down: the number of steps must be at least 1")
	}
	all, err := migrations.All()
	if err != nil {
		return nil, fmt.Errorf("migrating down: %w", err)
	}
	var done []Applied
	err = withMigrateLock(ctx, pool, func(conn *pgxpool.Conn) error {
		st, err := lockedState(ctx, conn)
		if err != nil {
			return err
		}
		if st.Dirty {
			return fmt.Errorf("version %d is dirty; run `ironcurtain migrate force N` first", st.Version)
		}
		if st.Version > len(all) {
			return fmt.Errorf("database is at version %d, newer than this binary's %d: use the newer binary to go down", st.Version, len(all))
		}
		for v := st.Version; v > 0 && steps > 0; v, steps = v-1, steps-1 {
			m := all[v-1]
			start := time.Now()
			if err := step(ctx, conn, m.Version-1, m.Version, m.Down); err != nil {
				return fmt.Errorf("reverting %04d_%s: %w", m.Version, m.Name, err)
			}
			done = append(done, Applied{Version: m.Version, Name: m.Name, Direction: "down", Took: time.Since(start)})
		}
		return nil
	})
	if err != nil {
		return done, fmt.Errorf("migrating down: %w", err)
	}
	return done, nil
}

// Force sets the recorded version and clears the dirty flag without running
// any SQL: the operator's way out after inspecting a failed migration.
func Force(ctx context.Context, pool *pgxpool.Pool, version int) error {
	latest, err := migrations.Latest()
	if err != nil {
		return fmt.Errorf("forcing schema version: %w", err)
	}
	if version < 0 || version > latest {
		return fmt.Errorf("forcing schema version: %d is not between 0 and %d", version, latest)
	}
	err = withMigrateLock(ctx, pool, func(conn *pgxpool.Conn) error {
		_, err := conn.Exec(ctx, `UPDATE `+versionTable+` SET version = $1, dirty = false, updated_at = now()`, version)
		return err
	})
	if err != nil {
		return fmt.Errorf("forcing schema version: %w", err)
	}
	return nil
}

// step marks the row dirty at `to`, then runs sql and records `to` clean in
// one transaction. When the transaction fails nothing of it was applied
// (Postgres DDL is transactional), so the dirty mark is rolled back to from.
func step(ctx context.Context, conn *pgxpool.Conn, to, from int, sql string) error {
	dirtyVersion := max(to, from)
	if _, err := conn.Exec(ctx, `UPDATE `+versionTable+` SET version = $1, dirty = true, updated_at = now()`, dirtyVersion); err != nil {
		return fmt.Errorf("marking version dirty: %w", err)
	}
	err := pgx.BeginFunc(ctx, conn, func(tx pgx.Tx) error {
		if _, err := tx.Exec(ctx, sql); err != nil {
			return err
		}
		_, err := tx.Exec(ctx, `UPDATE `+versionTable+` SET version = $1, dirty = false, updated_at = now()`, to)
		return err
	})
	if err != nil {
		// The transaction rolled back: the schema is still at from.
		if _, rerr := conn.Exec(context.WithoutCancel(ctx), `UPDATE `+versionTable+` SET version = $1, dirty = false, updated_at = now()`, from); rerr != nil {
			return errors.Join(err, fmt.Errorf("clearing dirty flag: %w", rerr))
		}
		return err
	}
	return nil
}

// withMigrateLock runs fn on one connection holding the migration advisory
// lock, creating the version table first if needed.
func withMigrateLock(ctx context.Context, pool *pgxpool.Pool, fn func(*pgxpool.Conn) error) error {
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
	_, err = conn.Exec(ctx, `
CREATE TABLE IF NOT EXISTS `+versionTable+` (
    singleton  boolean     PRIMARY KEY DEFAULT true CHECK (singleton),
    version    integer     NOT NULL,
    dirty      boolean     NOT NULL,
    updated_at timestamptz NOT NULL DEFAULT now()
);
COMMENT ON TABLE `+versionTable+` IS 'Schema version applied by ironcurtain migrate (one row); dirty means a migration did not finish.';
COMMENT ON COLUMN `+versionTable+`.singleton IS 'Always true: the table holds one row.';
COMMENT ON COLUMN `+versionTable+`.version IS 'Applied migration version (0: none).';
COMMENT ON COLUMN `+versionTable+`.dirty IS 'True while (or if) a migration to version is running or failed half-way.';
COMMENT ON COLUMN `+versionTable+`.updated_at IS 'When the version last changed.';
INSERT INTO `+versionTable+` (version, dirty) VALUES (0, false) ON CONFLICT DO NOTHING;`)
	if err != nil {
		return fmt.Errorf("creating %s: %w", versionTable, err)
	}
	return fn(conn)
}

func lockedState(ctx context.Context, conn *pgxpool.Conn) (SchemaState, error) {
	var st SchemaState
	if err := conn.QueryRow(ctx, `SELECT version, dirty, updated_at FROM `+versionTable).Scan(&st.Version, &st.Dirty, &st.UpdatedAt); err != nil {
		return st, fmt.Errorf("reading schema version: %w", err)
	}
	return st, nil
}
