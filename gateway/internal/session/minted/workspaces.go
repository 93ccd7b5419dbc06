package minted

import (
	"context"
	"fmt"
	"log/slog"
)

// Workspaces is what the store asks of per-session workspaces
// (*workspace.Manager): a directory created at mint, named at every
// authentication, released at revocation.
type Workspaces interface {
	Create(id string) (string, error)
	Path(id string) (string, error)
	Release(id string) error
	Discard(id string) error
}

// WithWorkspaces gives every session minted from now on its own workspace
// (session.Session.Workspace): created before the session's row is
// inserted (minting fails if it cannot be), released after a revocation
// commits (a failure is logged to log and left to the sweeper, see
// ActiveIDs). It returns st.
func (st *Store) WithWorkspaces(w Workspaces, log *slog.Logger) *Store {
	if log == nil {
		log = slog.New(slog.DiscardHandler)
	}
	st.ws, st.log = w, log
	return st
}

// createWorkspace makes id's workspace and returns its path ("" without
// workspaces); undo discards it again (for a mint that fails after it).
func (st *Store) createWorkspace(id string) (undo func(), dir string, err error) {
	if st.ws == nil {
		return func() {}, "", nil
	}
	if dir, err = st.ws.Create(id); err != nil {
		return nil, "", err
	}
	return func() {
		if err := st.ws.Discard(id); err != nil {
			st.log.Warn("discarding the workspace of a session whose minting failed", "session", id, "error", err)
		}
	}, dir, nil
}

// releaseWorkspace ends a revoked session's workspace.
func (st *Store) releaseWorkspace(id string) {
	if st.ws == nil {
		return
	}
	if err := st.ws.Release(id); err != nil {
		st.log.Warn("releasing the workspace of a revoked session (the sweeper retries)", "session", id, "error", err)
	}
}

// ActiveIDs returns which of ids are minted sessions that are neither
// revoked nor expired (by the database's clock); the workspace sweeper
// releases the others.
func (st *Store) ActiveIDs(ctx context.Context, ids []string) (map[string]bool, error) {
	rows, err := st.pool.Query(ctx, `SELECT id FROM agent_sessions WHERE id = ANY($1) AND revoked_at IS NULL AND expires_at > now()`, ids)
	if err != nil {
		return nil, fmt.Errorf("reading active sessions: %w", err)
	}
	defer rows.Close()
	out := make(map[string]bool, len(ids))
	for rows.Next() {
		var id string
		if err := rows.Scan(&id); err != nil {
			return nil, fmt.Errorf("reading active sessions: %w", err)
		}
		out[id] = true
	}
	if err := rows.Err(); err != nil {
		return nil, fmt.Errorf("reading active sessions: %w", err)
	}
	return out, nil
}
