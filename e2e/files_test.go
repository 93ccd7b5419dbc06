package e2e_test

import (
	"context"
	"strings"
	"testing"
	"time"

	"ironcurtain.dev/e2e/internal/stack"
)

// filesTranscript is a scripted agent session: reads and writes in the
// workspace (allowed), writes outside the sandbox (denied, caught), and a
// delete (move_file's source is a delete-path role: escalated to a human,
// who approves through the ops API).
const filesTranscript = `name: e2e-files
steps:
  - say: I write a note in the workspace and read it back.
    code: |
      filesystem.create_directory({ path: "/workspace/files" });
      filesystem.write_file({ path: "/workspace/files/notes.txt", content: "e2e notes\n" });
      console.log(filesystem.list_directory({ path: "/workspace/files" }));
      return filesystem.read_text_file({ path: "/workspace/files/notes.txt" });
  - expect: { status: ok, contains: ["e2e notes", "notes.txt"] }
    say: Now I try to write outside the sandbox, twice.
    code: |
      const refused = [];
      for (const path of ["/etc/ic-e2e-outside.txt", "/workspace/../tmp/ic-e2e-escape.txt"]) {
        try {
          filesystem.write_file({ path, content: "must never be written\n" });
          refused.push("UNEXPECTED: wrote " + path);
        } catch (e: any) {
          refused.push("refused: " + e.message);
        }
      }
      return refused.join("\n");
  - expect: { status: ok, contains: ["refused: "], not_contains: ["UNEXPECTED"] }
    say: I delete the note (a human has to approve).
    code: |
      filesystem.move_file({ source: "/workspace/files/notes.txt", destination: "/workspace/files/notes.deleted" });
      return filesystem.read_text_file({ path: "/workspace/files/notes.deleted" });
  - expect: { status: ok, contains: ["e2e notes"] }
    final: The workspace writes and reads worked, the writes outside were refused, and the delete was approved.
`

// TestFilesSession: a scripted agent session's allowed, denied and
// escalated calls; an operator approves through the ops API; every step is
// a tool_calls row and the session's hash chain verifies.
func TestFilesSession(t *testing.T) {
	s := topology(t)
	ctx := ctxFor(t, 5*time.Minute)
	const session = "files"

	run := startTranscript(ctx, s, session, "files", filesTranscript, "work in the workspace", "-v")
	esc := run.pending(t, ctx, "filesystem", "move_file", 2*time.Minute)
	t.Logf("pending escalation %s: %s__%s %s (%s)", esc.ID, esc.Server, esc.Tool, esc.Args, esc.Reason)
	if !strings.Contains(string(esc.Args), "/workspace/files/notes.txt") {
		t.Errorf("escalation args %s do not show the file", esc.Args)
	}

	t.Run("the agent token cannot approve", func(t *testing.T) {
		for _, p := range []string{"/v1/escalations", "/v1/escalations/" + esc.ID} {
			code, err := s.OpsStatus(ctx, "GET", p, s.AgentTokens[session])
			if err != nil {
				t.Fatal(err)
			}
			if code != 401 {
				t.Errorf("GET %s with the agent token: %d, want 401", p, code)
			}
		}
		code, err := s.OpsStatus(ctx, "POST", "/v1/escalations/"+esc.ID+"/approve", s.AgentTokens[session])
		if err != nil {
			t.Fatal(err)
		}
		if code != 401 {
			t.Errorf("approve with the agent token: %d, want 401", code)
		}
		if e, err := s.Escalation(ctx, esc.ID); err != nil || e.Status != "pending" {
			t.Errorf("after the agent's attempt the escalation is %q (%v), want pending", e.Status, err)
		}
	})

	decided, err := s.Decide(ctx, esc.ID, true, "e2e operator: fine to delete the note", "")
	if err != nil {
		t.Fatal(err)
	}
	if decided.Status != "approved" || decided.DecidedBy == "" {
		t.Fatalf("approve answered %+v", decided)
	}

	res := run.finish(t, ctx, 2*time.Minute)
	t.Logf("agent answer: %s", strings.TrimSpace(res.Stdout))

	t.Run("workspace effects", func(t *testing.T) {
		checkWorkspace(t, ctx, s, map[string]bool{
			"files/notes.deleted": true,
			"files/notes.txt":     false,
		})
		for _, p := range []string{"/etc/ic-e2e-outside.txt", "/tmp/ic-e2e-escape.txt"} {
			if _, err := s.GatewayFile(ctx, p); err == nil {
				t.Errorf("%s exists in the gateway container", p)
			}
		}
	})

	t.Run("tool_calls", func(t *testing.T) {
		calls := toolCalls(t, ctx, s, session)
		want := []struct{ tool, decision, outcome, argHas string }{
			{tool: "create_directory", decision: "allow", outcome: "ok", argHas: "/workspace/files"},
			{tool: "write_file", decision: "allow", outcome: "ok", argHas: "notes.txt"},
			{tool: "list_directory", decision: "allow", outcome: "ok"},
			{tool: "read_text_file", decision: "allow", outcome: "ok"},
			{tool: "write_file", decision: "deny", outcome: "denied", argHas: "/etc/ic-e2e-outside.txt"},
			{tool: "write_file", decision: "deny", outcome: "denied", argHas: "ic-e2e-escape.txt"},
			{tool: "move_file", decision: "escalate", outcome: "ok", argHas: "notes.txt"},
			{tool: "read_text_file", decision: "allow", outcome: "ok", argHas: "notes.deleted"},
		}
		for _, c := range calls {
			t.Logf("tool_calls %s", c)
		}
		if len(calls) != len(want) {
			t.Fatalf("%d tool_calls rows, want %d", len(calls), len(want))
		}
		for i, w := range want {
			c := calls[i]
			if c.Server != "filesystem" || c.Tool != w.tool || c.Decision != w.decision || c.Outcome != w.outcome || !strings.Contains(c.Args, w.argHas) {
				t.Errorf("row %d = %s, want filesystem__%s %s → %s (args with %q)", i, c, w.tool, w.decision, w.outcome, w.argHas)
			}
			if w.decision == "escalate" && c.EscalationID != esc.ID {
				t.Errorf("row %d names escalation %q, want %q", i, c.EscalationID, esc.ID)
			}
			if w.decision == "deny" && c.Reason == "" {
				t.Errorf("row %d: a denial without a reason", i)
			}
		}
		e, err := s.Escalation(ctx, esc.ID)
		if err != nil {
			t.Fatal(err)
		}
		if e.Status != "approved" || e.DecidedBy != "operator" || e.DecisionReason == "" {
			t.Errorf("escalation after the run: %+v, want approved by operator with a reason", e)
		}
		verifyChain(t, ctx, s, session, int64(2*len(want)))
	})
}

// checkWorkspace fails unless each workspace path exists exactly when want
// says so.
func checkWorkspace(t *testing.T, ctx context.Context, s *stack.Stack, want map[string]bool) {
	t.Helper()
	for p, w := range want {
		got, err := s.WorkspaceExists(ctx, p)
		if err != nil {
			t.Fatal(err)
		}
		if got != w {
			t.Errorf("/workspace/%s exists = %v, want %v", p, got, w)
		}
	}
}
