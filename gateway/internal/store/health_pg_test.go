package store_test

import (
	"context"
	"errors"
	"testing"

	"ironcurtain.dev/gateway/internal/store"
	"ironcurtain.dev/gateway/internal/store/pgtest"
)

// TestWriteProbeOnPostgres: the probe commits on a writable database and
// reports read-only (25006) when the database's default turns read-only.
func TestWriteProbeOnPostgres(t *testing.T) {
	db := pgtest.New(t)
	ctx := context.Background()
	if err := store.WriteProbe(ctx, db.Pool); err != nil {
		t.Fatalf("writable: %v", err)
	}
	if _, err := db.Pool.Exec(ctx, `ALTER DATABASE "`+db.Name+`" SET default_transaction_read_only = on`); err != nil {
		t.Fatal(err)
	}
	db.Pool.Reset()
	var we *store.WriteError
	if err := store.WriteProbe(ctx, db.Pool); !errors.As(err, &we) || we.Condition != store.ReadOnly || we.Code != "25006" {
		t.Fatalf("read-only: %v", err)
	}
}

// BenchmarkWriteProbe: the cost of one readiness write probe.
func BenchmarkWriteProbe(b *testing.B) {
	db := pgtest.New(b)
	ctx := context.Background()
	for b.Loop() {
		if err := store.WriteProbe(ctx, db.Pool); err != nil {
			b.Fatal(err)
		}
	}
}
