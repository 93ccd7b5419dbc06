package main

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"net/http"
	"strings"
	"sync"
	"time"

	"ironcurtain.dev/gateway/internal/ops/console"
	"ironcurtain.dev/gateway/internal/ops/opsapi"
	"ironcurtain.dev/gateway/internal/session/minted"
	"ironcurtain.dev/gateway/internal/store"
	"ironcurtain.dev/gateway/policy"
)

// consoleHandler builds the operator console served at /ui/ on the ops port
// (gateway/internal/ops/console). It needs the database; a console that cannot
// be built answers 500 and says so in the log (never an open door).
func consoleHandler(st *storage, operators *opsapi.Operators, pol opsapi.PolicyReloader, log *slog.Logger) http.Handler {
	log = log.With("component", "console")
	d := console.Deps{
		Operators:   operators,
		Escalations: st.pg,
		Watch:       st.pg.Watch,
		Store:       console.PGStore{Pool: st.pool},
		SignIns:     store.ConsoleSessions{Pool: st.pool}, // shared by every replica
		Logger:      log,
	}
	if st.minted != nil {
		d.Sessions = sessionAdmin{store: st.minted, data: opsapi.PGData{Pool: st.pool}}
	}
	if snap, ok := pol.(interface{ Snapshot() *policy.Engine }); ok {
		d.Policy = policyStatus(snap.Snapshot)
	}
	c, err := console.New(d)
	if err != nil {
		log.Error("the operator console is not available", "err", err)
		return http.HandlerFunc(func(w http.ResponseWriter, _ *http.Request) {
			http.Error(w, "the console is not available; see the gateway log", http.StatusInternalServerError)
		})
	}
	return c.Handler()
}

// policyStatus reports the policy in force. The load time is when this
// gateway first saw the version (at start, or the reload that brought it).
func policyStatus(snapshot func() *policy.Engine) func() console.PolicyStatus {
	var mu sync.Mutex
	seen := map[string]time.Time{}
	note := func(v string) time.Time {
		mu.Lock()
		defer mu.Unlock()
		if t, ok := seen[v]; ok {
			return t
		}
		if len(seen) > 64 {
			clear(seen)
		}
		seen[v] = time.Now()
		return seen[v]
	}
	note(snapshot().Version())
	return func() console.PolicyStatus {
		eng := snapshot()
		s := console.PolicyStatus{
			Version: eng.Version(), Rules: eng.RuleCount(), Tools: len(eng.Tools()), Warnings: eng.Warnings(),
		}
		s.LoadedAt = note(s.Version)
		if sh := eng.Shadow(); sh != nil {
			s.Shadow = sh.Version()
		}
		return s
	}
}

// sessionAdmin lists (with usage), mints and revokes per-run sessions for
// the console (the minted store and the session_summary view).
type sessionAdmin struct {
	store *minted.Store
	data  opsapi.PGData
}

var _ console.SessionAdmin = sessionAdmin{}

func (a sessionAdmin) List(ctx context.Context, limit int) ([]console.SessionRow, error) {
	list, err := a.data.Sessions(ctx, limit)
	if err != nil {
		return nil, err
	}
	out := make([]console.SessionRow, 0, len(list))
	for _, s := range list {
		out = append(out, sessionRow(s))
	}
	return out, nil
}

func sessionRow(s opsapi.SessionSummary) console.SessionRow {
	row := console.SessionRow{SessionSummary: s, Status: s.Status}
	if m := s.Minted; m != nil {
		row.Minted, row.Name, row.Labels = true, m.Name, m.Labels
		exp := m.ExpiresAt
		row.ExpiresAt = &exp
		var parts []string
		if b := m.Budget; b.MaxToolCalls > 0 {
			parts = append(parts, fmt.Sprintf("%d/%d tool calls", m.ToolCallsUsed, b.MaxToolCalls))
		}
		if b := m.Budget; b.MaxTokens > 0 {
			parts = append(parts, fmt.Sprintf("%d/%d tokens", s.LLMTokens, b.MaxTokens))
		}
		if b := m.Budget; b.MaxCostUSD > 0 {
			parts = append(parts, fmt.Sprintf("$%.2f/$%.2f", s.LLMCostUSD, b.MaxCostUSD))
		}
		row.Budget = strings.Join(parts, ", ")
		if m.RevokedAt != nil {
			row.Revoked = "revoked by " + m.RevokedBy + " at " + m.RevokedAt.UTC().Format("2006-01-02 15:04:05Z")
			if m.RevokeReason != "" {
				row.Revoked += ": " + m.RevokeReason
			}
		}
	}
	return row
}

func (a sessionAdmin) Mint(ctx context.Context, m console.MintRequest, by string) (console.SessionRow, string, error) {
	spec := minted.Spec{Name: m.Name, TTL: m.TTL, Labels: m.Labels,
		Budget: minted.Budget{MaxTokens: m.MaxTokens, MaxCostUSD: m.MaxCostUSD, MaxToolCalls: m.MaxToolCalls}}
	s, tok, err := a.store.Mint(ctx, spec, by)
	if errors.Is(err, minted.ErrInvalid) {
		return console.SessionRow{}, "", console.UserError{Err: err}
	}
	if err != nil {
		return console.SessionRow{}, "", err
	}
	row := sessionRow(opsapi.SessionSummary{SessionID: s.ID, Status: s.Status, Minted: &s})
	return row, string(tok), nil
}

func (a sessionAdmin) Revoke(ctx context.Context, id, by, reason string) error {
	_, _, err := a.store.Revoke(ctx, id, by, reason)
	if errors.Is(err, minted.ErrInvalid) || errors.Is(err, minted.ErrNotFound) {
		return console.UserError{Err: err}
	}
	return err
}
