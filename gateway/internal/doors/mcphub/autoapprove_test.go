package mcphub

import (
	"context"
	"strings"
	"testing"

	"ironcurtain.dev/gateway/internal/escalation"
	"ironcurtain.dev/gateway/internal/session"
	"ironcurtain.dev/gateway/policy"
)

// TestOnlyRuleEscalationsAreEligible: the hub marks an escalation as the
// auto-approver's to see only when a compiled rule made it; a structural
// escalation (or any decision the engine did not mark) is a human's alone,
// and a deny never reaches the escalator at all. The canonical arguments
// it passes are redacted.
func TestOnlyRuleEscalationsAreEligible(t *testing.T) {
	tests := []struct {
		name     string
		dec      policy.Decision
		wantEsc  bool
		eligible bool
	}{
		{"compiled rule escalates", policy.Decision{Status: policy.Escalate, Rule: "escalate-deletes", Reason: "r", Compiled: true}, true, true},
		{"structural escalation", policy.Decision{Status: policy.Escalate, Rule: policy.RuleDomainEscalate, Reason: "r"}, true, false},
		{"unmarked escalation", policy.Decision{Status: policy.Escalate, Rule: "loop-breaker", Reason: "r"}, true, false},
		{"deny rule", policy.Decision{Status: policy.Deny, Rule: "deny-deletes", Reason: "r", Compiled: true}, false, false},
		{"structural deny", policy.Decision{Status: policy.Deny, Rule: policy.RuleProtectedPath, Reason: "r"}, false, false},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			f := newPipelineFixture(t, Config{}, false)
			f.pol.evals["files__delete"] = policy.Evaluation{Decision: tt.dec,
				Policy: map[string]any{"path": "/workspace/a", "token": "ghp_0123456789abcdefghijklmnopqrstuvwxyzAB"}}
			f.esc.res = escalation.Result{Approved: false, Status: "denied"}
			_ = f.hub.Call(context.Background(), CallRequest{Session: session.Session{ID: "s"}, Tool: "files__delete"})
			f.esc.mu.Lock()
			reqs := append([]escalation.Request(nil), f.esc.reqs...)
			f.esc.mu.Unlock()
			if (len(reqs) == 1) != tt.wantEsc {
				t.Fatalf("%d escalations, want escalated=%v", len(reqs), tt.wantEsc)
			}
			if !tt.wantEsc {
				return
			}
			if reqs[0].RuleEscalation != tt.eligible || escalation.Eligible(reqs[0]) != tt.eligible {
				t.Fatalf("RuleEscalation = %v, want %v", reqs[0].RuleEscalation, tt.eligible)
			}
			if pa := string(reqs[0].PolicyArgs); !strings.Contains(pa, "/workspace/a") || strings.Contains(pa, "ghp_0123456789") {
				t.Fatalf("policy arguments %s: want them present and redacted", pa)
			}
		})
	}
}
