package store

import (
	"context"
	"errors"
	"fmt"
	"io"
	"net"
	"testing"

	"github.com/jackc/pgx/v5/pgconn"
)

func TestClassify(t *testing.T) {
	tests := []struct {
		name string
		err  error
		want Condition // "" : not a write condition
		code string
		text string
	}{
		{name: "nil"},
		{name: "read-only", err: fmt.Errorf("writing: %w", &pgconn.PgError{Code: "25006"}), want: ReadOnly, code: "25006", text: "database read-only (SQLSTATE 25006)"},
		{name: "disk full", err: &pgconn.PgError{Code: "53100"}, want: DiskFull, code: "53100", text: "database disk full (SQLSTATE 53100)"},
		{name: "out of memory", err: &pgconn.PgError{Code: "53200"}, want: OutOfResources, code: "53200"},
		{name: "too many connections", err: &pgconn.PgError{Code: "53300"}, want: OutOfResources, code: "53300"},
		{name: "admin shutdown", err: &pgconn.PgError{Code: "57P01"}, want: Unreachable, code: "57P01"},
		{name: "connection failure", err: &pgconn.PgError{Code: "08006"}, want: Unreachable, code: "08006"},
		{name: "connect error", err: fmt.Errorf("x: %w", &pgconn.ConnectError{}), want: Unreachable, text: "database unreachable"},
		{name: "network", err: &net.OpError{Op: "read", Err: errors.New("reset")}, want: Unreachable},
		{name: "deadline", err: context.DeadlineExceeded, want: Unreachable},
		{name: "eof", err: io.ErrUnexpectedEOF, want: Unreachable},
		{name: "constraint", err: &pgconn.PgError{Code: "23505"}},
		{name: "undefined table", err: &pgconn.PgError{Code: "42P01"}},
		{name: "serialization", err: &pgconn.PgError{Code: "40001"}},
		{name: "other", err: errors.New("boom")},
		{name: "already classified", err: fmt.Errorf("probe: %w", &WriteError{Condition: DiskFull, Code: "53100", Err: &pgconn.PgError{Code: "53100"}}), want: DiskFull, code: "53100"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			got := Classify(tt.err)
			if tt.want == "" {
				if got != nil {
					t.Fatalf("Classify = %v, want nil", got)
				}
				return
			}
			if got == nil || got.Condition != tt.want || got.Code != tt.code {
				t.Fatalf("Classify = %+v, want %s %s", got, tt.want, tt.code)
			}
			if tt.text != "" && got.Error() != tt.text {
				t.Fatalf("text %q, want %q", got.Error(), tt.text)
			}
			if tt.err != nil && got.Unwrap() == nil {
				t.Fatal("the cause is lost")
			}
		})
	}
}
