package policy

import (
	"errors"
	"fmt"
	"strconv"
	"strings"

	"ironcurtain.dev/gateway/gitref"
	"ironcurtain.dev/gateway/netpolicy"
)

// GitRemote is a parsed network git remote. Only https and ssh (URL or
// scp-style) remotes exist: local paths, file://, ext::, fd:: and every other
// transport are refused by ParseGitRemoteURL.
type GitRemote struct {
	Scheme string // "https" or "ssh"
	User   string // ssh user ("" when absent); https remotes never carry one
	Host   netpolicy.Host
	Port   int    // explicit port, 0 when absent
	Path   string // repository path as given, without the leading '/'
	SCP    bool   // written as [user@]host:path
}

// URL returns the remote in URL form (scp-style remotes become ssh:// URLs).
func (r GitRemote) URL() string {
	var b strings.Builder
	b.WriteString(r.Scheme)
	b.WriteString("://")
	if r.User != "" {
		b.WriteString(r.User)
		b.WriteByte('@')
	}
	b.WriteString(r.Host.URLHost())
	if r.Port != 0 {
		b.WriteByte(':')
		b.WriteString(strconv.Itoa(r.Port))
	}
	b.WriteByte('/')
	b.WriteString(r.Path)
	return b.String()
}

// RepoPath returns the repository path with the leading and trailing '/'
// and a ".git" suffix removed ("owner/repo").
func (r GitRemote) RepoPath() string {
	p, _ := normalizeRepoPath(r.Path)
	return p
}

// Domain returns the form domain allowlists match: host or host/owner/repo.
func (r GitRemote) Domain() string { return r.domain().String() }

func (r GitRemote) domain() domainValue { return domainValue{host: r.Host, path: r.RepoPath()} }

var errNotNetworkRemote = errors.New("not an https or ssh remote")

// ParseGitRemoteURL parses a remote URL the way git and ssh would read it and
// refuses anything that is not an https or ssh network remote, or that two
// readers could disagree on:
//   - "<helper>::<address>" (ext::, fd::, any remote helper) is refused;
//   - "scheme://..." must be https or ssh; https must not carry userinfo;
//     ssh may carry a plain user name (one '@', no ':');
//   - otherwise a ':' before any '/' makes it scp-style "[user@]host:path",
//     with the bracket forms "[host:port]:path" and "user@[host:port]:path";
//     several '@' are refused (ssh takes the last one, git the first);
//   - anything else is a local path and is refused.
//
// Hosts go through netpolicy (IDNA, lower case, every IP notation). Paths
// may not contain control characters, backslashes, "..", or start with '-'.
func ParseGitRemoteURL(raw string) (GitRemote, error) {
	if raw == "" {
		return GitRemote{}, errors.New("empty remote")
	}
	for i := 0; i < len(raw); i++ {
		if c := raw[i]; c <= 0x20 || c == 0x7f || c == '\\' {
			return GitRemote{}, fmt.Errorf("remote %s: contains a space, control character or backslash", gitref.Quote(raw))
		}
	}
	if strings.HasPrefix(raw, "-") {
		return GitRemote{}, fmt.Errorf("remote %s: starts with '-'", gitref.Quote(raw))
	}
	if helper, ok := transportHelper(raw); ok {
		return GitRemote{}, fmt.Errorf("remote %s: the %q transport is not allowed: %w", gitref.Quote(raw), helper, errNotNetworkRemote)
	}
	if i := strings.Index(raw, "://"); i >= 0 {
		return parseURLRemote(raw, strings.ToLower(raw[:i]), raw[i+3:])
	}
	colon := strings.IndexByte(raw, ':')
	slash := strings.IndexByte(raw, '/')
	if colon < 0 || (slash >= 0 && slash < colon && !strings.HasPrefix(raw, "[") && !strings.Contains(raw, "@[")) {
		return GitRemote{}, fmt.Errorf("remote %s: a local path: %w", gitref.Quote(raw), errNotNetworkRemote)
	}
	return parseSCPRemote(raw)
}

// transportHelper reports git's "<transport>::<address>" syntax: a scheme
// (letter, then letters, digits, '+', '-', '.') followed by "::".
func transportHelper(raw string) (string, bool) {
	for i := 0; i < len(raw); i++ {
		c := raw[i]
		alpha := c >= 'a' && c <= 'z' || c >= 'A' && c <= 'Z'
		if alpha || i > 0 && (c >= '0' && c <= '9' || c == '+' || c == '-' || c == '.') {
			continue
		}
		if i > 0 && strings.HasPrefix(raw[i:], "::") {
			return raw[:i], true
		}
		return "", false
	}
	return "", false
}

func parseURLRemote(raw, scheme, rest string) (GitRemote, error) {
	switch scheme {
	case "https", "ssh":
	default:
		return GitRemote{}, fmt.Errorf("remote %s: scheme %q is not allowed: %w", gitref.Quote(raw), scheme, errNotNetworkRemote)
	}
	authority, path, _ := strings.Cut(rest, "/")
	if strings.ContainsAny(authority, "?#") || strings.ContainsAny(path, "?#") {
		return GitRemote{}, fmt.Errorf("remote %s: query or fragment in a git remote", gitref.Quote(raw))
	}
	r := GitRemote{Scheme: scheme, Path: path}
	if at := strings.LastIndexByte(authority, '@'); at >= 0 {
		if scheme == "https" {
			return GitRemote{}, fmt.Errorf("remote %s: credentials or user names in https remotes are not allowed", gitref.Quote(raw))
		}
		user := authority[:at]
		if err := checkSSHUser(user); err != nil {
			return GitRemote{}, fmt.Errorf("remote %s: %w", gitref.Quote(raw), err)
		}
		r.User, authority = user, authority[at+1:]
	}
	defPort := 443
	if scheme == "ssh" {
		defPort = 22
	}
	host, port, err := netpolicy.ParseAuthority(authority, defPort)
	if err != nil {
		return GitRemote{}, fmt.Errorf("remote %s: %w", gitref.Quote(raw), unwrapParse(err))
	}
	r.Host = host
	if strings.Contains(authority, "]:") || (!strings.HasPrefix(authority, "[") && strings.Contains(authority, ":")) {
		r.Port = port
	}
	if err := checkRemotePath(r.Path); err != nil {
		return GitRemote{}, fmt.Errorf("remote %s: %w", gitref.Quote(raw), err)
	}
	return r, nil
}

func parseSCPRemote(raw string) (GitRemote, error) {
	r := GitRemote{Scheme: "ssh", SCP: true}
	var hostport, path string
	switch {
	case strings.HasPrefix(raw, "[") || strings.Contains(raw, "@["):
		user := ""
		s := raw
		if i := strings.Index(raw, "@["); i >= 0 && !strings.HasPrefix(raw, "[") {
			user, s = raw[:i], raw[i+1:]
		}
		end := strings.IndexByte(s, ']')
		if end < 0 || end+1 >= len(s) || s[end+1] != ':' {
			return GitRemote{}, fmt.Errorf("remote %s: malformed bracketed host", gitref.Quote(raw))
		}
		inner := s[1:end]
		path = s[end+2:]
		if at := strings.LastIndexByte(inner, '@'); at >= 0 {
			if user != "" {
				return GitRemote{}, fmt.Errorf("remote %s: several user names", gitref.Quote(raw))
			}
			user, inner = inner[:at], inner[at+1:]
		}
		if user != "" {
			if err := checkSSHUser(user); err != nil {
				return GitRemote{}, fmt.Errorf("remote %s: %w", gitref.Quote(raw), err)
			}
		}
		r.User = user
		if strings.Count(inner, ":") > 1 {
			hostport = "[" + inner + "]" // an IPv6 literal without a port
		} else {
			hostport = inner
		}
	default:
		colon := strings.IndexByte(raw, ':')
		hostport, path = raw[:colon], raw[colon+1:]
		if at := strings.LastIndexByte(hostport, '@'); at >= 0 {
			user := hostport[:at]
			if err := checkSSHUser(user); err != nil {
				return GitRemote{}, fmt.Errorf("remote %s: %w", gitref.Quote(raw), err)
			}
			r.User, hostport = user, hostport[at+1:]
		}
		if strings.ContainsAny(hostport, "[]") {
			return GitRemote{}, fmt.Errorf("remote %s: malformed host", gitref.Quote(raw))
		}
	}
	host, port, err := netpolicy.ParseAuthority(hostport, 22)
	if err != nil {
		return GitRemote{}, fmt.Errorf("remote %s: %w", gitref.Quote(raw), unwrapParse(err))
	}
	r.Host = host
	if strings.Contains(hostport, ":") && !strings.HasPrefix(hostport, "[") {
		r.Port = port
	}
	r.Path = strings.TrimPrefix(path, "/")
	if path == "" {
		return GitRemote{}, fmt.Errorf("remote %s: empty repository path", gitref.Quote(raw))
	}
	if err := checkRemotePath(r.Path); err != nil {
		return GitRemote{}, fmt.Errorf("remote %s: %w", gitref.Quote(raw), err)
	}
	return r, nil
}

// checkSSHUser accepts a plain user name: what ssh and git agree on.
func checkSSHUser(u string) error {
	if u == "" {
		return errors.New("empty user name")
	}
	for i := 0; i < len(u); i++ {
		c := u[i]
		if !(c >= 'a' && c <= 'z' || c >= 'A' && c <= 'Z' || c >= '0' && c <= '9' || c == '.' || c == '_' || c == '-') {
			return errors.New("user name contains characters other than letters, digits, '.', '_' and '-'")
		}
	}
	if u[0] == '-' {
		return errors.New("user name starts with '-'")
	}
	return nil
}

// checkRemotePath refuses repository paths another reader could resolve
// differently.
func checkRemotePath(p string) error {
	if strings.HasPrefix(p, "-") {
		return errors.New("repository path starts with '-'")
	}
	if strings.ContainsRune(p, '%') {
		return errors.New("percent-escapes in a repository path are not allowed")
	}
	if strings.ContainsAny(p, "?#") {
		return errors.New("query or fragment in a git remote")
	}
	for _, seg := range strings.Split(p, "/") {
		if seg == ".." {
			return errors.New("'..' in a repository path is not allowed")
		}
	}
	return nil
}

// normalizeRepoPath strips the leading and trailing '/' and a ".git" suffix,
// refusing empty inner segments and dot segments.
func normalizeRepoPath(p string) (string, error) {
	p = strings.TrimPrefix(p, "/")
	p = strings.TrimSuffix(p, "/")
	p = strings.TrimSuffix(p, ".git")
	p = strings.TrimSuffix(p, "/")
	if p == "" {
		return "", nil
	}
	for _, seg := range strings.Split(p, "/") {
		if seg == "" || seg == "." || seg == ".." {
			return "", errors.New("empty or dot segment in repository path")
		}
	}
	return p, nil
}
