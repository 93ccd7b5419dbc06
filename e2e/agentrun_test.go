package e2e_test

import (
	"context"
	"testing"
	"time"

	"ironcurtain.dev/e2e/internal/stack"
)

// agentRun is an agent transcript running in the background.
type agentRun struct {
	s       *stack.Stack
	session string
	done    chan agentResult
}

// agentResult is how an agent run ended.
type agentResult struct {
	r   stack.ExecResult
	err error
}

// startTranscript runs the transcript as session in the background.
func startTranscript(ctx context.Context, s *stack.Stack, session, name, transcript, task string, extra ...string) *agentRun {
	a := &agentRun{s: s, session: session, done: make(chan agentResult, 1)}
	go func() {
		r, err := s.RunTranscript(ctx, session, name, []byte(transcript), task, extra...)
		a.done <- agentResult{r, err}
	}()
	return a
}

// pending waits within for the session's pending escalation of
// server/tool (not one of seen); on failure the test ends, with the run's
// output when the run has already ended.
func (a *agentRun) pending(t *testing.T, ctx context.Context, server, tool string, within time.Duration, seen ...string) stack.Escalation {
	t.Helper()
	e, err := a.s.WaitPending(ctx, a.session, server, tool, within, seen...)
	if err != nil {
		select {
		case res := <-a.done:
			t.Fatalf("%v; the agent run ended: %v\n%s", err, res.err, res.r)
		default:
			t.Fatal(err)
		}
	}
	return e
}

// finish waits for the run to end (until ctx ends, or within when it is
// positive) and fails the test unless it ran without error and exited 0.
func (a *agentRun) finish(t *testing.T, ctx context.Context, within time.Duration) stack.ExecResult {
	t.Helper()
	var timeout <-chan time.Time
	if within > 0 {
		timer := time.NewTimer(within)
		defer timer.Stop()
		timeout = timer.C
	}
	select {
	case res := <-a.done:
		if res.err != nil || res.r.Code != 0 {
			t.Fatalf("agent run: %v\n%s", res.err, res.r)
		}
		return res.r
	case <-timeout:
		t.Fatalf("the agent run did not finish within %s", within)
	case <-ctx.Done():
		t.Fatalf("the agent run did not finish: %v", ctx.Err())
	}
	return stack.ExecResult{}
}
