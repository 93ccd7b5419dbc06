package githttp

import (
	"strings"
	"testing"
	"time"

	"ironcurtain.dev/gateway/internal/escalation"
	"ironcurtain.dev/gateway/policy"
)

// escalatePushes escalates every git push, like the base policy's
// escalate-git-network rule, and allows the rest.
var escalatePushes = []policy.CompiledRule{
	{Name: "escalate-git-push", If: policy.RuleCondition{Server: []string{"git"}, Tool: []string{"push"}}, Then: policy.Escalate, Reason: "pushing needs approval"},
	{Name: "allow-everything", Then: policy.Allow, Reason: "test"},
}

// TestEscalatedPush: the client waits with "waiting for approval of <id>"
// on the side band; an approval completes the push, a denial rejects every
// ref with the reason, and the upstream is unchanged.
func TestEscalatedPush(t *testing.T) {
	for _, tc := range []struct {
		name    string
		answer  escalation.Result
		landed  bool
		wantOut string
	}{
		{name: "approved", answer: escalation.Result{Approved: true, Status: "approved", DecidedBy: "ops"}, landed: true, wantOut: "approved"},
		{name: "denied", answer: escalation.Result{Approved: false, Status: "denied", DecidedBy: "ops", Reason: "not today"}, wantOut: "not today"},
		{name: "expired", answer: escalation.Result{Approved: false, Status: "expired"}, wantOut: "no one answered in time"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			esc := &fakeEscalator{started: make(chan escalation.Request, 1), answer: make(chan escalation.Result, 1)}
			e := newEnv(t, envOptions{rules: escalatePushes, esc: esc})
			work := e.clone(t)
			e.mustGit(t, work, "switch", "-q", "-c", "feature")
			e.mustGit(t, work, "switch", "-q", "-c", "other")
			e.commit(t, work, "o.txt", "o\n")
			e.mustGit(t, work, "switch", "-q", "feature")
			head := e.commit(t, work, "f.txt", "f\n")

			type result struct {
				out string
				err error
			}
			done := make(chan result, 1)
			go func() {
				out, err := e.git(work, "push", "origin", "feature", "other")
				done <- result{out, err}
			}()
			var req escalation.Request
			select {
			case req = <-esc.started:
			case r := <-done:
				t.Fatalf("the push ended without an escalation: %v\n%s", r.err, r.out)
			case <-time.After(30 * time.Second):
				t.Fatal("no escalation")
			}
			if req.Server != "git" || req.Tool != "push" || !strings.Contains(string(req.Args), "refs/heads/feature") || !strings.Contains(string(req.Args), "refs/heads/other") {
				t.Fatalf("escalation request %+v %s", req, req.Args)
			}
			time.Sleep(150 * time.Millisecond) // a few "still waiting" notices
			esc.answer <- tc.answer
			var r result
			select {
			case r = <-done:
			case <-time.After(30 * time.Second):
				t.Fatal("the push did not end after the answer")
			}
			if !strings.Contains(r.out, "waiting for approval of "+req.ID) {
				t.Fatalf("the client did not see the wait:\n%s", r.out)
			}
			t.Logf("git push output:\n%s", r.out)
			if !strings.Contains(r.out, tc.wantOut) {
				t.Fatalf("output lacks %q:\n%s", tc.wantOut, r.out)
			}
			got := e.upstreamRef(t, "refs/heads/feature")
			if tc.landed {
				if r.err != nil || got != head || e.upstreamRef(t, "refs/heads/other") == "" {
					t.Fatalf("approved push did not land (%v):\n%s", r.err, r.out)
				}
			} else {
				if r.err == nil || got != "" || e.upstreamRef(t, "refs/heads/other") != "" {
					t.Fatalf("refused push landed or succeeded (%v):\n%s", r.err, r.out)
				}
				if strings.Count(r.out, "[remote rejected]") != 2 {
					t.Fatalf("want both refs rejected:\n%s", r.out)
				}
			}
			d := e.sink.last(t)
			if d.Decision != "escalate" || d.EscalationID != req.ID {
				t.Fatalf("record %+v", d)
			}
		})
	}
}

// TestUpstreamRejectionReachesTheClient: when the upstream refuses an
// allowed update (its own hook), the client sees the upstream's reason on
// that ref.
func TestUpstreamRejectionReachesTheClient(t *testing.T) {
	e := newEnv(t, envOptions{})
	work := e.clone(t)
	hook := "#!/bin/sh\necho 'upstream says no' >&2\nexit 1\n"
	writeFile(t, e.bareD+"/hooks/pre-receive", hook)
	run(t, "", "-C", e.bareD, "config", "core.hooksPath", e.bareD+"/hooks")
	if err := chmodX(e.bareD + "/hooks/pre-receive"); err != nil {
		t.Fatal(err)
	}
	e.mustGit(t, work, "switch", "-q", "-c", "feature")
	e.commit(t, work, "f.txt", "f\n")
	out, err := e.git(work, "push", "origin", "feature")
	if err == nil || !strings.Contains(out, "upstream rejected") || !strings.Contains(out, "[remote rejected]") {
		t.Fatalf("push: %v\n%s", err, out)
	}
	if e.upstreamRef(t, "refs/heads/feature") != "" {
		t.Fatal("the upstream has the branch")
	}
	d := e.sink.last(t)
	if o := e.sink.Outcome(d.CallID); o == nil || o.Status != "error" {
		t.Fatalf("outcome %+v", o)
	}
}

// TestBasePolicy: under the shipped base policy a clone and a push of a new
// branch each escalate (escalate-git-network) and run once approved; a force
// push is denied before any human is asked.
func TestBasePolicy(t *testing.T) {
	esc := &fakeEscalator{started: make(chan escalation.Request, 8)}
	e := newEnv(t, envOptions{base: true, esc: esc})
	work := e.clone(t)
	if d := e.sink.last(t); d.Tool != "fetch" || d.Decision != "escalate" || d.Rule != "escalate-git-network" {
		t.Fatalf("clone record %+v", d)
	}
	e.mustGit(t, work, "switch", "-q", "-c", "feature")
	head := e.commit(t, work, "f.txt", "f\n")
	e.mustGit(t, work, "push", "-q", "origin", "feature")
	if d := e.sink.last(t); d.Tool != "push" || d.Decision != "escalate" || d.Rule != "escalate-git-network" {
		t.Fatalf("push record %+v", d)
	}
	if e.upstreamRef(t, "refs/heads/feature") != head {
		t.Fatal("the approved push did not land")
	}
	e.mustGit(t, work, "commit", "-q", "--amend", "-m", "rewritten")
	asked := len(esc.started)
	out, err := e.git(work, "push", "--force", "origin", "feature")
	if err == nil || !strings.Contains(out, "force push") {
		t.Fatalf("force push: %v\n%s", err, out)
	}
	if len(esc.started) != asked {
		t.Fatal("a human was asked about a force push")
	}
}
