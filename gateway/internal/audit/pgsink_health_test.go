package audit

import (
	"encoding/json"
	"errors"
	"strings"
	"testing"
	"time"

	"ironcurtain.dev/gateway/internal/store"
	"ironcurtain.dev/gateway/internal/store/pgtest"
)

// TestWriteFailureNamesCondition: when the database turns read-only the
// audit writer's failure is classified (WriteFailure: read-only, SQLSTATE
// 25006, for /readyz), records refused while the gate is down say
// "read-only" rather than "unreachable", and a successful write clears it.
func TestWriteFailureNamesCondition(t *testing.T) {
	db := pgtest.New(t, pgtest.Migrated())
	ctx := pgCtx(t)
	sink, _ := newTestSink(t, db, Options{})
	dec := func(id string) *ToolCallDecision {
		return &ToolCallDecision{CallID: id, SessionID: "h", Server: "git", Tool: "status", Args: json.RawMessage(`{}`), Decision: "allow"}
	}
	if err := sink.Record(ctx, dec("ok-1")); err != nil {
		t.Fatal(err)
	}
	if err := sink.WriteFailure(time.Minute); err != nil {
		t.Fatalf("WriteFailure after a good write = %v", err)
	}
	ident := `"` + strings.ReplaceAll(db.Name, `"`, `""`) + `"`
	if _, err := db.Pool.Exec(ctx, `ALTER DATABASE `+ident+` SET default_transaction_read_only = on`); err != nil {
		t.Fatal(err)
	}
	db.Pool.Reset()
	if err := sink.Record(ctx, dec("ro-1")); err == nil {
		t.Fatal("a write to a read-only database succeeded")
	}
	var we *store.WriteError
	if err := sink.WriteFailure(time.Minute); !errors.As(err, &we) || we.Condition != store.ReadOnly || we.Code != "25006" {
		t.Fatalf("WriteFailure = %v, want read-only 25006", err)
	}
	if sink.WriteFailure(0) != nil {
		t.Fatal("WriteFailure ignores its window")
	}
	err := sink.Record(ctx, dec("ro-2")) // the gate is down: refused without a connection
	if !errors.Is(err, ErrDatabaseDown) || !strings.Contains(err.Error(), "read-only") {
		t.Fatalf("refused while down: %v, want ErrDatabaseDown naming read-only", err)
	}

	if _, err := db.Pool.Exec(ctx, `BEGIN READ WRITE; ALTER DATABASE `+ident+` RESET default_transaction_read_only; COMMIT`); err != nil {
		t.Fatal(err)
	}
	db.Pool.Reset()
	deadline := time.Now().Add(10 * time.Second)
	for sink.Record(ctx, dec("back-"+time.Now().Format("150405.000000"))) != nil {
		if time.Now().After(deadline) {
			t.Fatal("writes did not recover")
		}
		time.Sleep(50 * time.Millisecond)
	}
	if err := sink.WriteFailure(time.Minute); err != nil {
		t.Fatalf("WriteFailure after recovery = %v", err)
	}
}
