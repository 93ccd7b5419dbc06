// Package gitref checks the names git reads from a client: ref names (git
// check-ref-format's rules, ASCII only, namespace prefixes in lower case),
// object ids and remote names. It is pure (no I/O): the policy engine, the
// git wire parser and the remote resolver share it.
package gitref

import (
	"fmt"
	"strconv"
	"strings"
)

// CheckUpdateRef reports why name cannot be the target of a ref update
// received over the wire (a receive-pack command), or nil. The name must be
// a full ref under refs/heads/ or refs/tags/ that passes git
// check-ref-format, ASCII only, with its namespace prefixes written in
// lower case ("refs/Heads/main" and "Refs/heads/main" are refused: a
// case-insensitive ref store could read them as a protected branch).
func CheckUpdateRef(name string) error {
	if !ValidName(name, false, false) {
		return fmt.Errorf("%q is not a valid ref name", name)
	}
	if err := CheckPrefixCase(name); err != nil {
		return err
	}
	rest := strings.TrimPrefix(name, "refs/")
	if err := CheckPrefixCase(rest); err != nil {
		return err
	}
	if !strings.HasPrefix(name, "refs/heads/") && !strings.HasPrefix(name, "refs/tags/") {
		return fmt.Errorf("%q is outside refs/heads/ and refs/tags/", name)
	}
	return nil
}

// prefixes are the namespace prefixes git gives meaning to in a short
// or full ref name.
var prefixes = []string{"refs/", "heads/", "tags/", "remotes/"}

// CheckPrefixCase refuses a name that starts with one of prefixes in
// another case ("heADs/main", "Refs/heads/main"): git reads them as other
// refs, but a case-insensitive ref store (a remote on macOS or Windows,
// packed and loose refs mixed) may not, so the name could reach a protected
// branch without looking like it.
func CheckPrefixCase(name string) error {
	for _, p := range prefixes {
		if len(name) >= len(p) && strings.EqualFold(name[:len(p)], p) && name[:len(p)] != p {
			return fmt.Errorf("ref prefix %q must be written %q", name[:len(p)], p)
		}
	}
	return nil
}

// IsHexID reports whether s looks like a (possibly abbreviated) object id:
// 7 to 64 lower-case hex digits.
func IsHexID(s string) bool {
	if len(s) < 7 || len(s) > 64 {
		return false
	}
	for i := 0; i < len(s); i++ {
		c := s[i]
		if !(c >= '0' && c <= '9' || c >= 'a' && c <= 'f') {
			return false
		}
	}
	return true
}

// ValidName implements git check-ref-format's rules (with
// --allow-onelevel when oneLevel, and --refspec-pattern when star), ASCII
// only.
func ValidName(s string, oneLevel, star bool) bool {
	if s == "" || s == "@" || len(s) > 1024 {
		return false
	}
	if s[0] == '/' || s[len(s)-1] == '/' || s[len(s)-1] == '.' || strings.Contains(s, "//") ||
		strings.Contains(s, "..") || strings.Contains(s, "@{") {
		return false
	}
	stars := 0
	for i := 0; i < len(s); i++ {
		c := s[i]
		switch {
		case c <= 0x20 || c >= 0x7f:
			return false
		case c == '~' || c == '^' || c == ':' || c == '?' || c == '[' || c == '\\':
			return false
		case c == '*':
			stars++
			if !star || stars > 1 {
				return false
			}
		}
	}
	if !oneLevel && !strings.Contains(s, "/") {
		return false
	}
	for _, comp := range strings.Split(s, "/") {
		if strings.HasPrefix(comp, ".") || strings.HasSuffix(comp, ".lock") {
			return false
		}
	}
	return true
}

// IsRemoteName reports whether s can only be read as the name of a
// configured remote: letters, digits, '.', '_', '-' (not leading '-' or
// '.'), no "..".
func IsRemoteName(s string) bool {
	if s == "" || len(s) > 255 || s[0] == '-' || s[0] == '.' || strings.Contains(s, "..") {
		return false
	}
	for i := 0; i < len(s); i++ {
		c := s[i]
		if !(c >= 'a' && c <= 'z' || c >= 'A' && c <= 'Z' || c >= '0' && c <= '9' || c == '.' || c == '_' || c == '-') {
			return false
		}
	}
	return true
}

// Quote quotes a remote for an error message, masking any userinfo
// (it may hold a token) and truncating long values.
func Quote(s string) string {
	if i := strings.Index(s, "://"); i >= 0 {
		auth := s[i+3:]
		if j := strings.IndexByte(auth, '/'); j >= 0 {
			auth = auth[:j]
		}
		if at := strings.LastIndexByte(auth, '@'); at >= 0 {
			s = s[:i+3] + "***@" + s[i+3+at+1:]
		}
	}
	if len(s) > 80 {
		s = s[:80] + "…"
	}
	return strconv.Quote(s)
}
