package git

import (
	"path/filepath"
	"strings"
)

// Limits on agent-supplied values.
const (
	maxRevLen     = 256
	maxPaths      = 1000
	maxMessageLen = 1 << 20
)

// checkRevision accepts a revision expression (branch, tag, object id,
// HEAD~2, main..feature, v1^{commit}, rev:path): printable ASCII without
// spaces, and never a leading '-' (it would be read as an option, even when
// a ref of that name exists).
func checkRevision(arg, v string) error {
	switch {
	case v == "":
		return refuse("%s is empty", arg)
	case len(v) > maxRevLen:
		return refuse("%s is too long", arg)
	case strings.HasPrefix(v, "-"):
		return refuse("%s may not start with '-'", arg)
	}
	for i := 0; i < len(v); i++ {
		if c := v[i]; c <= 0x20 || c >= 0x7f {
			return refuse("%s may only contain printable ASCII without spaces", arg)
		}
	}
	return nil
}

// checkRefName accepts a new branch or tag name under git's
// check-ref-format rules (stricter: ASCII only), never starting with '-'.
func checkRefName(arg, v string) error {
	if err := checkRevision(arg, v); err != nil {
		return err
	}
	bad := func() error { return refuse("%s is not a valid ref name", arg) }
	if strings.ContainsAny(v, "~^:?*[\\") || strings.Contains(v, "..") || strings.Contains(v, "@{") ||
		strings.Contains(v, "//") || v == "@" || v == "HEAD" || strings.HasSuffix(v, "/") ||
		strings.HasSuffix(v, ".") || strings.HasSuffix(v, ".lock") || strings.HasPrefix(v, "/") {
		return bad()
	}
	for _, comp := range strings.Split(v, "/") {
		if strings.HasPrefix(comp, ".") || strings.HasSuffix(comp, ".lock") {
			return bad()
		}
	}
	if strings.HasPrefix(v, "refs/") {
		return refuse("%s must be a short name, not a full ref", arg)
	}
	return nil
}

// checkRemoteName accepts a remote name: letters, digits, '.', '_' and
// '-', not starting with '-' or '.'.
func checkRemoteName(arg, v string) error {
	if v == "" || len(v) > 100 {
		return refuse("%s must be a remote name of 1 to 100 characters", arg)
	}
	if v[0] == '-' || v[0] == '.' {
		return refuse("%s may not start with '-' or '.'", arg)
	}
	for i := 0; i < len(v); i++ {
		c := v[i]
		if !(c >= 'a' && c <= 'z' || c >= 'A' && c <= 'Z' || c >= '0' && c <= '9' || c == '.' || c == '_' || c == '-') {
			return refuse("%s may only contain letters, digits, '.', '_' and '-'", arg)
		}
	}
	if strings.HasSuffix(v, ".lock") || strings.Contains(v, "..") {
		return refuse("%s is not a valid remote name", arg)
	}
	return nil
}

// isRemoteName reports whether v reads as a remote name rather than a URL.
func isRemoteName(v string) bool { return checkRemoteName("remote", v) == nil }

// checkRawPath refuses empty paths, control characters and invalid UTF-8
// on the raw string.
func checkRawPath(arg, p string) error {
	if p == "" {
		return refuse("%s is empty", arg)
	}
	for i, r := range p {
		if r == 0xFFFD && !strings.HasPrefix(p[i:], "\uFFFD") {
			return refuse("%s contains invalid UTF-8", arg)
		}
		if r < 0x20 || r == 0x7f || (r >= 0x80 && r < 0xa0) {
			return refuse("%s contains control characters", arg)
		}
	}
	return nil
}

// sandboxPath checks a directory or file argument: absolute, clean (the
// policy engine hands over realpaths), inside the sandbox by a separator
// boundary. The path is not echoed: it may name a host path outside.
func (s *Server) sandboxPath(arg, p string) (string, error) {
	if err := checkRawPath(arg, p); err != nil {
		return "", err
	}
	if !filepath.IsAbs(p) {
		return "", refuse("%s must be an absolute path", arg)
	}
	if filepath.Clean(p) != p {
		return "", refuse("%s is not canonical", arg)
	}
	if !within(s.sandbox, p) {
		return "", refuse("access denied: %s is outside the sandbox", arg)
	}
	return p, nil
}

// pathspecs converts absolute file arguments into paths relative to the
// work tree, refusing anything outside it (or inside its .git).
func (s *Server) pathspecs(arg string, workTree string, files []string) ([]string, error) {
	if len(files) > maxPaths {
		return nil, refuse("too many %s (limit %d)", arg, maxPaths)
	}
	out := make([]string, 0, len(files))
	for _, f := range files {
		p, err := s.sandboxPath(arg, f)
		if err != nil {
			return nil, err
		}
		if !within(workTree, p) {
			return nil, refuse("access denied: an entry of %s is outside the repository", arg)
		}
		rel, err := filepath.Rel(workTree, p)
		if err != nil {
			return nil, refuse("access denied: an entry of %s is outside the repository", arg)
		}
		rel = filepath.ToSlash(rel)
		if rel == ".git" || strings.HasPrefix(rel, ".git/") {
			return nil, refuse("access denied: %s may not name the .git directory", arg)
		}
		out = append(out, rel)
	}
	return out, nil
}
