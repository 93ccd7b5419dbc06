package opsapi

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"log/slog"
	"net/http"
	"strings"
	"testing"

	"github.com/jackc/pgx/v5/pgconn"

	"ironcurtain.dev/gateway/internal/escalation"
	"ironcurtain.dev/gateway/internal/store"
	"ironcurtain.dev/gateway/internal/store/pgtest"
)

// TestReadyzReportsAuditWriteFailure: while the audit writer fails to write
// (a full disk seen by its last write), calls are refused, so /readyz is
// 503 naming the condition even though the database answers; it is 200
// again once the writer recovers.
func TestReadyzReportsAuditWriteFailure(t *testing.T) {
	ops, _ := NewOperators(map[string]OperatorToken{"alice": opToken})
	var writeErr error = &store.WriteError{Condition: store.DiskFull, Code: "53100", Err: &pgconn.PgError{Code: "53100"}}
	h := New(Deps{Operators: ops, Escalations: &fakeEscalations{}, Data: &fakeData{}, WriteHealth: func() error { return writeErr }})
	rec := serve(t, h, http.MethodGet, "/readyz")
	if rec.Code != http.StatusServiceUnavailable || !strings.Contains(errorCode(t, rec).Error.Message, "audit writes failing: database disk full (SQLSTATE 53100)") {
		t.Fatalf("status %d: %s", rec.Code, rec.Body)
	}
	writeErr = nil
	if rec := serve(t, h, http.MethodGet, "/readyz"); rec.Code != http.StatusOK {
		t.Fatalf("after recovery: status %d: %s", rec.Code, rec.Body)
	}
}

// TestDatabaseFailuresLogSummarised: a storm of requests answered 503 logs
// one line when it starts and one per interval, not one per request (the
// gateway logged "database unreachable" 705 times a minute).
func TestDatabaseFailuresLogSummarised(t *testing.T) {
	var logs bytes.Buffer
	ops, _ := NewOperators(map[string]OperatorToken{"alice": opToken})
	esc := &fakeEscalations{err: fmt.Errorf("deciding escalation e1: %w", &pgconn.PgError{Code: "25006"})}
	h := New(Deps{Operators: ops, Escalations: esc, Data: &fakeData{err: esc.err}, Logger: slog.New(slog.NewJSONHandler(&logs, nil))})
	for range 500 {
		if rec := serve(t, h, http.MethodPost, "/v1/escalations/e1/approve"); rec.Code != http.StatusServiceUnavailable {
			t.Fatalf("status %d: %s", rec.Code, rec.Body)
		}
	}
	if n := strings.Count(logs.String(), "\n"); n > 2 {
		t.Fatalf("%d log lines for 500 refused requests:\n%s", n, logs.String())
	}
}

// TestReadOnlyDatabaseNotReady: with the database read-only
// (default_transaction_read_only, as after ALTER SYSTEM on a database
// running out of disk or a demoted primary), /readyz answered 200 and
// approving an escalation 500; now /readyz is 503 naming read-only, the
// approval is 503 with the condition, and both recover when it is writable.
func TestReadOnlyDatabaseNotReady(t *testing.T) {
	db := pgtest.New(t, pgtest.Migrated())
	ctx := context.Background()
	esc, err := escalation.NewPG(db.Pool, escalation.Config{}, nil, nil)
	if err != nil {
		t.Fatal(err)
	}
	defer esc.Close()
	if _, err := db.Pool.Exec(ctx, `INSERT INTO escalations (id, call_id, session_id, kind, status, expires_at) VALUES ('e1', 'c1', 's1', 'tool_call', 'pending', now() + interval '1 hour')`); err != nil {
		t.Fatal(err)
	}
	ops, _ := NewOperators(map[string]OperatorToken{"alice": opToken})
	h := New(Deps{Operators: ops, Escalations: esc, Data: PGData{Pool: db.Pool}})
	if rec := serve(t, h, http.MethodGet, "/readyz"); rec.Code != http.StatusOK {
		t.Fatalf("writable: status %d: %s", rec.Code, rec.Body)
	}

	setReadOnly := func(on bool) {
		t.Helper()
		stmt := `ALTER DATABASE ` + pgIdent(db.Name) + ` SET default_transaction_read_only = on`
		if !on {
			stmt = `BEGIN READ WRITE; ALTER DATABASE ` + pgIdent(db.Name) + ` RESET default_transaction_read_only; COMMIT`
		}
		if _, err := db.Pool.Exec(ctx, stmt); err != nil {
			t.Fatal(err)
		}
		db.Pool.Reset() // new connections take the database default
	}
	setReadOnly(true)
	rec := serve(t, h, http.MethodGet, "/readyz")
	if rec.Code != http.StatusServiceUnavailable || !strings.Contains(errorCode(t, rec).Error.Message, "database read-only (SQLSTATE 25006)") {
		t.Fatalf("read-only: /readyz %d: %s", rec.Code, rec.Body)
	}
	rec = serve(t, h, http.MethodPost, "/v1/escalations/e1/approve")
	if rec.Code != http.StatusServiceUnavailable || !strings.Contains(errorCode(t, rec).Error.Message, "read-only") {
		t.Fatalf("read-only: approve %d: %s", rec.Code, rec.Body)
	}
	var we *store.WriteError
	if err := store.WriteProbe(ctx, db.Pool); !errors.As(err, &we) || we.Condition != store.ReadOnly {
		t.Fatalf("WriteProbe = %v, want read-only", err)
	}

	setReadOnly(false)
	if rec := serve(t, h, http.MethodGet, "/readyz"); rec.Code != http.StatusOK {
		t.Fatalf("writable again: status %d: %s", rec.Code, rec.Body)
	}
	if rec := serve(t, h, http.MethodPost, "/v1/escalations/e1/approve"); rec.Code != http.StatusOK {
		t.Fatalf("writable again: approve %d: %s", rec.Code, rec.Body)
	}
}

func pgIdent(s string) string { return `"` + strings.ReplaceAll(s, `"`, `""`) + `"` }
