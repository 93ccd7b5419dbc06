// Package session identifies the agent session behind a request. Each agent
// session has its own agent token; the token is worth nothing outside the
// gateway and only names the session for audit, budgets and approvals.
package session

import (
	"context"
	"crypto/sha256"
	"crypto/subtle"
	"encoding/hex"
	"errors"
	"strings"
)

// Session is an authenticated agent session.
type Session struct {
	ID   string // stable id: the configured name or a minted id, used in every audit row
	Name string
	// Budget is the session's own budget (a minted session's); nil: the
	// gateway's configured budgets apply.
	Budget *Budget
	// Workspace is the session's own sandbox directory (a minted session's,
	// when session_workspaces.root is set): the policy judges its calls
	// against it and the filesystem server is confined to it. "": the
	// configured sandbox (the static agent tokens).
	Workspace string
}

// Budget is what a minted session may spend. A zero field means the
// gateway's default for that measure (for tool calls: no limit).
type Budget struct {
	MaxTokens    int64   // model tokens (input + output), enforced by the model relay
	MaxCostUSD   float64 // estimated model cost, enforced by the model relay
	MaxToolCalls int64   // tool calls on every door, enforced by the MCP hub
}

// ErrUnknownToken is returned for a missing or unknown agent token.
var ErrUnknownToken = errors.New("unknown agent token")

// Authenticator maps an agent token to its session.
type Authenticator interface {
	Authenticate(ctx context.Context, token string) (Session, error)
}

type ctxKey struct{}

// WithSession returns a context that carries s.
func WithSession(ctx context.Context, s Session) context.Context {
	return context.WithValue(ctx, ctxKey{}, s)
}

// FromContext returns the session stored by WithSession.
func FromContext(ctx context.Context) (Session, bool) {
	s, ok := ctx.Value(ctxKey{}).(Session)
	return s, ok
}

// Static authenticates against a fixed set of tokens. Only SHA-256 digests of
// the tokens are kept, and comparison is constant-time.
type Static struct {
	entries []staticEntry
}

type staticEntry struct {
	digest [sha256.Size]byte
	s      Session
}

var _ Authenticator = (*Static)(nil)

// NewStatic builds a Static from session name → token.
func NewStatic(tokens map[string]string) (*Static, error) {
	st := &Static{}
	for name, tok := range tokens {
		if strings.TrimSpace(name) == "" {
			return nil, errors.New("agent token: empty session name")
		}
		if len(tok) < 16 {
			return nil, errors.New("agent token for session " + name + ": must be at least 16 characters")
		}
		st.entries = append(st.entries, staticEntry{digest: sha256.Sum256([]byte(tok)), s: Session{ID: name, Name: name}})
	}
	return st, nil
}

// Authenticate implements Authenticator.
func (st *Static) Authenticate(_ context.Context, token string) (Session, error) {
	if token == "" {
		return Session{}, ErrUnknownToken
	}
	d := sha256.Sum256([]byte(token))
	var found Session
	ok := 0
	for _, e := range st.entries {
		if subtle.ConstantTimeCompare(d[:], e.digest[:]) == 1 {
			found, ok = e.s, 1
		}
	}
	if ok == 0 {
		return Session{}, ErrUnknownToken
	}
	return found, nil
}

// Fingerprint returns a short, non-reversible id of a token for logs.
func Fingerprint(token string) string {
	d := sha256.Sum256([]byte(token))
	return hex.EncodeToString(d[:4])
}
