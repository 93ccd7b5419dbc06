package opscli

import (
	"context"
	"fmt"
	"strconv"

	"github.com/jackc/pgx/v5/pgxpool"

	"ironcurtain.dev/gateway/internal/store"
)

const migrateUsage = `usage: ironcurtain migrate up [--to N] | down [--steps N] | status | force N  [--database-url URL]
  The database URL comes from --database-url or IRONCURTAIN_DATABASE_URL.`

// Migrate runs `ironcurtain migrate`.
func Migrate(ctx context.Context, args []string, e Env) int {
	return finish(e, "migrate", migrate(ctx, args, e))
}

func migrate(ctx context.Context, args []string, e Env) error {
	fs := newFlagSet("migrate", e)
	dsn := fs.String("database-url", "", "Postgres URL (default $"+EnvDatabaseURL+")")
	to := fs.Int("to", 0, "up: target version (0 = latest)")
	steps := fs.Int("steps", 1, "down: number of migrations to revert")
	fs.Usage = func() { fmt.Fprintln(e.Stderr, migrateUsage); fs.PrintDefaults() }
	pos, err := parse(fs, args)
	if err != nil {
		return err
	}
	if len(pos) == 0 {
		return usageErr("missing subcommand (up, down, status or force)\n%s", migrateUsage)
	}
	if *dsn == "" {
		*dsn = e.Getenv(EnvDatabaseURL)
	}
	pool, err := store.Open(ctx, *dsn)
	if err != nil {
		return err
	}
	defer pool.Close()

	switch pos[0] {
	case "up":
		done, err := store.MigrateUp(ctx, pool, *to)
		printApplied(e, done)
		if err != nil {
			return err
		}
		return printStatus(ctx, e, pool)
	case "down":
		done, err := store.MigrateDown(ctx, pool, *steps)
		printApplied(e, done)
		if err != nil {
			return err
		}
		return printStatus(ctx, e, pool)
	case "status":
		return printStatus(ctx, e, pool)
	case "force":
		if len(pos) != 2 {
			return usageErr("force needs a version number")
		}
		v, err := strconv.Atoi(pos[1])
		if err != nil {
			return usageErr("force: %q is not a version number", pos[1])
		}
		if err := store.Force(ctx, pool, v); err != nil {
			return err
		}
		return printStatus(ctx, e, pool)
	}
	return usageErr("unknown subcommand %q\n%s", pos[0], migrateUsage)
}

func printApplied(e Env, done []store.Applied) {
	for _, a := range done {
		fmt.Fprintf(e.Stdout, "%-4s %04d_%s (%v)\n", a.Direction, a.Version, a.Name, a.Took.Round(1e6))
	}
}

func printStatus(ctx context.Context, e Env, pool *pgxpool.Pool) error {
	st, err := store.Status(ctx, pool)
	if err != nil {
		return err
	}
	state := "current"
	if err := st.Check(); err != nil {
		state = err.Error()
	}
	fmt.Fprintf(e.Stdout, "schema version %d (dirty: %v), this binary knows %d: %s\n", st.Version, st.Dirty, st.Latest, state)
	return nil
}
