// Package pgtest gives integration tests a real Postgres: one container per
// test binary (testcontainers-go, image from IC_POSTGRES_IMAGE), started
// lazily on first use and terminated by Main, and a fresh database per test
// (CREATE DATABASE, dropped in t.Cleanup), optionally with the schema
// migrations applied (cloned from a migrated template, so it is cheap).
//
// Use it from TestMain:
//
//	func TestMain(m *testing.M) { os.Exit(pgtest.Main(m)) }
//
//	func TestX(t *testing.T) {
//		db := pgtest.New(t, pgtest.Migrated())
//		... db.Pool, db.DSN ...
//	}
//
// Ryuk (testcontainers' reaper) cannot be pulled on a registry-less machine,
// so the harness sets TESTCONTAINERS_RYUK_DISABLED=true when unset and cleans
// up itself: Main terminates the container, and containers left behind by a
// test binary that died are labelled (LabelKey) with the owning process id
// and removed by the next run (`make clean` removes any by label).
//
// When Postgres cannot be started the test fails if CI=true and is skipped
// otherwise, with a message saying what is missing.
package pgtest

import (
	"context"
	"errors"
	"fmt"
	"os"
	"regexp"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgxpool"

	"ironcurtain.dev/gateway/internal/store"
	"ironcurtain.dev/gateway/internal/testenv"
)

// Environment variables read by the harness.
const (
	EnvImage = "IC_POSTGRES_IMAGE"            // image to run; DefaultImage when unset
	EnvRyuk  = "TESTCONTAINERS_RYUK_DISABLED" // set to "true" when unset
	EnvCI    = testenv.EnvCI                  // "true": failures to start Postgres fail the test
)

// DefaultImage is the offline image built by `make images-offline`.
const DefaultImage = "ironcurtain/postgres-offline:15"

// Container labels; `make clean` removes containers carrying LabelKey.
const (
	LabelKey = "dev.ironcurtain.pgtest"
	LabelPID = "dev.ironcurtain.pgtest.pid"
)

// Database credentials inside the throw-away container.
const (
	user     = "ironcurtain"
	password = "pgtest-not-a-secret"
	adminDB  = "pgtest"
)

// StartTimeout bounds starting the container and waiting until it answers.
const StartTimeout = 90 * time.Second

var (
	sharedMu  sync.Mutex
	shared    *Server
	sharedErr error
)

// Main runs the tests and then terminates the shared container, if one was
// started. Use it as os.Exit(pgtest.Main(m)) in TestMain.
func Main(m *testing.M) int {
	code := m.Run()
	if err := Shutdown(); err != nil {
		fmt.Fprintf(os.Stderr, "pgtest: %v\n", err)
	}
	return code
}

// Shutdown terminates the shared container (a no-op when none runs).
func Shutdown() error {
	sharedMu.Lock()
	defer sharedMu.Unlock()
	if shared == nil {
		return nil
	}
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	err := shared.terminate(ctx)
	shared, sharedErr = nil, errors.New("pgtest: server already shut down")
	return err
}

// Shared returns the test binary's Postgres server, starting it on first use.
// On failure it fails the test in CI and skips it otherwise.
func Shared(t testing.TB) *Server {
	t.Helper()
	sharedMu.Lock()
	defer sharedMu.Unlock()
	if shared == nil && sharedErr == nil {
		ctx, cancel := context.WithTimeout(context.Background(), StartTimeout)
		shared, sharedErr = startServer(ctx)
		cancel()
	}
	if sharedErr != nil {
		unavailable(t, sharedErr)
	}
	return shared
}

// unavailable fails (CI) or skips (elsewhere) a test that needs Postgres.
func unavailable(t testing.TB, err error) {
	t.Helper()
	testenv.Missing(t, "pgtest: Postgres is not available: %v (needs Docker and the image in %s, default %s: run `make images-offline`)", err, EnvImage, DefaultImage)
}

// DB is one fresh database for one test.
type DB struct {
	Name   string        // database name
	DSN    string        // connection string (superuser of the test server)
	Pool   *pgxpool.Pool // pool on the database, closed in t.Cleanup
	Server *Server       // the shared server (Stop/Start for failure tests)
}

// Option configures New.
type Option func(*options)

type options struct {
	migrateTo int // -1: no migrations; 0: latest; N: up to N
}

// Migrated applies every migration to the new database.
func Migrated() Option { return func(o *options) { o.migrateTo = 0 } }

// MigratedTo applies migrations up to version v.
func MigratedTo(v int) Option { return func(o *options) { o.migrateTo = v } }

// New creates a fresh database on the shared server and drops it when the
// test ends. Without options the database is empty.
func New(t testing.TB, opts ...Option) *DB {
	t.Helper()
	o := options{migrateTo: -1}
	for _, opt := range opts {
		opt(&o)
	}
	srv := Shared(t)
	ctx, cancel := context.WithTimeout(context.Background(), StartTimeout)
	defer cancel()
	name, err := srv.createDatabase(ctx, t.Name(), o.migrateTo)
	if err != nil {
		unavailable(t, err)
	}
	dsn := srv.dsn(name)
	pool, err := store.Open(ctx, dsn)
	if err != nil {
		unavailable(t, fmt.Errorf("connecting to test database: %w", err))
	}
	t.Cleanup(func() {
		pool.Close()
		ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
		defer cancel()
		if err := srv.dropDatabase(ctx, name); err != nil {
			t.Logf("pgtest: dropping %s: %v", name, err)
		}
	})
	return &DB{Name: name, DSN: dsn, Pool: pool, Server: srv}
}

// Server is a running Postgres container.
type Server struct {
	image string
	host  string
	port  string
	ctr   runner // nil for an external server (tests of the harness)

	mu        sync.Mutex // serialises CREATE DATABASE and template builds
	templates map[int]string
	counter   atomic.Int64
}

// runner is what Server needs from the running container.
type runner interface {
	Stop(ctx context.Context, timeout *time.Duration) error
	Start(ctx context.Context) error
	Terminate(ctx context.Context) error
	Logs(ctx context.Context) (string, error)
	Running(ctx context.Context) (bool, error)
}

// Image is the image the server runs.
func (s *Server) Image() string { return s.image }

// AdminDSN connects to the server's maintenance database.
func (s *Server) AdminDSN() string { return s.dsn(adminDB) }

func (s *Server) dsn(db string) string {
	return fmt.Sprintf("postgres://%s:%s@%s/%s?sslmode=disable&connect_timeout=5", user, password, hostPort(s.host, s.port), db)
}

func hostPort(host, port string) string {
	if strings.Contains(host, ":") {
		return "[" + host + "]:" + port
	}
	return host + ":" + port
}

// Stop kills the server at once (SIGKILL, no shutdown checkpoint): open
// connections break and new ones are refused until Start. Tests that stop
// the shared server must not run in parallel with other database tests.
func (s *Server) Stop(ctx context.Context) error {
	if s.ctr == nil {
		return errors.New("pgtest: this server cannot be stopped")
	}
	zero := time.Duration(0)
	if err := s.ctr.Stop(ctx, &zero); err != nil {
		return fmt.Errorf("stopping postgres container: %w", err)
	}
	return nil
}

// Start restarts a stopped server on the same address and waits until it
// answers queries again.
func (s *Server) Start(ctx context.Context) error {
	if s.ctr == nil {
		return errors.New("pgtest: this server cannot be started")
	}
	if err := s.ctr.Start(ctx); err != nil {
		return fmt.Errorf("starting postgres container: %w", err)
	}
	return s.waitReady(ctx)
}

func (s *Server) terminate(ctx context.Context) error {
	if s.ctr == nil {
		return nil
	}
	if err := s.ctr.Terminate(ctx); err != nil {
		return fmt.Errorf("terminating postgres container: %w", err)
	}
	return nil
}

// waitReady retries a connection and a query until they succeed twice on
// the same postmaster (an image that runs a temporary server for initdb
// scripts restarts it once), the container exits, or ctx ends.
func (s *Server) waitReady(ctx context.Context) error {
	var (
		lastErr   error
		lastStart time.Time
		ok        int
	)
	for {
		start, err := s.postmasterStart(ctx)
		switch {
		case err != nil:
			lastErr, ok = err, 0
		case ok > 0 && start.Equal(lastStart):
			return nil
		default:
			lastStart, ok = start, 1
		}
		if s.ctr != nil && err != nil {
			if running, rerr := s.ctr.Running(ctx); rerr == nil && !running {
				logs, _ := s.ctr.Logs(ctx)
				return fmt.Errorf("postgres container exited while starting: %w; last log lines:\n%s", lastErr, tail(logs, 15))
			}
		}
		select {
		case <-ctx.Done():
			logs := ""
			if s.ctr != nil {
				logs, _ = s.ctr.Logs(context.Background())
			}
			return fmt.Errorf("postgres did not become ready: %w (last error: %v); last log lines:\n%s", ctx.Err(), lastErr, tail(logs, 15))
		case <-time.After(200 * time.Millisecond):
		}
	}
}

func (s *Server) postmasterStart(ctx context.Context) (time.Time, error) {
	cctx, cancel := context.WithTimeout(ctx, 3*time.Second)
	defer cancel()
	conn, err := pgx.Connect(cctx, s.AdminDSN())
	if err != nil {
		return time.Time{}, err
	}
	defer conn.Close(context.Background())
	var start time.Time
	err = conn.QueryRow(cctx, `SELECT pg_postmaster_start_time()`).Scan(&start)
	return start, err
}

func tail(s string, n int) string {
	lines := strings.Split(strings.TrimRight(s, "\n"), "\n")
	if len(lines) > n {
		lines = lines[len(lines)-n:]
	}
	return strings.Join(lines, "\n")
}

var unsafeName = regexp.MustCompile(`[^a-z0-9]+`)

// createDatabase makes a uniquely named database for a test, cloned from a
// migrated template when migrateTo >= 0.
func (s *Server) createDatabase(ctx context.Context, testName string, migrateTo int) (string, error) {
	base := strings.Trim(unsafeName.ReplaceAllString(strings.ToLower(testName), "_"), "_")
	if len(base) > 40 {
		base = base[:40]
	}
	name := fmt.Sprintf("t%d_%s", s.counter.Add(1), base)

	s.mu.Lock()
	defer s.mu.Unlock()
	template := "template0"
	if migrateTo >= 0 {
		var err error
		if template, err = s.template(ctx, migrateTo); err != nil {
			return "", err
		}
	}
	if err := s.adminExec(ctx, fmt.Sprintf(`CREATE DATABASE %s TEMPLATE %s`, pgx.Identifier{name}.Sanitize(), pgx.Identifier{template}.Sanitize())); err != nil {
		return "", fmt.Errorf("creating database %s: %w", name, err)
	}
	return name, nil
}

// template returns a database migrated to version v (0 = latest), building
// it once per server. Callers hold s.mu.
func (s *Server) template(ctx context.Context, v int) (string, error) {
	if name, ok := s.templates[v]; ok {
		return name, nil
	}
	name := fmt.Sprintf("ic_template_v%d", v)
	if err := s.adminExec(ctx, fmt.Sprintf(`DROP DATABASE IF EXISTS %s`, name)); err != nil {
		return "", fmt.Errorf("dropping old template %s: %w", name, err)
	}
	if err := s.adminExec(ctx, fmt.Sprintf(`CREATE DATABASE %s TEMPLATE template0`, name)); err != nil {
		return "", fmt.Errorf("creating template %s: %w", name, err)
	}
	pool, err := store.Open(ctx, s.dsn(name))
	if err != nil {
		return "", fmt.Errorf("connecting to template %s: %w", name, err)
	}
	_, err = store.MigrateUp(ctx, pool, v)
	pool.Close() // a template must have no connections when it is cloned
	if err != nil {
		return "", fmt.Errorf("migrating template %s: %w", name, err)
	}
	if s.templates == nil {
		s.templates = map[int]string{}
	}
	s.templates[v] = name
	return name, nil
}

func (s *Server) dropDatabase(ctx context.Context, name string) error {
	return s.adminExec(ctx, fmt.Sprintf(`DROP DATABASE IF EXISTS %s WITH (FORCE)`, pgx.Identifier{name}.Sanitize()))
}

func (s *Server) adminExec(ctx context.Context, sql string) error {
	conn, err := pgx.Connect(ctx, s.AdminDSN())
	if err != nil {
		return err
	}
	defer conn.Close(context.Background())
	_, err = conn.Exec(ctx, sql)
	return err
}

// Connect opens another pool on db (a second gateway replica, say), closed
// when the test ends.
func Connect(t testing.TB, db *DB) *pgxpool.Pool {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), StartTimeout)
	defer cancel()
	pool, err := store.Open(ctx, db.DSN)
	if err != nil {
		unavailable(t, fmt.Errorf("connecting to test database: %w", err))
	}
	t.Cleanup(pool.Close)
	return pool
}

// StartServer starts a Postgres container for a program that is not a test
// (a load benchmark: gateway/cmd/benchmcp). The caller ends it with
// Terminate. Tests use Shared or New.
func StartServer(ctx context.Context) (*Server, error) {
	return startServer(ctx)
}

// Terminate removes a container started by StartServer.
func (s *Server) Terminate(ctx context.Context) error { return s.terminate(ctx) }

// NewDatabase creates an empty database named after label and returns its
// name and connection string; DropDatabase removes it.
func (s *Server) NewDatabase(ctx context.Context, label string) (name, dsn string, err error) {
	name, err = s.createDatabase(ctx, label, -1)
	if err != nil {
		return "", "", err
	}
	return name, s.dsn(name), nil
}

// DropDatabase drops a database made by NewDatabase, closing its connections.
func (s *Server) DropDatabase(ctx context.Context, name string) error {
	return s.dropDatabase(ctx, name)
}
