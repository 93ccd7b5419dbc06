package main

import (
	"fmt"
	"strings"

	"ironcurtain.dev/gateway/internal/session"
	"ironcurtain.dev/gateway/internal/session/minted"
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
