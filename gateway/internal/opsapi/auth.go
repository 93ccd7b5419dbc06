package opsapi

import (
	"crypto/sha256"
	"crypto/subtle"
	"errors"
	"fmt"
	"sort"
	"strings"
)

// MinTokenLength is the shortest operator token accepted.
const MinTokenLength = 24

// OperatorToken is a secret that lets an operator use the ops API. It is a
// type of its own so it cannot be passed where an agent token is expected
// (or the reverse) by accident; String never reveals it.
type OperatorToken string

// String implements fmt.Stringer without revealing the token.
func (OperatorToken) String() string { return "[operator token]" }

// GoString implements fmt.GoStringer without revealing the token.
func (OperatorToken) GoString() string { return "opsapi.OperatorToken([redacted])" }

// Operators authenticates operator tokens. Only SHA-256 digests are kept and
// every comparison is constant-time over all entries.
type Operators struct {
	entries []operator
}

type operator struct {
	name   string
	digest [sha256.Size]byte
}

// NewOperators builds the operator set from name → token.
func NewOperators(tokens map[string]OperatorToken) (*Operators, error) {
	if len(tokens) == 0 {
		return nil, errors.New("operator tokens: none configured (set IRONCURTAIN_OPERATOR_TOKEN)")
	}
	names := make([]string, 0, len(tokens))
	for n := range tokens {
		names = append(names, n)
	}
	sort.Strings(names)
	o := &Operators{}
	seen := map[[sha256.Size]byte]string{}
	for _, name := range names {
		tok := tokens[name]
		if strings.TrimSpace(name) == "" {
			return nil, errors.New("operator tokens: empty operator name")
		}
		if len(tok) < MinTokenLength {
			return nil, fmt.Errorf("operator token for %q: must be at least %d characters", name, MinTokenLength)
		}
		d := sha256.Sum256([]byte(tok))
		if other, dup := seen[d]; dup {
			return nil, fmt.Errorf("operator tokens: %q and %q share a token", other, name)
		}
		seen[d] = name
		o.entries = append(o.entries, operator{name: name, digest: d})
	}
	return o, nil
}

// Authenticate returns the operator's name for a valid token.
func (o *Operators) Authenticate(token string) (string, bool) {
	if o == nil || token == "" {
		return "", false
	}
	d := sha256.Sum256([]byte(token))
	name, found := "", 0
	for _, e := range o.entries {
		if subtle.ConstantTimeCompare(d[:], e.digest[:]) == 1 {
			name, found = e.name, 1
		}
	}
	return name, found == 1
}

// ErrSharedToken is returned by RejectAgentTokens.
var ErrSharedToken = errors.New("an agent token is also an operator token")

// RejectAgentTokens fails when any agent token is also an operator token:
// an agent that holds an operator token could approve its own escalations.
func (o *Operators) RejectAgentTokens(agentTokens ...string) error {
	for _, t := range agentTokens {
		if _, ok := o.Authenticate(t); ok {
			return ErrSharedToken
		}
	}
	return nil
}
