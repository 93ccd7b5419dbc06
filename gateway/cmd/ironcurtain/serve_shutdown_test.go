package main

import (
	"bytes"
	"context"
	"fmt"
	"io"
	"log/slog"
	"net/http"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	sdk "github.com/modelcontextprotocol/go-sdk/mcp"

	"ironcurtain.dev/gateway/internal/store/pgtest"
)

// stoppableGateway is a serve run whose stop the test controls.
type stoppableGateway struct {
	servedGateway
	stop func() (time.Duration, error) // cancels serve and waits for it
}

// sandboxPolicy copies the shipped policy with its sandbox (/workspace)
// replaced by sandbox.
func sandboxPolicy(t *testing.T, sandbox string) string {
	t.Helper()
	dir := t.TempDir()
	for _, name := range []string{"compiled-policy.json", "tool-annotations.json", "dynamic-lists.json"} {
		b, err := os.ReadFile(filepath.Join("../../policies/base", name))
		if err != nil {
			t.Fatal(err)
		}
		b = bytes.ReplaceAll(b, []byte(`"/workspace`), []byte(`"`+sandbox))
		if err := os.WriteFile(filepath.Join(dir, name), b, 0o644); err != nil {
			t.Fatal(err)
		}
	}
	return dir
}

// runGateway starts serve on db with sandbox as the workspace and policyDir
// as the policy.
func runGateway(t *testing.T, db *pgtest.DB, sandbox, policyDir string) stoppableGateway {
	t.Helper()
	return runGatewayLogged(t, db, sandbox, policyDir, io.Discard)
}

// runGatewayLogged is runGateway with serve's JSON log written to logw.
func runGatewayLogged(t *testing.T, db *pgtest.DB, sandbox, policyDir string, logw io.Writer) stoppableGateway {
	t.Helper()
	dir := t.TempDir()
	g := servedGateway{api: freeAddr(t), proxy: freeAddr(t), ops: freeAddr(t)}
	cfg := fmt.Sprintf("sandbox: %s\npolicy_dir: %s\nservers:\n  fetch:\n    allowed_domains: [example.com]\nagent:\n  listen: %s\negress:\n  listen: %s\nops:\n  listen: %s\ngit:\n  mirror_dir: %s\naudit:\n  spool_dir: %s\n"+
		// Load tests run 8 agents of one session as fast as they can: far beyond
		// any real agent, so the loop breaker's limits are raised here (its own
		// tests are in internal/loopguard and internal/doors/mcphub).
		"loop_breaker:\n  calls_per_minute: 1000000\n  identical_calls: 100000\n",
		sandbox, policyDir, g.api, g.proxy, g.ops, filepath.Join(dir, "mirror"), filepath.Join(dir, "spool"))
	cfgPath := filepath.Join(dir, "gateway.yaml")
	if err := os.WriteFile(cfgPath, []byte(cfg), 0o600); err != nil {
		t.Fatal(err)
	}
	env := map[string]string{
		"IRONCURTAIN_DATABASE_URL":   db.DSN,
		"IRONCURTAIN_AGENT_TOKEN":    testAgentToken,
		"IRONCURTAIN_OPERATOR_TOKEN": testOperatorToken,
		"PATH":                       os.Getenv("PATH"),
	}
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan error, 1)
	log := slog.New(slog.NewJSONHandler(&syncWriter{w: logw}, nil))
	go func() { done <- serve(ctx, cfgPath, func(k string) string { return env[k] }, log) }()
	stopped := false
	stop := func() (time.Duration, error) {
		if stopped {
			return 0, nil
		}
		stopped = true
		begin := time.Now()
		cancel()
		select {
		case err := <-done:
			return time.Since(begin), err
		case <-time.After(30 * time.Second):
			return time.Since(begin), fmt.Errorf("serve did not stop within 30s")
		}
	}
	t.Cleanup(func() {
		if _, err := stop(); err != nil {
			t.Errorf("stopping serve: %v", err)
		}
	})
	deadline := time.Now().Add(30 * time.Second)
	for {
		resp, err := http.Get("http://" + g.api + "/healthz")
		if err == nil {
			resp.Body.Close()
			if resp.StatusCode == http.StatusOK {
				return stoppableGateway{servedGateway: g, stop: stop}
			}
		}
		if time.Now().After(deadline) {
			t.Fatalf("gateway did not answer /healthz: %v", err)
		}
		time.Sleep(100 * time.Millisecond)
	}
}

type bearerTransport struct{ token string }

func (b bearerTransport) RoundTrip(r *http.Request) (*http.Response, error) {
	r = r.Clone(r.Context())
	r.Header.Set("Authorization", "Bearer "+b.token)
	return http.DefaultTransport.RoundTrip(r)
}

func connectAgent(t *testing.T, api string) *sdk.ClientSession {
	t.Helper()
	c := sdk.NewClient(&sdk.Implementation{Name: "serve-test-agent", Version: "1"}, nil)
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	cs, err := c.Connect(ctx, &sdk.StreamableClientTransport{
		Endpoint: "http://" + api + "/mcp", HTTPClient: &http.Client{Transport: bearerTransport{token: testAgentToken}}, MaxRetries: -1,
	}, nil)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = cs.Close() })
	return cs
}

type callResult struct {
	text    string
	isError bool
	err     error
}

func callAsync(cs *sdk.ClientSession, name string, args map[string]any) <-chan callResult {
	out := make(chan callResult, 1)
	go func() {
		res, err := cs.CallTool(context.Background(), &sdk.CallToolParams{Name: name, Arguments: args})
		r := callResult{err: err}
		if res != nil {
			r.isError = res.IsError
			for _, c := range res.Content {
				if tc, ok := c.(*sdk.TextContent); ok {
					r.text += tc.Text
				}
			}
		}
		out <- r
	}()
	return out
}

// pendingEscalation polls for a pending escalation other than the ones in
// seen.
func pendingEscalation(t *testing.T, db *pgtest.DB, seen ...string) string {
	t.Helper()
	deadline := time.Now().Add(30 * time.Second)
	for time.Now().Before(deadline) {
		var id string
		err := db.Pool.QueryRow(context.Background(), `SELECT id FROM escalations
WHERE status = 'pending' AND NOT (id = ANY($1)) ORDER BY created_at LIMIT 1`, append([]string{}, seen...)).Scan(&id)
		if err == nil {
			return id
		}
		time.Sleep(50 * time.Millisecond)
	}
	var calls []string
	rows, err := db.Pool.Query(context.Background(), `SELECT tool || ' ' || decision || ' ' || rule || ' ' || args || ' ' || detail FROM tool_calls ORDER BY seq`)
	if err == nil {
		for rows.Next() {
			var s string
			_ = rows.Scan(&s)
			calls = append(calls, s)
		}
		rows.Close()
	}
	t.Fatalf("no pending escalation appeared (tool calls: %q)", calls)
	return ""
}

func opsDecide(t *testing.T, ops, id, verb string) {
	t.Helper()
	req, _ := http.NewRequest(http.MethodPost, "http://"+ops+"/v1/escalations/"+id+"/"+verb, strings.NewReader(`{"reason":"serve test"}`))
	req.Header.Set("Authorization", "Bearer "+testOperatorToken)
	req.Header.Set("Content-Type", "application/json")
	// A connection of its own, as the operator CLI opens: a kept-alive one
	// from an earlier request may be the idle connection a flood of others
	// evicts, and a POST written into it as it closes is not retried.
	client := &http.Client{Transport: &http.Transport{DisableKeepAlives: true}, Timeout: 30 * time.Second}
	resp, err := client.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	resp.Body.Close()
	if resp.StatusCode != http.StatusOK {
		t.Fatalf("%s %s: status %d", verb, id, resp.StatusCode)
	}
}

// TestServeStopWithPendingEscalation: the gateway stops while a call waits
// for a human. The stop is prompt (well within Docker's 10 s), the agent
// gets a clear answer, the call's outcome is recorded and the escalation
// stays pending. On the next gateway an operator approves it plainly; the
// identical retry runs on that approval once, and a second identical retry
// asks again.
func TestServeStopWithPendingEscalation(t *testing.T) {
	db := pgtest.New(t, pgtest.Migrated())
	ctx := context.Background()
	sandbox := t.TempDir()
	policyDir := sandboxPolicy(t, sandbox)
	if err := os.WriteFile(filepath.Join(sandbox, "a.txt"), []byte("the restart note\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	// Moving a file away deletes it: the policy escalates it.
	const tool = "filesystem__move_file"
	move := map[string]any{"source": filepath.Join(sandbox, "a.txt"), "destination": filepath.Join(sandbox, "b.txt")}

	first := runGateway(t, db, sandbox, policyDir)
	waiting := callAsync(connectAgent(t, first.api), tool, move)
	escID := pendingEscalation(t, db)
	took, err := first.stop()
	if err != nil {
		t.Fatal(err)
	}
	t.Logf("gateway stopped in %v with a call waiting for a human", took)
	if took > 3*time.Second {
		t.Errorf("stop took %v; a waiting call must not hold it up", took)
	}

	t.Run("the waiting call was answered and recorded", func(t *testing.T) {
		var r callResult
		select {
		case r = <-waiting:
		case <-time.After(10 * time.Second):
			t.Fatal("the waiting call got no answer")
		}
		if r.err != nil || !r.isError || !strings.Contains(r.text, "the gateway restarted while this call waited for approval of escalation "+escID) {
			t.Fatalf("agent saw %+v", r)
		}
		var status, errText string
		if err := db.Pool.QueryRow(ctx, `SELECT o.status, o.error FROM tool_calls c JOIN tool_call_outcomes o USING (call_id)
WHERE c.escalation_id = $1`, escID).Scan(&status, &errText); err != nil {
			t.Fatalf("outcome of the interrupted call: %v", err)
		}
		if status != "refused" || errText != "gateway shutting down; escalation "+escID+" is still pending" {
			t.Fatalf("outcome %s %q", status, errText)
		}
		var escStatus string
		if err := db.Pool.QueryRow(ctx, `SELECT status FROM escalations WHERE id = $1`, escID).Scan(&escStatus); err != nil || escStatus != "pending" {
			t.Fatalf("escalation after the stop: %s %v, want pending", escStatus, err)
		}
	})

	second := runGateway(t, db, sandbox, policyDir)
	opsDecide(t, second.ops, escID, "approve") // plainly: no "similar"
	agent := connectAgent(t, second.api)

	t.Run("the identical retry runs on the approval", func(t *testing.T) {
		r := <-callAsync(agent, tool, move)
		if r.err != nil || r.isError {
			t.Fatalf("retry: %+v", r)
		}
		if b, err := os.ReadFile(filepath.Join(sandbox, "b.txt")); err != nil || string(b) != "the restart note\n" {
			t.Fatalf("the file was not moved: %q %v", b, err)
		}
		var consumedBy, retryEsc, outcome string
		if err := db.Pool.QueryRow(ctx, `SELECT e.consumed_by_call_id, c.escalation_id, o.status
FROM escalations e JOIN tool_calls c ON c.call_id = e.consumed_by_call_id JOIN tool_call_outcomes o ON o.call_id = c.call_id
WHERE e.id = $1`, escID).Scan(&consumedBy, &retryEsc, &outcome); err != nil {
			t.Fatalf("reading who used the approval: %v", err)
		}
		if retryEsc != escID || outcome != "ok" {
			t.Fatalf("the retry %s names escalation %s with outcome %s", consumedBy, retryEsc, outcome)
		}
	})

	t.Run("a second identical retry asks again", func(t *testing.T) {
		again := callAsync(agent, tool, move)
		next := pendingEscalation(t, db, escID)
		opsDecide(t, second.ops, next, "deny")
		r := <-again
		if r.err != nil || !r.isError || !strings.Contains(r.text, "a human denied it") {
			t.Fatalf("second retry: %+v", r)
		}
	})
}
