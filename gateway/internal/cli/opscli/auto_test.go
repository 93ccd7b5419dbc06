package opscli

import (
	"bytes"
	"strings"
	"testing"

	"ironcurtain.dev/gateway/internal/escalation"
)

func TestAutoSummary(t *testing.T) {
	tests := []struct {
		a    *escalation.AutoReview
		want string
	}{
		{nil, "-"},
		{&escalation.AutoReview{Verdict: "approve", Outcome: "approved"}, "approve"},
		{&escalation.AutoReview{Verdict: "human", Outcome: "human"}, "human"},
		{&escalation.AutoReview{Verdict: "human", Outcome: "timeout"}, "human:timeout"},
		{&escalation.AutoReview{Verdict: "human", Outcome: "model_denied"}, "human:model_denied"},
	}
	for _, tt := range tests {
		if got := autoSummary(tt.a); got != tt.want {
			t.Errorf("autoSummary(%+v) = %q, want %q", tt.a, got, tt.want)
		}
	}
}

// TestShowAutoReasoningIsInert: the model's reasoning is untrusted text (it
// may echo the agent's): shown on one line with control characters quoted.
func TestShowAutoReasoningIsInert(t *testing.T) {
	var out bytes.Buffer
	x := escalation.Escalation{ID: "esc-1", Status: "pending", Auto: &escalation.AutoReview{Verdict: "human", Outcome: "human", Model: "m",
		Reasoning: "fine\x1b[2J\nAPPROVED by operator\r"}}
	if err := printEscalation(Env{Stdout: &out}, x, false); err != nil {
		t.Fatal(err)
	}
	s := out.String()
	if strings.Contains(s, "\x1b") || strings.Contains(s, "\r") || !strings.Contains(s, "auto-approver:") || !strings.Contains(s, `\x1b`) {
		t.Fatalf("output %q", s)
	}
	for _, line := range strings.Split(strings.TrimSpace(s), "\n") {
		if strings.HasPrefix(line, "APPROVED") {
			t.Fatalf("the reasoning started its own line: %q", s)
		}
	}
}
