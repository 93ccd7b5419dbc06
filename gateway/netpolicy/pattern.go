package netpolicy

import (
	"strconv"
	"strings"
)

type patternKind uint8

const (
	patternExact  patternKind = iota + 1 // one host name or one IP literal
	patternSuffix                        // "*.x.com": x.com and every name under it
	patternAny                           // "*": every name, never an IP literal
)

// Pattern is a parsed host pattern from an allowlist. The zero Pattern
// matches nothing. Patterns are comparable with ==.
type Pattern struct {
	kind patternKind
	host Host // the exact host, or the suffix for "*.suffix"
}

// ParsePattern parses one allowlist entry:
//
//	"example.com"  exactly that name (canonicalised like ParseHost)
//	"*.example.com" example.com and its subdomains, on a dot boundary
//	"*"            every host NAME; never an IP literal
//	"192.0.2.7", "[2001:db8::1]", "2001:db8::1"  exactly that address
//
// Any other use of '*' ("*example.com", "a.*.com", "*.*", "*.1.2.3.4") is an
// error, as is everything ParseHost rejects.
func ParsePattern(p string) (Pattern, error) {
	switch {
	case p == "*":
		return Pattern{kind: patternAny}, nil
	case strings.HasPrefix(p, "*."):
		if strings.IndexByte(p[2:], '*') >= 0 {
			return Pattern{}, newParseError(ErrInvalidPattern, p, "'*' is only allowed as a whole first label")
		}
		h, err := ParseHost(p[2:])
		if err != nil {
			return Pattern{}, wrapParseError(ErrInvalidPattern, p, err)
		}
		if h.IsIP() {
			return Pattern{}, newParseError(ErrInvalidPattern, p, "a wildcard cannot apply to an IP address")
		}
		return Pattern{kind: patternSuffix, host: h}, nil
	case strings.IndexByte(p, '*') >= 0:
		return Pattern{}, newParseError(ErrInvalidPattern, p, "'*' is only allowed as a whole first label")
	}
	h, err := ParseHost(p)
	if err != nil {
		return Pattern{}, wrapParseError(ErrInvalidPattern, p, err)
	}
	return Pattern{kind: patternExact, host: h}, nil
}

// MustParsePatterns parses a fixed list (tests, built-in defaults) and panics
// on error. Never use it on configuration or agent input.
func MustParsePatterns(ps ...string) []Pattern {
	out := make([]Pattern, len(ps))
	for i, s := range ps {
		p, err := ParsePattern(s)
		if err != nil {
			panic(err)
		}
		out[i] = p
	}
	return out
}

// ParsePatterns parses a list, naming the index of the first bad entry.
func ParsePatterns(ps []string) ([]Pattern, error) {
	out := make([]Pattern, 0, len(ps))
	for i, s := range ps {
		p, err := ParsePattern(s)
		if err != nil {
			return nil, &IndexError{Index: i, Err: err}
		}
		out = append(out, p)
	}
	return out, nil
}

// IndexError names the list position of a bad entry.
type IndexError struct {
	Index int
	Err   error
}

func (e *IndexError) Error() string { return "[" + strconv.Itoa(e.Index) + "]: " + e.Err.Error() }

// Unwrap returns the entry's error.
func (e *IndexError) Unwrap() error { return e.Err }

// String returns the canonical text of the pattern.
func (p Pattern) String() string {
	switch p.kind {
	case patternAny:
		return "*"
	case patternSuffix:
		return "*." + p.host.name
	case patternExact:
		return p.host.URLHost()
	}
	return ""
}

// IsWildcard reports whether p is "*" or "*.suffix".
func (p Pattern) IsWildcard() bool { return p.kind == patternAny || p.kind == patternSuffix }

// MarshalText implements encoding.TextMarshaler.
func (p Pattern) MarshalText() ([]byte, error) { return []byte(p.String()), nil }

// UnmarshalText implements encoding.TextUnmarshaler with ParsePattern.
func (p *Pattern) UnmarshalText(b []byte) error {
	q, err := ParsePattern(string(b))
	if err != nil {
		return err
	}
	*p = q
	return nil
}

// Match reports whether h is matched by p. Wildcards match only names, with
// a dot boundary ("*.x.com" matches "x.com" and "a.x.com", not "evilx.com");
// IP literals match only an exact IP pattern.
func (p Pattern) Match(h Host) bool {
	if h.IsZero() {
		return false
	}
	switch p.kind {
	case patternExact:
		return p.host == h
	case patternAny:
		return !h.IsIP()
	case patternSuffix:
		if h.IsIP() {
			return false
		}
		s, n := p.host.name, h.name
		return n == s || len(n) > len(s) && n[len(n)-len(s)-1] == '.' && n[len(n)-len(s):] == s
	}
	return false
}

// MatchAny reports whether any pattern in ps matches h, and returns the first
// one that does (for the decision's rule).
func MatchAny(ps []Pattern, h Host) bool {
	_, ok := FirstMatch(ps, h)
	return ok
}

// FirstMatch returns the first pattern in ps that matches h.
func FirstMatch(ps []Pattern, h Host) (Pattern, bool) {
	for _, p := range ps {
		if p.Match(h) {
			return p, true
		}
	}
	return Pattern{}, false
}
