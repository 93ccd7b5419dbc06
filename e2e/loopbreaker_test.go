package e2e_test

import (
	"strconv"
	"strings"
	"testing"
	"time"

	"ironcurtain.dev/e2e/internal/stack"
)

// loopSession is the session of the loop-breaker scenario: after it the
// session is cooling down (stopped by the operator), so it is its own.
const loopSession = "loop"

func init() { sessions = append(sessions, loopSession) }

// loopTranscript is an agent stuck in a loop: it keeps trying writes
// outside the sandbox, which policy denies, n times, then (when then is
// set) writes one file in the workspace.
func loopTranscript(name string, n int, then bool) string {
	after := ""
	if then {
		after = `
      try {
        filesystem.create_directory({ path: "/workspace/loop" });
        filesystem.write_file({ path: "/workspace/loop/after.txt", content: "after the pause\n" });
        out.push("after: written");
      } catch (e: any) {
        out.push("after: " + e.message);
      }`
	}
	return `name: ` + name + `
steps:
  - say: I keep trying to write that file.
    code: |
      const out = [];
      for (let i = 0; i < ` + strconv.Itoa(n) + `; i++) {
        try {
          filesystem.write_file({ path: "/etc/ic-e2e-loop-" + i + ".txt", content: "again\n" });
          out.push("UNEXPECTED: wrote " + i);
        } catch (e: any) {
          out.push(i + ": " + e.message);
        }
      }` + after + `
      return out.join("\n");
  - expect: { status: ok, not_contains: ["UNEXPECTED"] }
    final: The gateway paused me.
`
}

// TestLoopBreaker: an agent (the scripted model replaying a transcript)
// loops on denied writes. The call after the 40th denial in a row pauses
// the session behind one escalation with the loop-breaker rule; the
// operator approves and the session goes on (a workspace write runs). It
// loops again; the operator denies: the rest of its calls are refused for
// the cooldown. Every step is in the audit trail.
func TestLoopBreaker(t *testing.T) {
	s := topology(t)
	ctx := ctxFor(t, 8*time.Minute)

	type result struct {
		r   stack.ExecResult
		err error
	}
	round := func(name string, n int, then bool, approve bool) (stack.Escalation, stack.ExecResult) {
		done := make(chan result, 1)
		go func() {
			r, err := s.RunTranscript(ctx, loopSession, name, []byte(loopTranscript(name, n, then)), "write the file", "-v", "--max-tool-calls", "60")
			done <- result{r, err}
		}()
		pending, err := s.WaitPending(ctx, loopSession, "filesystem", "write_file", 2*time.Minute)
		if err != nil {
			t.Fatal(err)
		}
		t.Logf("pending escalation %s rule=%s reason=%q", pending.ID, pending.Rule, pending.Reason)
		if pending.Rule != "loop-breaker" || !strings.Contains(pending.Reason, "the agent seems stuck: 40 denied calls in a row") {
			t.Errorf("escalation %+v, want rule loop-breaker and the denials named", pending)
		}
		if _, err := s.Decide(ctx, pending.ID, approve, "e2e operator", ""); err != nil {
			t.Fatal(err)
		}
		res := <-done
		if res.err != nil || res.r.Code != 0 {
			t.Fatalf("%s run: %v %s", name, res.err, res.r)
		}
		return pending, res.r
	}

	first, r := round("e2e-loop-1", 41, true, true)
	out := r.Stdout + r.Stderr
	for _, want := range []string{"this session was paused (the agent seems stuck: 40 denied calls in a row",
		"an operator let it go on (escalation " + first.ID, "after: written"} {
		if !strings.Contains(out, want) {
			t.Errorf("first round output lacks %q:\n%s", want, out)
		}
	}
	checkWorkspace(t, ctx, s, map[string]bool{"loop/after.txt": true})

	second, r := round("e2e-loop-2", 44, false, false)
	out = r.Stdout + r.Stderr
	for _, want := range []string{"this session's tool calls were paused (the agent seems stuck: 40 denied calls in a row",
		"and an operator stopped them until", "an operator stopped this session's tool calls until"} {
		if !strings.Contains(out, want) {
			t.Errorf("second round output lacks %q:\n%s", want, out)
		}
	}

	var escalates, refusals []toolCall
	for _, c := range toolCalls(t, ctx, s, loopSession) {
		if c.Rule != "loop-breaker" {
			continue
		}
		t.Logf("tool_calls %s escalation=%s outcome=%s %s", c, c.EscalationID, c.Outcome, c.Error)
		switch c.Decision {
		case "escalate":
			escalates = append(escalates, c)
		case "deny":
			refusals = append(refusals, c)
		}
	}
	if len(escalates) != 2 || escalates[0].EscalationID != first.ID || escalates[0].Outcome != "refused" ||
		escalates[1].EscalationID != second.ID || escalates[1].Outcome != "denied" {
		t.Errorf("pause records %v, want the approved pause (refused: it did not run) and the denied one", escalates)
	}
	if len(refusals) != 3 {
		t.Errorf("%d cooldown refusals recorded, want 3", len(refusals))
	}
	for _, c := range refusals {
		if c.Outcome != "denied" {
			t.Errorf("cooldown refusal %s outcome %q, want denied", c, c.Outcome)
		}
	}
}
