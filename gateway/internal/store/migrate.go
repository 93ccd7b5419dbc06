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
// was interrupted (dirty). It is created by the migrator, not by a
// migration, and golang-migrate keeps it (as its migrations table: it
// truncates it and inserts one row (version, dirty) per change).
const versionTable = "ironcurtain_schema_version"

// migrateLockKey serialises concurrent `migrate` runs (pg_advisory_lock).
// It is the key of every runner this gateway has had, so a replica of an
// older release migrating at the same moment waits too.
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
	// No row, the old runner's 0 and golang-migrate's -1 (a dirty revert of
	// the first migration) all mean "nothing applied".
	st.Version = max(st.Version, 0)
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
		return fmt.Errorf("%w: a migration to or from version %d did not finish; inspect the database, then run `ironcurtain migrate force N` with the version its schema is at (%d, %d or %d) and `ironcurtain migrate up`",
			ErrSchemaDirty, s.Version, max(s.Version-1, 0), s.Version, s.Version+1)
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
// target (0 = the latest), one step at a time. golang-migrate marks the
// version dirty before a step and clean after it; a step that fails leaves
// the previous version, clean (see runner.step), so only a crash half-way
// leaves the schema dirty for CheckSchema to report.
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
	err = withRunner(ctx, pool, func(r *runner) error {
		st, err := r.cleanState(ctx, len(all), "")
		if err != nil {
			return err
		}
		if st.Version > target {
			return fmt.Errorf("database is at version %d, above the target %d: use `ironcurtain migrate down`", st.Version, target)
		}
		for _, m := range all[st.Version:target] {
			start := time.Now()
			if err := r.step(ctx, +1, m.Version-1); err != nil {
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
	err = withRunner(ctx, pool, func(r *runner) error {
		st, err := r.cleanState(ctx, len(all), ": use the newer binary to go down")
		if err != nil {
			return err
		}
		for v := st.Version; v > 0 && steps > 0; v, steps = v-1, steps-1 {
			m := all[v-1]
			start := time.Now()
			if err := r.step(ctx, -1, m.Version); err != nil {
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
	err = withRunner(ctx, pool, func(r *runner) error { return r.force(version) })
	if err != nil {
		return fmt.Errorf("forcing schema version: %w", err)
	}
	return nil
}
