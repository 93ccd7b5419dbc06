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

func matchDomain(ps []domainPattern, d domainValue) bool {
	for _, p := range ps {
		if p.match(d) {
			return true
		}
	}
	return false
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
	return u.String(), domainValue{host: u.Host}, nil
}
