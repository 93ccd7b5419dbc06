package opsapi

import (
	"crypto/sha256"
	"crypto/subtle"
	"errors"
	"fmt"
	"net/http"
	"sort"
	"strings"

	"ironcurtain.dev/gateway/internal/auth"
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
	return newTokenSet("operator", "operator", tokens)
}

// NewScrapers builds a set of metrics tokens (Deps.Scrapers) from name →
// token: the same checks as operator tokens, named as metrics tokens in
// errors.
func NewScrapers(tokens map[string]OperatorToken) (*Operators, error) {
	if len(tokens) == 0 {
		return nil, errors.New("metrics tokens: none configured")
	}
	return newTokenSet("metrics", "scraper", tokens)
}

// newTokenSet checks and digests tokens; kind and holder name them in errors.
func newTokenSet(kind, holder string, tokens map[string]OperatorToken) (*Operators, error) {
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
			return nil, fmt.Errorf("%s tokens: empty %s name", kind, holder)
		}
		if len(tok) < MinTokenLength {
			return nil, fmt.Errorf("%s token for %q: must be at least %d characters", kind, name, MinTokenLength)
		}
		d := sha256.Sum256([]byte(tok))
		if other, dup := seen[d]; dup {
			return nil, fmt.Errorf("%s tokens: %q and %q share a token", kind, other, name)
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

// ErrMetricsTokenIsOperator is returned by RejectOverlap.
var ErrMetricsTokenIsOperator = errors.New("a metrics token is also an operator token")

// RejectOverlap fails when a token of o is also one of other's: a metrics
// token must not double as an operator token, or whoever scrapes metrics
// could approve escalations.
func (o *Operators) RejectOverlap(other *Operators) error {
	if o == nil || other == nil {
		return nil
	}
	for _, e := range o.entries {
		for _, f := range other.entries {
			if subtle.ConstantTimeCompare(e.digest[:], f.digest[:]) == 1 {
				return ErrMetricsTokenIsOperator
			}
		}
	}
	return nil
}

// MetricsAllowed reports whether r carries "Authorization: Bearer <token>"
// with an operator token or a metrics token (scrapers: nil for none).
// Metrics tokens open GET /metrics and nothing else.
func MetricsAllowed(operators, scrapers *Operators, r *http.Request) bool {
	token, ok := bearer(r)
	if !ok {
		return false
	}
	_, op := operators.Authenticate(token)
	_, sc := scrapers.Authenticate(token)
	return op || sc
}

// bearer is the token of the request's one "Authorization: Bearer <token>"
// header (auth.Bearer: the scheme in any case). Two Authorization headers
// are refused (false): readers differ on which one counts, so none does.
func bearer(r *http.Request) (string, bool) {
	token, err := auth.Bearer(r.Header)
	return token, err == nil
}
