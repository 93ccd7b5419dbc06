package main

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"strings"
	"time"

	"ironcurtain.dev/gateway/config"
	"ironcurtain.dev/gateway/internal/session"
	"ironcurtain.dev/gateway/internal/session/minted"
	"ironcurtain.dev/gateway/internal/session/workspace"
)

// withMintedSessions composes the static token files with the minted
// sessions in Postgres (when there is a database): static tokens first (in
// memory, constant time), then a lookup of the token's digest. It refuses a
// static session name that could be taken for a minted session's id.
func withMintedSessions(static session.Authenticator, tokens map[string]string, st *storage) (session.Authenticator, error) {
	for name := range tokens {
		if strings.HasPrefix(name, minted.IDPrefix) {
			return nil, fmt.Errorf("agent.token_files.%s: session names starting with %q are reserved for minted sessions", name, minted.IDPrefix)
		}
	}
	if st.pool == nil {
		// Without a database there are no minted sessions: some static token is needed.
		if len(tokens) == 0 {
			return nil, fmt.Errorf("no agent session is configured: set %s or agent.token_files (without a database there are no minted sessions)", envAgentToken)
		}
		return static, nil
	}
	st.minted = minted.NewStore(st.pool)
	return session.Chain{static, st.minted}, nil
}

// sweepEvery is how often the workspaces of expired sessions are released.
const sweepEvery = time.Minute

// startSessionWorkspaces gives every minted session its own sandbox when
// session_workspaces.root is set: the directory is created at mint, named
// by Authenticate (the policy and the filesystem server confine the
// session's calls to it), released at revocation, and the workspaces of
// expired sessions are released by a sweep every sweepEvery (unless
// session_workspaces.keep).
func startSessionWorkspaces(ctx context.Context, cfg *config.Config, st *storage, log *slog.Logger, closers *closeStack) error {
	wc := cfg.SessionWorkspaces
	if !wc.Enabled() {
		return nil
	}
	if st.minted == nil {
		return errors.New("session_workspaces.root: per-session workspaces need a database (they are for minted sessions)")
	}
	m, err := workspace.Open(wc.Root, wc.Keep)
	if err != nil {
		return fmt.Errorf("session_workspaces.root: %w", err)
	}
	closers.push("session workspaces", m.Close)
	log = log.With("component", "session-workspaces")
	st.minted.WithWorkspaces(m, log)
	log.Info("session workspaces", "root", m.Root(), "keep", m.Keep())
	go func() {
		t := time.NewTicker(sweepEvery)
		defer t.Stop()
		for {
			done, err := m.Sweep(func(ids []string) (map[string]bool, error) { return st.minted.ActiveIDs(ctx, ids) })
			if err != nil {
				log.Warn("sweeping session workspaces", "error", err)
			}
			if len(done) > 0 {
				log.Info("released the workspaces of ended sessions", "sessions", done)
			}
			select {
			case <-ctx.Done():
				return
			case <-t.C:
			}
		}
	}()
	return nil
}
