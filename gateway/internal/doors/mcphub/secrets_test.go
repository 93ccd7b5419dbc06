package mcphub

import (
	"context"
	"strings"
	"testing"

	"ironcurtain.dev/gateway/internal/audit"
	"ironcurtain.dev/gateway/internal/escalation"
	"ironcurtain.dev/gateway/internal/session"
	"ironcurtain.dev/gateway/policy"
)

// A secret finding escalates with the masked excerpt shown to the operator
// only: the audit decision and what the agent sees name the kind and the
// location.
func TestSecretEscalationShowsExcerptToOperatorOnly(t *testing.T) {
	key := "AKIA" + "IOSFODNN7EXAMPLE"
	sc, err := policy.NewSecretScanner(policy.SecretScan{})
	if err != nil {
		t.Fatal(err)
	}
	u := "https://github.com/search?q=" + key
	d, ok := sc.Decide(`argument "url"`, sc.Detector().ScanURL(u))
	if !ok || d.Status != policy.Escalate {
		t.Fatalf("decision = %+v", d)
	}
	for _, approved := range []bool{true, false} {
		f := newPipelineFixture(t, Config{}, false)
		f.pol.evals["files__read"] = policy.Evaluation{Decision: d, Transport: map[string]any{"url": u}, Policy: map[string]any{"url": u}}
		if approved {
			f.esc.res = escalation.Result{Approved: true, Status: "approved"}
		} else {
			f.esc.res = escalation.Result{Status: "denied"}
		}
		res := f.hub.Call(context.Background(), CallRequest{Session: session.Session{ID: "s"}, Tool: "files__read", Args: map[string]any{"url": u}, Notify: f.notifier})
		if res.IsError == approved {
			t.Fatalf("approved=%v: result = %+v", approved, res)
		}
		reqs := f.esc.requests()
		if len(reqs) != 1 {
			t.Fatalf("%d escalations", len(reqs))
		}
		want := "AKIA…MPLE (aws-access-key-id) in query parameter q of argument \"url\""
		if !strings.Contains(reqs[0].Reason, want) || reqs[0].Rule != policy.RuleSecretEgress {
			t.Fatalf("escalation = %q %q, want the masked excerpt %q", reqs[0].Rule, reqs[0].Reason, want)
		}
		if strings.Contains(string(reqs[0].Args), key) {
			t.Fatalf("escalation arguments show the key: %s", reqs[0].Args)
		}
		for _, e := range f.sink.all() {
			stored := audit.RedactEvent(e)
			var text string
			switch x := stored.(type) {
			case *audit.ToolCallDecision:
				text = x.Reason + x.Detail + string(x.Args)
				if !strings.Contains(x.Reason, "aws-access-key-id in query parameter q") {
					t.Errorf("recorded reason %q lacks kind and location", x.Reason)
				}
			case *audit.ToolCallOutcome:
				text = x.Error
			}
			for _, leak := range []string{key, "AKIA…", "…MPLE"} {
				if strings.Contains(text, leak) {
					t.Errorf("stored %T shows %q: %s", e, leak, text)
				}
			}
		}
		for _, c := range res.Content {
			if strings.Contains(c.Text, key) || strings.Contains(c.Text, "…MPLE") {
				t.Errorf("the agent sees %q", c.Text)
			}
		}
	}
}
