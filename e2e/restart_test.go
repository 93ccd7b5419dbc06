package e2e_test

import (
	"strings"
	"testing"
	"time"

	"ironcurtain.dev/e2e/internal/stack"
)

// restartBefore writes a file and asks to delete it; the gateway restarts
// while the delete waits for a human.
const restartBefore = `name: e2e-restart-before
steps:
  - say: I write a file.
    code: |
      filesystem.create_directory({ path: "/workspace/restart" });
      filesystem.write_file({ path: "/workspace/restart/a.txt", content: "restart scenario\n" });
      return "written";
  - expect: { status: ok, contains: ["written"] }
    say: I delete it (a human has to approve).
    code: |
      try {
        filesystem.move_file({ source: "/workspace/restart/a.txt", destination: "/workspace/restart/a.moved" });
        return "UNEXPECTED: moved while the gateway restarted";
      } catch (e: any) {
        return "interrupted: " + e.message;
      }
  - expect: { status: ok, contains: ["interrupted: "], not_contains: ["UNEXPECTED"] }
    final: The delete did not happen; the gateway went away while it waited.
`

// restartAfter retries the same delete after the operator approved the
// pending escalation (after the restart).
const restartAfter = `name: e2e-restart-after
steps:
  - say: I retry the delete.
    code: |
      filesystem.move_file({ source: "/workspace/restart/a.txt", destination: "/workspace/restart/a.moved" });
      return filesystem.read_text_file({ path: "/workspace/restart/a.moved" });
  - expect: { status: ok, contains: ["restart scenario"] }
    final: Deleted, on the approval given after the restart.
`

// restartAgain sends the identical call once more: the approval was used,
// so it asks a human again (and the operator denies it).
const restartAgain = `name: e2e-restart-again
steps:
  - say: I send the identical call again.
    code: |
      try {
        filesystem.move_file({ source: "/workspace/restart/a.txt", destination: "/workspace/restart/a.moved" });
        return "UNEXPECTED: ran without a new approval";
      } catch (e: any) {
        return "refused: " + e.message;
      }
  - expect: { status: ok, contains: ["refused: "], not_contains: ["UNEXPECTED"] }
    final: The approval ran one call only.
`

// TestRestartWithPendingEscalation: the gateway restarts while an
// escalation is pending. The stop is prompt (no SIGKILL): the waiting call
// ends at once with a clear error and a recorded outcome; the escalation
// survives the restart (still pending, same id); the operator approves it
// plainly after the restart, and the approval is honoured once: the agent's
// identical retry runs on it without asking again, and a second identical
// retry asks again.
func TestRestartWithPendingEscalation(t *testing.T) {
	s := topology(t)
	ctx := ctxFor(t, 8*time.Minute)
	const session = "restart"

	type result struct {
		r   stack.ExecResult
		err error
	}
	done := make(chan result, 1)
	go func() {
		r, err := s.RunTranscript(ctx, session, "restart-before", []byte(restartBefore), "delete a file", "-v")
		done <- result{r, err}
	}()
	pending, err := s.WaitPending(ctx, session, "filesystem", "move_file", 2*time.Minute)
	if err != nil {
		t.Fatal(err)
	}
	t.Logf("pending escalation %s %s", pending.ID, pending.Args)

	begin := time.Now()
	stopped, killed, err := s.RestartGateway(ctx)
	if err != nil {
		t.Fatal(err)
	}
	t.Logf("gateway restarted in %s (stop took %s, killed after the grace period: %v)",
		time.Since(begin).Round(100*time.Millisecond), stopped.Round(100*time.Millisecond), killed)
	if killed || stopped > 8*time.Second {
		t.Errorf("the gateway stop took %s (killed: %v); it must finish well within the 10 s before SIGKILL", stopped, killed)
	}

	t.Run("the waiting call ends, it does not hang", func(t *testing.T) {
		select {
		case res := <-done:
			if res.err != nil {
				t.Fatal(res.err)
			}
			t.Logf("the interrupted run ended %s after the restart began (exit %d)", time.Since(begin).Round(100*time.Millisecond), res.r.Code)
			if res.r.Code != 0 {
				t.Fatalf("the interrupted run failed instead of seeing a clear tool error: %s", res.r)
			}
			var msg string
			for _, line := range strings.Split(res.r.Stderr, "\n") {
				if i := strings.Index(line, "interrupted: "); i >= 0 && !strings.Contains(line, "+") {
					msg = line[i:]
				}
			}
			t.Logf("what the agent saw: %s", msg)
			if !strings.Contains(msg, "move_file") {
				t.Errorf("the interrupted call's error %q does not say which call failed", msg)
			}
			if !strings.Contains(msg, "the gateway restarted while this call waited for approval of escalation "+pending.ID) {
				t.Errorf("the interrupted call's error %q does not say what happened to escalation %s", msg, pending.ID)
			}
		case <-time.After(2 * time.Minute):
			t.Fatal("the agent's call still hangs 2m after the gateway restart")
		}
	})

	t.Run("the escalation survived the restart", func(t *testing.T) {
		e, err := s.Escalation(ctx, pending.ID)
		if err != nil {
			t.Fatal(err)
		}
		if e.Status != "pending" || e.Server != "filesystem" || e.Tool != "move_file" || string(e.Args) != string(pending.Args) {
			t.Fatalf("after the restart: %+v, want the same pending escalation", e)
		}
		if ok, _ := s.WorkspaceExists(ctx, "restart/a.txt"); !ok {
			t.Fatal("the file is gone before anyone approved")
		}
	})

	approved, err := s.Decide(ctx, pending.ID, true, "e2e operator: approved after the restart", "") // plainly
	if err != nil {
		t.Fatal(err)
	}
	if approved.Status != "approved" || approved.DecidedBy != "operator" {
		t.Fatalf("approve after the restart answered %+v", approved)
	}

	t.Run("the approval is honoured", func(t *testing.T) {
		r, err := s.RunTranscript(ctx, session, "restart-after", []byte(restartAfter), "retry the delete", "-v")
		if err != nil {
			t.Fatal(err)
		}
		if r.Code != 0 {
			t.Fatalf("the retried delete did not run on the approval: %s", r)
		}
		checkWorkspace(t, ctx, s, map[string]bool{"restart/a.txt": false, "restart/a.moved": true})
		if left, err := s.Escalations(ctx, session, "pending"); err != nil || len(left) != 0 {
			t.Errorf("pending escalations after the retry: %+v (%v)", left, err)
		}
	})

	var again stack.Escalation
	t.Run("the approval runs one call only", func(t *testing.T) {
		done := make(chan result, 1)
		go func() {
			r, err := s.RunTranscript(ctx, session, "restart-again", []byte(restartAgain), "retry once more", "-v")
			done <- result{r, err}
		}()
		var err error
		again, err = s.WaitPending(ctx, session, "filesystem", "move_file", 2*time.Minute, pending.ID)
		if err != nil {
			t.Fatalf("the second identical retry did not ask again: %v", err)
		}
		if _, err := s.Decide(ctx, again.ID, false, "e2e operator: once is enough", ""); err != nil {
			t.Fatal(err)
		}
		res := <-done
		if res.err != nil || res.r.Code != 0 {
			t.Fatalf("second retry run: %v %s", res.err, res.r)
		}
		checkWorkspace(t, ctx, s, map[string]bool{"restart/a.txt": false, "restart/a.moved": true})
	})

	t.Run("records", func(t *testing.T) {
		calls := toolCalls(t, ctx, s, session)
		var moves []toolCall
		for _, c := range calls {
			t.Logf("tool_calls %s escalation=%s outcome=%s %s", c, c.EscalationID, c.Outcome, c.Error)
			if c.Tool == "move_file" {
				moves = append(moves, c)
			}
		}
		if len(moves) != 3 {
			t.Fatalf("%d move_file rows, want 3 (interrupted, retried, retried again)", len(moves))
		}
		if moves[0].EscalationID != pending.ID || moves[0].Outcome != "refused" ||
			moves[0].Error != "gateway shutting down; escalation "+pending.ID+" is still pending" {
			t.Errorf("interrupted call %s (outcome %q %q), want escalation %s, refused while the gateway stopped", moves[0], moves[0].Outcome, moves[0].Error, pending.ID)
		}
		if moves[1].Decision != "escalate" || moves[1].EscalationID != pending.ID || moves[1].Outcome != "ok" {
			t.Errorf("retried call %s (escalation %s), want escalate on %s → ok", moves[1], moves[1].EscalationID, pending.ID)
		}
		if moves[2].Decision != "escalate" || moves[2].EscalationID == pending.ID || moves[2].EscalationID != again.ID || moves[2].Outcome != "denied" {
			t.Errorf("second retry %s (escalation %s), want a new escalation %s → denied", moves[2], moves[2].EscalationID, again.ID)
		}
		first, err := s.Escalation(ctx, pending.ID)
		if err != nil || first.Status != "approved" || first.DecidedBy != "operator" {
			t.Errorf("the first escalation after the run: %+v (%v)", first, err)
		}
		// Which call used the approval: the retry, and only it.
		var used []struct {
			CallID       string `json:"consumed_by_call_id"`
			EscalationID string `json:"escalation_id"`
			Outcome      string `json:"outcome"`
		}
		if err := s.QueryJSON(ctx, `SELECT e.consumed_by_call_id, c.escalation_id, o.status AS outcome
FROM escalations e JOIN tool_calls c ON c.call_id = e.consumed_by_call_id JOIN tool_call_outcomes o ON o.call_id = c.call_id
WHERE e.id = `+stack.Quote(pending.ID), &used); err != nil {
			t.Fatal(err)
		}
		if len(used) != 1 || used[0].EscalationID != pending.ID || used[0].Outcome != "ok" {
			t.Errorf("approval of %s used by %+v, want the retried call", pending.ID, used)
		}
		if len(used) == 1 {
			t.Logf("escalation %s approved after the restart, used by call %s", pending.ID, used[0].CallID)
		}
		verifyChain(t, ctx, s, session, 12)
	})
}

// TestAuditChainsIntact runs last (it is the last test in file order): after
// every scenario, restarts and outages included, `ironcurtain audit verify`
// over all sessions (the unauthenticated "" session of refused proxy
// clients too) reports every chain intact.
func TestAuditChainsIntact(t *testing.T) {
	s := topology(t)
	ctx := ctxFor(t, 2*time.Minute)
	r, err := s.ExecGateway(ctx, "ironcurtain", "audit", "verify")
	if err != nil {
		t.Fatal(err)
	}
	t.Logf("ironcurtain audit verify:\n%s", r.Stdout)
	if r.Code != 0 || !strings.Contains(r.Stdout, " 0 broken") {
		t.Fatalf("audit verify over all sessions: %s", r)
	}
}
