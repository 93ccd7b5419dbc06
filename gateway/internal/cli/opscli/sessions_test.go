package opscli

import (
	"encoding/json"
	"net/http"
	"net/http/httptest"
	"strings"
	"sync"
	"testing"
	"time"

	"ironcurtain.dev/gateway/internal/ops/opsapi"
	"ironcurtain.dev/gateway/internal/session/minted"
)

const mintedToken = "icsess_0123456789abcdefghijklmnopqrstuvwxyzABCDEFG"

// fakeSessionsAPI answers the session routes and keeps what it was sent.
func fakeSessionsAPI(t *testing.T) (*httptest.Server, *[]string) {
	t.Helper()
	var mu sync.Mutex
	var got []string
	exp := time.Date(2030, 1, 1, 0, 0, 0, 0, time.UTC)
	sum := opsapi.SessionSummary{SessionID: "sess_abcdefghijklmnopqrstuvwxyz", Status: "active", ToolCalls: 4, Denied: 1,
		Minted: &minted.Session{ID: "sess_abcdefghijklmnopqrstuvwxyz", Name: "run-1", Status: "active", CreatedBy: "alice", ExpiresAt: exp,
			Budget: minted.Budget{MaxToolCalls: 9}, ToolCallsUsed: 4, Labels: map[string]string{"team": "infra"}}}
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if r.Header.Get("Authorization") != "Bearer "+opToken {
			http.Error(w, `{"error":{"code":"unauthorized","message":"no"}}`, http.StatusUnauthorized)
			return
		}
		body := map[string]any{}
		_ = json.NewDecoder(r.Body).Decode(&body)
		b, _ := json.Marshal(body)
		mu.Lock()
		got = append(got, r.Method+" "+r.URL.Path+" "+r.URL.RawQuery+" "+string(b))
		mu.Unlock()
		w.Header().Set("Content-Type", "application/json")
		switch {
		case r.Method == "POST" && r.URL.Path == "/v1/sessions":
			w.WriteHeader(http.StatusCreated)
			_ = json.NewEncoder(w).Encode(opsapi.CreatedSession{Session: sum, Token: mintedToken})
		case r.Method == "GET" && r.URL.Path == "/v1/sessions":
			var list []opsapi.SessionSummary
			for _, s := range []opsapi.SessionSummary{sum, {SessionID: "agent", Status: "static"}} {
				if st := r.URL.Query().Get("status"); st == "" || st == "all" || st == s.Status {
					list = append(list, s)
				}
			}
			_ = json.NewEncoder(w).Encode(map[string]any{"sessions": list})
		case r.Method == "GET":
			_ = json.NewEncoder(w).Encode(sum)
		case r.Method == "DELETE":
			rev := sum
			rev.Status = "revoked"
			_ = json.NewEncoder(w).Encode(opsapi.RevokedSession{Session: rev, CancelledEscalations: []string{"e-7"}})
		}
	}))
	t.Cleanup(srv.Close)
	return srv, &got
}

func TestSessionsCLI(t *testing.T) {
	srv, got := fakeSessionsAPI(t)
	env := map[string]string{EnvOpsURL: srv.URL, EnvOperatorToken: opToken}

	code, out, errOut := run(t, Sessions, env, "create", "--name", "run-1", "--ttl", "2h", "--max-tool-calls", "9", "--max-cost-usd", "1.5",
		"--label", "team=infra", "--label", "ci/job=42")
	if code != 0 {
		t.Fatalf("create: %d %s", code, errOut)
	}
	if strings.Count(out, mintedToken) != 1 || !strings.Contains(out, "shown once") || !strings.Contains(out, "9 tool calls (4 used)") {
		t.Fatalf("create printed:\n%s", out)
	}
	req := (*got)[0]
	for _, want := range []string{`"name":"run-1"`, `"ttl":"2h"`, `"max_tool_calls":9`, `"max_cost_usd":1.5`, `"ci/job":"42"`, `"team":"infra"`} {
		if !strings.Contains(req, want) {
			t.Errorf("request %s lacks %s", req, want)
		}
	}

	if code, out, _ = run(t, Sessions, env, "create", "--name", "run-1", "--print-token"); code != 0 || out != mintedToken+"\n" {
		t.Fatalf("--print-token: %d %q", code, out)
	}

	code, out, _ = run(t, Sessions, env, "list", "--status", "active")
	if code != 0 || !strings.Contains(out, "run-1") || strings.Contains(out, "static") {
		t.Fatalf("list --status active: %d\n%s", code, out)
	}
	if code, out, _ = run(t, Sessions, env, "list", "--json"); code != 0 || !strings.Contains(out, `"static"`) || strings.Contains(out, mintedToken) {
		t.Fatalf("list --json: %d\n%s", code, out)
	}
	if code, out, _ = run(t, Sessions, env, "show", "sess_abcdefghijklmnopqrstuvwxyz"); code != 0 || !strings.Contains(out, "label team:") || strings.Contains(out, mintedToken) {
		t.Fatalf("show: %d\n%s", code, out)
	}
	code, out, _ = run(t, Sessions, env, "revoke", "sess_abcdefghijklmnopqrstuvwxyz", "--reason", "done")
	if code != 0 || !strings.Contains(out, "revoked") || !strings.Contains(out, "cancelled escalations: 1 e-7") {
		t.Fatalf("revoke: %d\n%s", code, out)
	}
	if !strings.Contains(strings.Join(*got, "\n"), "GET /v1/sessions limit=100&status=active") {
		t.Errorf("list --status active did not ask the server to filter: %v", *got)
	}
	if last := (*got)[len(*got)-1]; !strings.HasPrefix(last, "DELETE /v1/sessions/sess_abcdefghijklmnopqrstuvwxyz") || !strings.Contains(last, `"reason":"done"`) {
		t.Fatalf("revoke sent %s", last)
	}
}

func TestSessionsCLIUsage(t *testing.T) {
	srv, got := fakeSessionsAPI(t)
	env := map[string]string{EnvOpsURL: srv.URL, EnvOperatorToken: opToken}
	for _, args := range [][]string{
		{},
		{"bogus"},
		{"create"},
		{"create", "--name", "r", "--print-token", "--json"},
		{"create", "--name", "r", "--label", "novalue"},
		{"create", "--name", "r", "--label", "k=1", "--label", "k=2"},
		{"create", "--name", "r", "--expires-at", "tomorrow"},
		{"list", "extra"},
		{"list", "--status", "weird"},
		{"show"},
		{"revoke", "a", "b"},
	} {
		if code, _, _ := run(t, Sessions, env, args...); code != 2 {
			t.Errorf("%v: exit %d, want 2", args, code)
		}
	}
	if len(*got) != 0 {
		t.Fatalf("bad usage reached the API: %v", *got)
	}
	if code, _, errOut := run(t, Sessions, map[string]string{EnvOpsURL: srv.URL, EnvOperatorToken: "wrong-token-0123456789abcdef"}, "list"); code != 1 || !strings.Contains(errOut, "401") {
		t.Fatalf("wrong operator token: %d %s", code, errOut)
	}
}
