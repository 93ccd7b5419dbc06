package llmrelay

import (
	"context"
	"strings"
	"testing"

	"ironcurtain.dev/gateway/internal/session"
)

// TestMintedSessionBudget: a minted session's own budget replaces the
// configured one on each measure it sets (lower or higher), the refusal
// says it was set at mint time, and a budget that sets only tool calls
// leaves the configured model budget in force.
func TestMintedSessionBudget(t *testing.T) {
	tests := []struct {
		name    string
		def     Budget
		own     *session.Budget
		spent   int64
		cost    float64
		refused bool
		want    string
	}{
		{name: "own tokens lower than default", def: Budget{MaxTokens: 1000}, own: &session.Budget{MaxTokens: 10}, spent: 10, refused: true, want: "minted"},
		{name: "own tokens higher than default", def: Budget{MaxTokens: 10}, own: &session.Budget{MaxTokens: 1000}, spent: 10},
		{name: "own cost", def: Budget{}, own: &session.Budget{MaxCostUSD: 0.5}, cost: 0.5, refused: true, want: "cost budget"},
		{name: "tool calls only: default applies", def: Budget{MaxTokens: 10}, own: &session.Budget{MaxToolCalls: 3}, spent: 10, refused: true, want: "relay.budget"},
		{name: "no own budget", def: Budget{MaxTokens: 10}, spent: 9},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			l := newLedger(tt.def, nil, nil, 0)
			l.charge("sess_x", tt.spent, tt.cost)
			rel, rf, err := l.acquireSession(context.Background(), session.Session{ID: "sess_x", Budget: tt.own}, true)
			if err != nil {
				t.Fatal(err)
			}
			if (rf != nil) != tt.refused {
				t.Fatalf("refused = %v (%+v), want %v", rf != nil, rf, tt.refused)
			}
			if rf == nil {
				rel()
				return
			}
			if !strings.Contains(rf.msg, tt.want) {
				t.Errorf("refusal %q does not mention %q", rf.msg, tt.want)
			}
		})
	}
}
