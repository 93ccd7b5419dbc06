package main

import (
	"testing"
	"time"

	"ironcurtain.dev/gateway/internal/ops/opsapi"
	"ironcurtain.dev/gateway/internal/session/minted"
)

func TestConsoleSessionRow(t *testing.T) {
	at := time.Date(2026, 11, 26, 8, 0, 0, 0, time.UTC)
	for _, tc := range []struct {
		name                 string
		in                   opsapi.SessionSummary
		budget, revoked, sta string
		isMinted             bool
	}{
		{name: "static", in: opsapi.SessionSummary{SessionID: "agent", Status: opsapi.StatusStatic}, sta: "static"},
		{name: "minted with a budget", in: opsapi.SessionSummary{SessionID: "sess_a", Status: "active", LLMTokens: 120, LLMCostUSD: 0.5,
			Minted: &minted.Session{Name: "run", Status: "active", ExpiresAt: at, ToolCallsUsed: 3,
				Budget: minted.Budget{MaxToolCalls: 10, MaxTokens: 1000, MaxCostUSD: 2}}},
			budget: "3/10 tool calls, 120/1000 tokens, $0.50/$2.00", sta: "active", isMinted: true},
		{name: "revoked", in: opsapi.SessionSummary{SessionID: "sess_b", Status: "revoked",
			Minted: &minted.Session{Name: "run", Status: "revoked", ExpiresAt: at, RevokedAt: &at, RevokedBy: "alice", RevokeReason: "done"}},
			revoked: "revoked by alice at 2026-11-26 08:00:00Z: done", sta: "revoked", isMinted: true},
	} {
		t.Run(tc.name, func(t *testing.T) {
			row := sessionRow(tc.in)
			if row.Budget != tc.budget || row.Revoked != tc.revoked || row.Status != tc.sta || row.Minted != tc.isMinted {
				t.Fatalf("row %+v", row)
			}
			if tc.isMinted && (row.ExpiresAt == nil || !row.ExpiresAt.Equal(at) || row.Name != "run") {
				t.Fatalf("row %+v", row)
			}
		})
	}
}
