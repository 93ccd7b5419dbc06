package opscli

import (
	"bytes"
	"context"
	"encoding/json"
	"net/http/httptest"
	"os"
	"strings"
	"testing"
	"time"

	"ironcurtain.dev/gateway/internal/audit"
	"ironcurtain.dev/gateway/internal/escalation"
	"ironcurtain.dev/gateway/internal/ops/opsapi"
	"ironcurtain.dev/gateway/internal/store/pgtest"
)

func TestMain(m *testing.M) { os.Exit(pgtest.Main(m)) }

const opToken = "operator-token-0123456789abcdef"

func run(t *testing.T, fn func(context.Context, []string, Env) int, env map[string]string, args ...string) (int, string, string) {
	t.Helper()
	var out, errOut bytes.Buffer
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	code := fn(ctx, args, Env{Getenv: func(k string) string { return env[k] }, Stdout: &out, Stderr: &errOut})
	return code, out.String(), errOut.String()
}

func TestUsageErrors(t *testing.T) {
	tests := []struct {
		name string
		fn   func(context.Context, []string, Env) int
		args []string
		want string
	}{
		{name: "migrate no subcommand", fn: Migrate, args: nil, want: "missing subcommand"},
		{name: "migrate no database", fn: Migrate, args: []string{"status"}, want: "IRONCURTAIN_DATABASE_URL"},
		{name: "audit no subcommand", fn: Audit, args: nil, want: "missing subcommand"},
		{name: "audit bad decision", fn: Audit, args: []string{"query", "--decision", "maybe"}, want: "decision"},
		{name: "audit bad since", fn: Audit, args: []string{"query", "--since", "yesterday"}, want: "--since"},
		{name: "escalations unknown", fn: Escalations, args: []string{"frobnicate"}, want: "unknown subcommand"},
		{name: "escalations approve without id", fn: Escalations, args: []string{"approve"}, want: "exactly one escalation id"},
		{name: "escalations no token", fn: Escalations, args: []string{"list"}, want: "IRONCURTAIN_OPERATOR_TOKEN"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			code, _, errOut := run(t, tt.fn, nil, tt.args...)
			if code == 0 || !strings.Contains(errOut, tt.want) {
				t.Fatalf("exit %d, stderr %q; want non-zero and %q", code, errOut, tt.want)
			}
		})
	}
}

func TestMigrateAndAuditCommands(t *testing.T) {
	db := pgtest.New(t)
	env := map[string]string{EnvDatabaseURL: db.DSN}
	code, out, errOut := run(t, Migrate, env, "up")
	if code != 0 || !strings.Contains(out, "0003_ops_views") || !strings.Contains(out, "current") {
		t.Fatalf("migrate up: %d %q %q", code, out, errOut)
	}
	code, out, _ = run(t, Migrate, env, "down", "--steps", "1")
	if code != 0 || !strings.Contains(out, "older than this gateway") {
		t.Fatalf("migrate down: %d %q", code, out)
	}
	if code, out, _ = run(t, Migrate, env, "up"); code != 0 {
		t.Fatalf("migrate up again: %d %q", code, out)
	}

	ctx := context.Background()
	sink, err := audit.NewPG(db.Pool, audit.Options{}, nil, nil)
	if err != nil {
		t.Fatal(err)
	}
	for _, c := range []string{"c1", "c2"} {
		if err := sink.Record(ctx, &audit.ToolCallDecision{CallID: c, SessionID: "s1", Server: "git", Tool: "push",
			Args: json.RawMessage(`{}`), Decision: "deny", Rule: "protected-branch", Reason: "main is protected"}); err != nil {
			t.Fatal(err)
		}
	}
	_ = sink.Close()

	code, out, _ = run(t, Audit, env, "verify")
	if code != 0 || !strings.Contains(out, "1 sessions checked, 0 broken") {
		t.Fatalf("verify: %d %q", code, out)
	}
	// Two denied decisions without outcome rows: gaps, "never ran".
	if strings.Count(out, "GAP") != 2 || strings.Count(out, audit.GapNeverRan) != 2 || !strings.Contains(out, "1 with decisions missing an outcome") {
		t.Fatalf("verify gaps: %q", out)
	}
	code, out, _ = run(t, Audit, env, "verify", "--json")
	var checks []audit.SessionCheck
	if err := json.Unmarshal([]byte(out), &checks); code != 0 || err != nil || len(checks) != 1 || checks[0].GapCount != 2 || checks[0].Gaps[0].Kind != audit.GapNeverRan {
		t.Fatalf("verify --json: %d %v %q", code, err, out)
	}
	code, out, _ = run(t, Audit, env, "query", "--decision", "deny", "--session", "s1")
	if code != 0 || strings.Count(out, "git__push") != 2 || !strings.Contains(out, "DECISION") {
		t.Fatalf("query: %d %q", code, out)
	}
	code, out, _ = run(t, Audit, env, "query", "--json", "--limit", "1")
	if code != 0 || strings.Count(out, "\n") != 1 || !json.Valid([]byte(strings.TrimSpace(out))) {
		t.Fatalf("query --json: %d %q", code, out)
	}
	if _, err := db.Pool.Exec(ctx, `UPDATE tool_calls SET reason = 'fine' WHERE call_id = 'c2'`); err != nil {
		t.Fatal(err)
	}
	code, out, _ = run(t, Audit, env, "verify", "--session", "s1")
	if code != 1 || !strings.Contains(out, "BROKEN") || !strings.Contains(out, "tool_calls row c2") {
		t.Fatalf("verify after tampering: %d %q", code, out)
	}
}

func TestEscalationsCommands(t *testing.T) {
	db := pgtest.New(t, pgtest.Migrated())
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	esc, err := escalation.NewPG(db.Pool, escalation.Config{}, nil, nil)
	if err != nil {
		t.Fatal(err)
	}
	defer esc.Close()
	ops, _ := opsapi.NewOperators(map[string]opsapi.OperatorToken{"alice": opToken})
	srv := httptest.NewServer(opsapi.New(opsapi.Deps{Operators: ops, Escalations: esc, Data: opsapi.PGData{Pool: db.Pool}}))
	defer srv.Close()
	done := make(chan escalation.Result, 1)
	go func() {
		res, _ := esc.Escalate(ctx, escalation.Request{ID: "esc-1", CallID: "c1", SessionID: "s1", Server: "git", Tool: "push", Reason: "push needs approval"})
		done <- res
	}()
	env := map[string]string{EnvOpsURL: srv.URL, EnvOperatorToken: opToken}
	var out string
	for deadline := time.Now().Add(20 * time.Second); !strings.Contains(out, "esc-1") && time.Now().Before(deadline); {
		_, out, _ = run(t, Escalations, env, "list")
		time.Sleep(20 * time.Millisecond)
	}
	if !strings.Contains(out, "git__push") || !strings.Contains(out, "pending") {
		t.Fatalf("list: %q", out)
	}
	code, out, _ := run(t, Escalations, env, "show", "esc-1")
	if code != 0 || !strings.Contains(out, "push needs approval") {
		t.Fatalf("show: %d %q", code, out)
	}
	tokenFile := t.TempDir() + "/token"
	if err := os.WriteFile(tokenFile, []byte(opToken+"\n"), 0o600); err != nil {
		t.Fatal(err)
	}
	code, out, errOut := run(t, Escalations, map[string]string{EnvOpsURL: srv.URL}, "approve", "esc-1", "--reason", "reviewed", "--json", "--token-file", tokenFile)
	if code != 0 || !strings.Contains(out, `"decided_by": "alice"`) {
		t.Fatalf("approve: %d %q %q", code, out, errOut)
	}
	if res := <-done; !res.Approved || res.Reason != "reviewed" {
		t.Fatalf("waiting call got %+v", res)
	}
	code, _, errOut = run(t, Escalations, env, "deny", "esc-1")
	if code != 1 || !strings.Contains(errOut, "already decided") {
		t.Fatalf("deny after approve: %d %q", code, errOut)
	}
	code, _, errOut = run(t, Escalations, map[string]string{EnvOpsURL: srv.URL, EnvOperatorToken: "agent-token-0123456789abcdef"}, "list")
	if code != 1 || !strings.Contains(errOut, "401") {
		t.Fatalf("wrong token: %d %q", code, errOut)
	}
}
