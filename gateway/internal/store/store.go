// Package store opens the gateway's Postgres pool and manages its schema:
// it applies the embedded migrations (ironcurtain.dev/migrations) on explicit
// request, tracks the version with a dirty flag, and checks at start-up that
// the schema is exactly the one this binary was built for (CheckSchema).
// The test harness that starts a real Postgres lives in store/pgtest.
package store

import (
	"context"
	"errors"
	"fmt"
	"strings"
	"time"

	"github.com/jackc/pgx/v5/pgxpool"
)

// Defaults applied by Open when the DSN does not set them.
const (
	DefaultConnectTimeout = 5 * time.Second
	DefaultMaxConns       = 16
)

// Open parses dsn, builds a pool and checks that the server answers.
// It does not touch the schema: call CheckSchema before serving.
func Open(ctx context.Context, dsn string) (*pgxpool.Pool, error) {
	if dsn == "" {
		return nil, errors.New("opening database: no database URL (set --database-url or IRONCURTAIN_DATABASE_URL)")
	}
	cfg, err := pgxpool.ParseConfig(dsn)
	if err != nil {
		// pgx's message may echo the DSN, password included: keep it out.
		return nil, errors.New("opening database: the database URL cannot be parsed")
	}
	if cfg.ConnConfig.ConnectTimeout == 0 {
		cfg.ConnConfig.ConnectTimeout = DefaultConnectTimeout
	}
	if !strings.Contains(dsn, "pool_max_conns") {
		cfg.MaxConns = DefaultMaxConns
	}
	pool, err := pgxpool.NewWithConfig(ctx, cfg)
	if err != nil {
		return nil, fmt.Errorf("opening database: %w", err)
	}
	pingCtx, cancel := context.WithTimeout(ctx, cfg.ConnConfig.ConnectTimeout)
	defer cancel()
	if err := pool.Ping(pingCtx); err != nil {
		pool.Close()
		return nil, fmt.Errorf("opening database: connecting to %s:%d: %w", cfg.ConnConfig.Host, cfg.ConnConfig.Port, err)
	}
	return pool, nil
}
