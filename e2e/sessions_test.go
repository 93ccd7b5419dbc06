package e2e_test

import (
	"encoding/json"
	"strings"
	"testing"
	"time"

	"ironcurtain.dev/e2e/internal/stack"
)

// mintedWork is what the agent does with a minted session's token.
const mintedWork = `name: e2e-minted-work
steps:
  - say: I look around and write a file.
    code: |
      const dirs = filesystem.list_allowed_directories({});
      filesystem.create_directory({ path: "/workspace/minted" });
      filesystem.write_file({ path: "/workspace/minted/a.txt", content: "minted session\n" });
      return "wrote " + dirs.length;
  - expect: { status: ok, contains: ["wrote "] }
    final: Done.
`

// mintedWaits asks for a move (a human decides); the session is revoked
// while it waits.
const mintedWaits = `name: e2e-minted-waits
steps:
  - say: I move the file (a human has to approve).
    code: |
      try {
        filesystem.move_file({ source: "/workspace/minted/a.txt", destination: "/workspace/minted/b.txt" });
        return "UNEXPECTED: moved";
      } catch (e: any) {
        return "refused: " + e.message;
      }
  - expect: { status: ok, contains: ["refused: "], not_contains: ["UNEXPECTED"] }
    final: Not moved.
`

// doorScript prints "<door> <status>" for one request per door with $TOK,
// from the agent-shell container (curl; the egress proxy's CONNECT status).
const doorScript = `code() { curl -s -o /dev/null --noproxy '*' -w '%{http_code}' --max-time 20 "$@" || true; }
echo "mcp $(code -X POST -H "Authorization: Bearer $TOK" -H 'Content-Type: application/json' -H 'Accept: application/json, text/event-stream' \
  --data '{"jsonrpc":"2.0","id":1,"method":"initialize","params":{"protocolVersion":"2025-06-18","capabilities":{},"clientInfo":{"name":"e2e","version":"1"}}}' \
  http://gateway:8080/mcp)"
echo "relay $(code -X POST -H "x-api-key: $TOK" -H 'anthropic-version: 2023-06-01' -H 'content-type: application/json' \
  --data '{"model":"claude-e2e","max_tokens":5,"messages":[{"role":"user","content":"ping"}]}' http://gateway:8080/llm/anthropic/v1/messages)"
echo "git $(code -u "x:$TOK" 'http://gateway:8080/git/github.com/acme/app.git/info/refs?service=git-upload-pack')"
echo "github $(code -H "Authorization: Bearer $TOK" http://gateway:8080/github/repos/acme/app/pulls)"
echo "proxy $(curl -s -o /dev/null -k --max-time 20 -w '%{http_connect}' -x "http://run:$TOK@gateway:3128" https://` + stack.HostAllowed + `/hello || true)"
`

func doorStatuses(t *testing.T, s *stack.Stack, tok string) map[string]string {
	t.Helper()
	ctx := ctxFor(t, 2*time.Minute)
	r, err := s.ExecShell(ctx, []string{"TOK=" + tok}, "bash", "-c", doorScript)
	if err != nil {
		t.Fatal(err)
	}
	got := map[string]string{}
	for _, line := range strings.Split(strings.TrimSpace(r.Stdout), "\n") {
		door, status, _ := strings.Cut(line, " ")
		got[door] = status
	}
	if len(got) != 5 {
		t.Fatalf("door statuses: %s", r)
	}
	return got
}

// TestMintedSession: an operator mints a per-run session with the CLI; an
// agent uses its token (MCP, egress proxy; the shell's curl on every door);
// the records carry the minted session's id; the operator revokes it while
// one of its calls waits for a human: the wait ends, refused, and the
// escalation is recorded as cancelled by the operator; from then on the
// token gets 401 on MCP, the model relay, git HTTP and the GitHub relay,
// and 407 on the egress proxy; the static sessions keep working.
func TestMintedSession(t *testing.T) {
	s := topology(t)
	ctx := ctxFor(t, 8*time.Minute)
	if s.Shell == nil {
		t.Fatal("the suite starts the agent-shell container; it is missing")
	}

	r, err := s.ExecGateway(ctx, "ironcurtain", "sessions", "create", "--name", "e2e-run", "--ttl", "20m",
		"--label", "suite=e2e", "--max-tool-calls", "50", "--json", "--ops-url", "http://gateway-ops:8081")
	if err != nil || r.Code != 0 {
		t.Fatalf("ironcurtain sessions create: %v %s", err, r)
	}
	var created struct {
		Session struct {
			SessionID string `json:"session_id"`
			Status    string `json:"status"`
		} `json:"session"`
		Token string `json:"token"`
	}
	if err := json.Unmarshal([]byte(r.Stdout), &created); err != nil {
		t.Fatalf("create printed %q: %v", r.Stdout, err)
	}
	id, tok := created.Session.SessionID, created.Token
	if !strings.HasPrefix(id, "sess_") || !strings.HasPrefix(tok, "icsess_") || created.Session.Status != "active" {
		t.Fatalf("created %+v", created)
	}
	s.AgentTokens[id] = tok // the agent container gets this token (stack.AgentEnv)
	t.Logf("minted session %s", id)

	t.Run("the token is stored as a digest only", func(t *testing.T) {
		var n []struct {
			N int `json:"n"`
		}
		if err := s.QueryJSON(ctx, `SELECT count(*) AS n FROM agent_sessions a WHERE id = `+stack.Quote(id)+
			` AND token_digest = sha256(convert_to(`+stack.Quote(tok)+`, 'UTF8')) AND strpos(a::text, `+stack.Quote(tok[len("icsess_"):])+`) = 0`, &n); err != nil {
			t.Fatal(err)
		}
		if len(n) != 1 || n[0].N != 1 {
			t.Fatalf("agent_sessions row with the digest and without the token: %+v", n)
		}
	})

	t.Run("an agent works with the minted token", func(t *testing.T) {
		r, err := s.RunTranscript(ctx, id, "minted-work", []byte(mintedWork), "e2e minted session", "-v")
		if err != nil || r.Code != 0 {
			t.Fatalf("agent run: %v %s", err, r)
		}
		var got struct {
			ProxyStatus int `json:"proxy_status"`
			Status      int `json:"status"`
		}
		if err := s.Probe(ctx, id, nil, &got, "fetch", "-ca", stack.AgentCAPath, "https://"+stack.HostAllowed+"/hello"); err != nil {
			t.Fatal(err)
		}
		if got.ProxyStatus != 200 || got.Status != 200 {
			t.Fatalf("fetch through the proxy with the minted token: %+v", got)
		}
		doors := doorStatuses(t, s, tok)
		for door, st := range doors {
			if st == "401" || st == "407" || st == "000" {
				t.Errorf("%s refused the minted token: %s (all: %v)", door, st, doors)
			}
		}
		t.Logf("doors with the minted token: %v", doors)
		calls := toolCalls(t, ctx, s, id)
		if len(calls) < 3 {
			t.Fatalf("tool_calls of %s: %v", id, calls)
		}
		var egress []struct {
			N int `json:"n"`
		}
		if err := s.QueryJSON(ctx, `SELECT count(*) AS n FROM egress_events WHERE session_id = `+stack.Quote(id), &egress); err != nil || len(egress) != 1 || egress[0].N < 1 {
			t.Fatalf("egress_events of %s: %+v %v", id, egress, err)
		}
	})

	t.Run("revoked while a call waits", func(t *testing.T) {
		done := make(chan stack.ExecResult, 1)
		go func() {
			r, err := s.RunTranscript(ctx, id, "minted-waits", []byte(mintedWaits), "e2e minted session waits", "-v")
			if err != nil {
				t.Error(err)
			}
			done <- r
		}()
		e, err := s.WaitPending(ctx, id, "filesystem", "move_file", 3*time.Minute)
		if err != nil {
			t.Fatal(err)
		}
		r, err := s.ExecGateway(ctx, "ironcurtain", "sessions", "revoke", id, "--reason", "e2e: run over", "--json", "--ops-url", "http://gateway-ops:8081")
		if err != nil || r.Code != 0 {
			t.Fatalf("ironcurtain sessions revoke: %v %s", err, r)
		}
		var revoked struct {
			Session struct {
				Status string `json:"status"`
			} `json:"session"`
			Cancelled []string `json:"cancelled_escalations"`
		}
		if err := json.Unmarshal([]byte(r.Stdout), &revoked); err != nil {
			t.Fatal(err)
		}
		if revoked.Session.Status != "revoked" || len(revoked.Cancelled) != 1 || revoked.Cancelled[0] != e.ID {
			t.Fatalf("revoke answered %s", r.Stdout)
		}
		select {
		case res := <-done:
			if res.Code != 0 || !strings.Contains(res.Stdout+res.Stderr, "refused: ") {
				t.Fatalf("the waiting run: %s", res)
			}
		case <-time.After(time.Minute):
			t.Fatal("the waiting call did not end when its session was revoked")
		}
		got, err := s.Escalation(ctx, e.ID)
		if err != nil {
			t.Fatal(err)
		}
		if got.Status != "cancelled" || got.DecidedBy == "" || !strings.Contains(got.DecisionReason, "revoked: e2e: run over") {
			t.Fatalf("escalation after revoke: %+v", got)
		}
		if ok, _ := s.WorkspaceExists(ctx, "minted/b.txt"); ok {
			t.Fatal("the move ran although its session was revoked")
		}
	})

	t.Run("the revoked token is refused on every door", func(t *testing.T) {
		want := map[string]string{"mcp": "401", "relay": "401", "git": "401", "github": "401", "proxy": "407"}
		got := doorStatuses(t, s, tok)
		for door, w := range want {
			if got[door] != w {
				t.Errorf("%s answered %s to the revoked token, want %s", door, got[door], w)
			}
		}
		r, err := s.RunTranscript(ctx, id, "minted-work-again", []byte(mintedWork), "e2e minted session after revoke")
		if err != nil {
			t.Fatal(err)
		}
		if r.Code == 0 {
			t.Fatalf("the agent ran with a revoked token: %s", r)
		}
		var fetched struct {
			ProxyStatus int `json:"proxy_status"`
			Status      int `json:"status"`
		}
		if err := s.Probe(ctx, id, nil, &fetched, "fetch", "-ca", stack.AgentCAPath, "https://"+stack.HostAllowed+"/hello"); err != nil {
			t.Fatal(err)
		}
		if fetched.ProxyStatus != 407 || fetched.Status != 0 {
			t.Fatalf("fetch with the revoked token: %+v", fetched)
		}
		// A static session is not affected.
		var ok struct {
			ProxyStatus int `json:"proxy_status"`
		}
		if err := s.Probe(ctx, "egress", nil, &ok, "fetch", "-ca", stack.AgentCAPath, "https://"+stack.HostAllowed+"/hello"); err != nil || ok.ProxyStatus != 200 {
			t.Fatalf("static session after a revocation: %+v %v", ok, err)
		}
	})

	t.Run("show and audit", func(t *testing.T) {
		r, err := s.ExecGateway(ctx, "ironcurtain", "sessions", "show", id, "--ops-url", "http://gateway-ops:8081")
		if err != nil || r.Code != 0 {
			t.Fatalf("sessions show: %v %s", err, r)
		}
		for _, want := range []string{"status:", "revoked", "e2e-run", "label suite:", "50 tool calls"} {
			if !strings.Contains(r.Stdout, want) {
				t.Errorf("sessions show lacks %q:\n%s", want, r.Stdout)
			}
		}
		if strings.Contains(r.Stdout, tok) {
			t.Fatal("sessions show prints the token")
		}
		verifyChain(t, ctx, s, id, 4)
		if logs := s.GatewayLogs(ctx); strings.Contains(logs, tok) {
			t.Fatal("the gateway logs hold the minted token")
		}
	})
}
