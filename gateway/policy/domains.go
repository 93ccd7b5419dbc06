package policy

import (
	"errors"
	"fmt"
	"strings"

	"ironcurtain.dev/gateway/netpolicy"
)

// domainValue is what a URL role contributes to domain matching: a canonical
// host and, for git remotes, the repository path ("owner/repo").
type domainValue struct {
	host netpolicy.Host
	path string
}

// String returns the original's domain form: host or host/owner/repo.
func (d domainValue) String() string {
	if d.path == "" {
		return d.host.String()
	}
	return d.host.String() + "/" + d.path
}

// domainPattern is one parsed allowlist entry: a netpolicy host pattern and,
// for "host/owner/repo" entries, the repository path that must equal the
// value's (case-insensitively: the forges we know treat owner and repository
// names that way).
type domainPattern struct {
	raw  string
	host netpolicy.Pattern
	path string
}

// parseDomainPattern parses "host", "*.suffix", "*", an IP literal or
// "host/owner/repo" (exact host only).
func parseDomainPattern(s string) (domainPattern, error) {
	hostPart, pathPart, hasPath := strings.Cut(s, "/")
	hp, err := netpolicy.ParsePattern(hostPart)
	if err != nil {
		return domainPattern{}, err
	}
	dp := domainPattern{raw: s, host: hp}
	if hasPath {
		if hp.IsWildcard() {
			return domainPattern{}, fmt.Errorf("invalid pattern %q: a repository path needs an exact host", s)
		}
		p, err := normalizeRepoPath(pathPart)
		if err != nil {
			return domainPattern{}, fmt.Errorf("invalid pattern %q: %w", s, err)
		}
		if p == "" {
			return domainPattern{}, fmt.Errorf("invalid pattern %q: empty repository path", s)
		}
		dp.path = p
	}
	return dp, nil
}

func (p domainPattern) match(d domainValue) bool {
	if !p.host.Match(d.host) {
		return false
	}
	return p.path == "" || strings.EqualFold(p.path, d.path)
}

// matchDomain is the linear reference for domainSet.match: the first
// pattern of ps that matches d. domainSet must agree with it on every
// input (FuzzDomainSetMatchesLinear).
func matchDomain(ps []domainPattern, d domainValue) bool {
	for _, p := range ps {
		if p.match(d) {
			return true
		}
	}
	return false
}

// linearSetMax is the size up to which a domainSet scans its patterns in
// order: for a handful of entries a scan is cheaper than the map lookups.
const linearSetMax = 8

// domainSet is a list of domain patterns indexed at load, so a match costs
// a few map lookups (one per label of the host) whatever the list's size:
// exact hosts in one map (with their repository paths, if any), "*.x"
// suffixes in another, "*" as a flag. It matches exactly what matchDomain
// over the same list matches.
type domainSet struct {
	patterns []domainPattern // in list order
	any      bool            // "*": every name, never an IP literal
	// exact maps a host to the repository paths allowed on it; an entry
	// "" allows every path (a host-only pattern).
	exact map[netpolicy.Host][]string
	// suffix holds the X of every "*.X" pattern (X and names under it).
	suffix map[string]struct{}
}

func newDomainSet(ps []domainPattern) (domainSet, error) {
	s := domainSet{patterns: ps}
	if len(ps) <= linearSetMax {
		return s, nil
	}
	s.exact = make(map[netpolicy.Host][]string)
	s.suffix = make(map[string]struct{})
	for _, p := range ps {
		text := p.host.String()
		switch {
		case text == "*":
			s.any = true
		case p.host.IsWildcard():
			s.suffix[strings.TrimPrefix(text, "*.")] = struct{}{}
		default:
			h, err := netpolicy.ParseHost(text)
			if err != nil { // a parsed pattern's host always re-parses
				return domainSet{}, fmt.Errorf("indexing pattern %q: %w", p.raw, err)
			}
			s.exact[h] = append(s.exact[h], p.path)
		}
	}
	return s, nil
}

func (s *domainSet) len() int { return len(s.patterns) }

func (s *domainSet) match(d domainValue) bool {
	if s.exact == nil {
		return matchDomain(s.patterns, d)
	}
	if d.host.IsZero() {
		return false
	}
	for _, p := range s.exact[d.host] {
		if p == "" || strings.EqualFold(p, d.path) {
			return true
		}
	}
	if d.host.IsIP() {
		return false // neither "*" nor a suffix ever matches an IP literal
	}
	if s.any {
		return true
	}
	if len(s.suffix) == 0 {
		return false
	}
	for n := d.host.String(); ; {
		if _, ok := s.suffix[n]; ok {
			return true
		}
		i := strings.IndexByte(n, '.')
		if i < 0 {
			return false
		}
		n = n[i+1:]
	}
}

func parseDomainPatterns(list []string) ([]domainPattern, error) {
	out := make([]domainPattern, 0, len(list))
	for i, s := range list {
		p, err := parseDomainPattern(s)
		if err != nil {
			return nil, &FileError{Path: fmt.Sprintf("[%d]", i), Err: fmt.Errorf("%q: %w", s, unwrapParse(err))}
		}
		out = append(out, p)
	}
	return out, nil
}

// unwrapParse shortens netpolicy's error text (it already quotes the input).
func unwrapParse(err error) error {
	var pe *netpolicy.ParseError
	if errors.As(err, &pe) && pe.Reason != "" {
		return errors.New(pe.Reason)
	}
	return err
}

// fetchDomain parses a fetch-url value strictly and returns its canonical
// URL and domain.
func fetchDomain(raw string) (string, domainValue, error) {
	u, err := netpolicy.ParseURL(raw)
	if err != nil {
		return "", domainValue{}, err
	}
	if u.IsString(raw) {
		return raw, domainValue{host: u.Host}, nil // already canonical: no copy
	}
	return u.String(), domainValue{host: u.Host}, nil
}
