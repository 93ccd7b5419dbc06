package store

import (
	"context"
	"errors"
	"fmt"
	"io"
	"net"
	"strings"

	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgconn"
	"github.com/jackc/pgx/v5/pgxpool"
)

// Condition says why the database cannot take the gateway's writes.
type Condition string

// Conditions, from the SQLSTATE or the kind of error.
const (
	// ReadOnly: 25006 read_only_sql_transaction (default_transaction_read_only,
	// a hot standby, a database made read-only by its operator).
	ReadOnly Condition = "read-only"
	// DiskFull: 53100 disk_full.
	DiskFull Condition = "disk full"
	// OutOfResources: the other 53xxx codes (out of memory, too many
	// connections, configuration limit exceeded).
	OutOfResources Condition = "out of resources"
	// Unreachable: no connection, a broken one, a server shutting down
	// (class 08, 57P0x), or no answer in time.
	Unreachable Condition = "unreachable"
)

// WriteError is a database failure that means writes fail now: the
// readiness probe, the audit writer and the ops API report it with its
// condition, never as an internal error.
type WriteError struct {
	Condition Condition
	Code      string // SQLSTATE, "" for a connection error
	Err       error
}

func (e *WriteError) Error() string {
	if e.Code != "" {
		return fmt.Sprintf("database %s (SQLSTATE %s)", e.Condition, e.Code)
	}
	return "database " + string(e.Condition)
}

func (e *WriteError) Unwrap() error { return e.Err }

// Classify returns the condition err stands for, or nil when err is not a
// "writes fail now" condition (a constraint violation, a bad statement).
// It sees through wrapping.
func Classify(err error) *WriteError {
	if err == nil {
		return nil
	}
	var we *WriteError
	if errors.As(err, &we) {
		return we
	}
	var pgErr *pgconn.PgError
	if errors.As(err, &pgErr) {
		c := pgErr.Code
		switch {
		case c == "25006":
			return &WriteError{Condition: ReadOnly, Code: c, Err: err}
		case c == "53100":
			return &WriteError{Condition: DiskFull, Code: c, Err: err}
		case strings.HasPrefix(c, "53"):
			return &WriteError{Condition: OutOfResources, Code: c, Err: err}
		case strings.HasPrefix(c, "08"), strings.HasPrefix(c, "57P"):
			return &WriteError{Condition: Unreachable, Code: c, Err: err}
		}
		return nil
	}
	var ce *pgconn.ConnectError
	var ne net.Error
	if errors.As(err, &ce) || errors.As(err, &ne) || pgconn.Timeout(err) ||
		errors.Is(err, context.DeadlineExceeded) || errors.Is(err, io.ErrUnexpectedEOF) || errors.Is(err, io.EOF) {
		return &WriteError{Condition: Unreachable, Err: err}
	}
	return nil
}

// WriteProbe checks that the database takes a write now: in one
// transaction it creates a temporary table and inserts a row, then commits
// (the table is dropped at commit). A read-only database refuses the
// CREATE (25006); a full disk or exhausted resources fail it (53xxx); a
// database that cannot be reached fails the BEGIN. It writes nothing any
// other session sees. The error is a *WriteError when classified.
func WriteProbe(ctx context.Context, pool *pgxpool.Pool) error {
	err := pgx.BeginFunc(ctx, pool, func(tx pgx.Tx) error {
		if _, err := tx.Exec(ctx, `CREATE TEMP TABLE ironcurtain_write_probe (at timestamptz) ON COMMIT DROP`); err != nil {
			return err
		}
		_, err := tx.Exec(ctx, `INSERT INTO ironcurtain_write_probe VALUES (now())`)
		return err
	})
	if err == nil {
		return nil
	}
	if we := Classify(err); we != nil {
		return we
	}
	return fmt.Errorf("database write probe: %w", err)
}
