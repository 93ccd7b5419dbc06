// Package minted keeps per-run agent sessions that an operator mints
// through the ops API or `ironcurtain sessions create`: a name, an expiry,
// an optional budget and labels, and a random agent token shown once and
// stored only as its SHA-256 digest (table agent_sessions, migration 0006).
//
// Store.Authenticate is a session.Authenticator: composed after the static
// token files (session.Chain) it serves every door (MCP, model relay,
// egress proxy, git HTTP, GitHub relay). Nothing is cached: each request
// reads the session's row by the digest of its token (one primary-key-sized
// index lookup), so a revocation or an expiry ends every door on every
// replica at the next request.
package minted

import (
	"crypto/rand"
	"crypto/sha256"
	"encoding/base32"
	"encoding/base64"
	"errors"
	"fmt"
	"math"
	"regexp"
	"sort"
	"strings"
	"time"
	"unicode"
	"unicode/utf8"

	"ironcurtain.dev/gateway/internal/session"
)

// Bounds of a Spec.
const (
	DefaultTTL      = 8 * time.Hour
	MinTTL          = time.Minute
	MaxTTL          = 30 * 24 * time.Hour
	MaxNameLen      = 64
	MaxLabels       = 16
	MaxLabelKeyLen  = 63
	MaxLabelValue   = 256 // bytes
	MaxCostUSD      = 1e6
	MaxReasonBytes  = 1024
	IDPrefix        = "sess_"
	TokenPrefix     = "icsess_"
	tokenRandBytes  = 32
	idRandBytes     = 16
	expiryTolerance = 5 * time.Second // an expires_at computed a moment ago on the client
)

// TokenLen is the length of every minted token.
var TokenLen = len(TokenPrefix) + base64.RawURLEncoding.EncodedLen(tokenRandBytes)

// Errors (wrapped; test with errors.Is).
var (
	ErrInvalid  = errors.New("invalid session")
	ErrNotFound = errors.New("no such minted session")
	ErrRevoked  = fmt.Errorf("%w: the session was revoked", session.ErrUnknownToken)
	ErrExpired  = fmt.Errorf("%w: the session expired", session.ErrUnknownToken)
	// ErrBudgetSpent: the session's tool-call budget is used up.
	ErrBudgetSpent = session.ErrBudgetSpent
)

// Budget is a minted session's budget; 0 in a field means the gateway's
// default for that measure (for tool calls: no limit).
type Budget struct {
	MaxTokens    int64   `json:"max_tokens"`
	MaxCostUSD   float64 `json:"max_cost_usd"`
	MaxToolCalls int64   `json:"max_tool_calls"`
}

// IsZero reports whether no field is set.
func (b Budget) IsZero() bool { return b == Budget{} }

func (b Budget) session() *session.Budget {
	if b.IsZero() {
		return nil
	}
	return &session.Budget{MaxTokens: b.MaxTokens, MaxCostUSD: b.MaxCostUSD, MaxToolCalls: b.MaxToolCalls}
}

// Spec is what an operator asks for. Give TTL or ExpiresAt (not both);
// neither means DefaultTTL.
type Spec struct {
	Name      string            `json:"name"`
	TTL       time.Duration     `json:"-"`
	ExpiresAt time.Time         `json:"expires_at,omitzero"`
	Budget    Budget            `json:"budget"`
	Labels    map[string]string `json:"labels,omitempty"`
}

// Expiry returns when a session minted now from s expires.
func (s Spec) Expiry(now time.Time) time.Time {
	switch {
	case !s.ExpiresAt.IsZero():
		return s.ExpiresAt
	case s.TTL != 0:
		return now.Add(s.TTL)
	default:
		return now.Add(DefaultTTL)
	}
}

var (
	nameRE     = regexp.MustCompile(`^[A-Za-z0-9][A-Za-z0-9._-]{0,63}$`)
	labelKeyRE = regexp.MustCompile(`^[a-z0-9][a-z0-9._/-]{0,62}$`)
	idRE       = regexp.MustCompile(`^sess_[a-z2-7]{26}$`)
)

// Validate checks s against the bounds; the error names the field.
func (s Spec) Validate(now time.Time) error {
	var errs []error
	bad := func(field, format string, a ...any) {
		errs = append(errs, fmt.Errorf("%w: %s: %s", ErrInvalid, field, fmt.Sprintf(format, a...)))
	}
	switch {
	case s.Name == "":
		bad("name", "required")
	case len(s.Name) > MaxNameLen:
		bad("name", "at most %d characters", MaxNameLen)
	case !nameRE.MatchString(s.Name):
		bad("name", "letters, digits, '.', '_' and '-' only, starting with a letter or digit")
	}
	switch {
	case s.TTL != 0 && !s.ExpiresAt.IsZero():
		bad("expires_at", "give ttl or expires_at, not both")
	case s.TTL != 0 && (s.TTL < MinTTL || s.TTL > MaxTTL):
		bad("ttl", "must be between %s and %s", MinTTL, fmtDuration(MaxTTL))
	case !s.ExpiresAt.IsZero() && s.ExpiresAt.Before(now.Add(MinTTL-expiryTolerance)):
		bad("expires_at", "must be at least %s from now", MinTTL)
	case !s.ExpiresAt.IsZero() && s.ExpiresAt.After(now.Add(MaxTTL+expiryTolerance)):
		bad("expires_at", "must be at most %s from now", fmtDuration(MaxTTL))
	}
	b := s.Budget
	if b.MaxTokens < 0 {
		bad("budget.max_tokens", "must not be negative")
	}
	switch {
	case math.IsNaN(b.MaxCostUSD) || math.IsInf(b.MaxCostUSD, 0):
		bad("budget.max_cost_usd", "must be a finite number")
	case b.MaxCostUSD < 0:
		bad("budget.max_cost_usd", "must not be negative")
	case b.MaxCostUSD > MaxCostUSD:
		bad("budget.max_cost_usd", "at most %g", float64(MaxCostUSD))
	}
	if b.MaxToolCalls < 0 {
		bad("budget.max_tool_calls", "must not be negative")
	}
	if len(s.Labels) > MaxLabels {
		bad("labels", "at most %d labels", MaxLabels)
	} else {
		keys := make([]string, 0, len(s.Labels))
		for k := range s.Labels {
			keys = append(keys, k)
		}
		sort.Strings(keys)
		for _, k := range keys {
			field := fmt.Sprintf("labels[%s]", quoteField(k))
			v := s.Labels[k]
			switch {
			case !labelKeyRE.MatchString(k):
				bad(field, "a key is 1-%d of a-z, 0-9, '.', '_', '/', '-', starting with a letter or digit", MaxLabelKeyLen)
			case len(v) > MaxLabelValue:
				bad(field, "a value is at most %d bytes", MaxLabelValue)
			default:
				if err := printable(v); err != "" {
					bad(field, "%s", err)
				}
			}
		}
	}
	return errors.Join(errs...)
}

// ValidateReason checks a revocation reason.
func ValidateReason(reason string) error {
	if len(reason) > MaxReasonBytes {
		return fmt.Errorf("%w: reason: at most %d bytes", ErrInvalid, MaxReasonBytes)
	}
	if err := printable(reason); err != "" {
		return fmt.Errorf("%w: reason: %s", ErrInvalid, err)
	}
	return nil
}

// printable refuses invalid UTF-8, control characters and invisible or
// direction-changing format characters (which could make a console show a
// label other than the stored one).
func printable(v string) string {
	if !utf8.ValidString(v) {
		return "not valid UTF-8"
	}
	for _, r := range v {
		if !unicode.IsPrint(r) {
			return fmt.Sprintf("character %U is not allowed (control, invisible or direction-changing)", r)
		}
	}
	return ""
}

// quoteField shows an operator-given key in an error safely and briefly.
func quoteField(k string) string {
	if len(k) > 70 {
		k = k[:70] + "…"
	}
	q := fmt.Sprintf("%q", k)
	return strings.ToValidUTF8(q, "?")
}

func fmtDuration(d time.Duration) string {
	if d%(24*time.Hour) == 0 {
		return fmt.Sprintf("%dd", d/(24*time.Hour))
	}
	return d.String()
}

// ValidID reports whether id has the form of a minted session id.
func ValidID(id string) bool { return idRE.MatchString(id) }

// Token is a minted agent token. String never reveals it: print
// string(tok) once, where the operator asked for it.
type Token string

// String implements fmt.Stringer without revealing the token.
func (Token) String() string { return "[agent token]" }

// GoString implements fmt.GoStringer without revealing the token.
func (Token) GoString() string { return "minted.Token([redacted])" }

// Digest is what the database stores of a token.
func Digest(token string) [sha256.Size]byte { return sha256.Sum256([]byte(token)) }

// plausible reports whether token has the form of a minted token; others
// are refused without a database round trip.
func plausible(token string) bool {
	return len(token) == TokenLen && strings.HasPrefix(token, TokenPrefix)
}

var b32 = base32.StdEncoding.WithPadding(base32.NoPadding)

// newCredentials returns a fresh session id and token from crypto/rand.
func newCredentials() (id string, tok Token, err error) {
	buf := make([]byte, idRandBytes+tokenRandBytes)
	if _, err := rand.Read(buf); err != nil {
		return "", "", fmt.Errorf("reading random bytes: %w", err)
	}
	id = IDPrefix + strings.ToLower(b32.EncodeToString(buf[:idRandBytes]))
	tok = Token(TokenPrefix + base64.RawURLEncoding.EncodeToString(buf[idRandBytes:]))
	return id, tok, nil
}

// Session is a minted session as operators see it (never its token).
type Session struct {
	ID            string            `json:"id"`
	Name          string            `json:"name"`
	Status        string            `json:"status"` // active, expired or revoked (at the time of the read)
	CreatedAt     time.Time         `json:"created_at"`
	CreatedBy     string            `json:"created_by"`
	ExpiresAt     time.Time         `json:"expires_at"`
	RevokedAt     *time.Time        `json:"revoked_at,omitempty"`
	RevokedBy     string            `json:"revoked_by,omitempty"`
	RevokeReason  string            `json:"revoke_reason,omitempty"`
	Budget        Budget            `json:"budget"`
	ToolCallsUsed int64             `json:"tool_calls_used"`
	Labels        map[string]string `json:"labels"`
	// Workspace is the session's own sandbox directory on the gateway
	// (session_workspaces.root/<id>), set by Mint and Get when workspaces
	// are configured: the directory to mount as the agent's /workspace.
	Workspace string `json:"workspace,omitempty"`
}

// Statuses of a minted session.
const (
	StatusActive  = "active"
	StatusExpired = "expired"
	StatusRevoked = "revoked"
)
