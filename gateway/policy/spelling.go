package policy

import (
	"fmt"
	"strconv"
	"strings"
	"unicode"
	"unicode/utf8"

	"golang.org/x/text/unicode/norm"
)

// RuleAmbiguousPath names the refusal of a path-role value spelled in a way
// that another layer (a shell, a URL parser, a case-insensitive or
// normalising file system, a human reviewer) may read as a different name
// than the one the policy judged.
const RuleAmbiguousPath = "structural-ambiguous-path"

// Spelling problems of a raw path value, in the order they are checked.
// NUL and the other control characters (C0, DEL, C1) are not among them:
// the canonicaliser refuses those (structural-invalid-argument).
const (
	spellInvalidUTF8 = "is not valid UTF-8"
	spellTildeUser   = `starts with "~" followed by a name, which a shell reads as another user's home directory (write "~/" or a full path)`
	spellNetwork     = `starts with "//", which a URL parser reads as a host name and POSIX leaves to the implementation`
	spellBackslash   = "contains a backslash, which Windows and URL parsers read as a separator"
	spellScheme      = "starts with what a URL parser reads as a scheme"
	spellInvisible   = "contains the invisible or formatting character"
	spellProtected   = "has a component that a case-insensitive or normalising file system reads as the protected name"
)

// maxEcho bounds what a reason quotes of a value (in bytes of the source).
const maxEcho = 48

// spellingProblem reports why raw, a path-role value as the agent sent it,
// is spelled ambiguously ("" when it is not). It checks the characters and
// the start of the value; protected names are checked separately
// (protectedSpelling), after the protected-path invariant.
//
// A URL scheme is RFC 3986's: a letter, then letters, digits, "+", "-" or
// ".", then ":", at the very start of the value. So "notes:v2.txt" and
// "c:x" are refused (a URL parser reads them as the schemes "notes" and
// "c", Windows reads "c:" as a drive); "./notes:v2.txt", "dir/notes:v2.txt"
// and absolute paths with colons are accepted, as RFC 3986 itself
// disambiguates a relative reference with a colon in its first segment.
func spellingProblem(raw string) string {
	if !utf8.ValidString(raw) {
		return spellInvalidUTF8
	}
	if len(raw) > 1 && raw[0] == '~' && raw[1] != '/' {
		return spellTildeUser
	}
	if strings.HasPrefix(raw, "//") {
		return spellNetwork
	}
	if n := schemeLen(raw); n > 0 {
		return fmt.Sprintf("%s (%s)", spellScheme, echo(raw[:n]))
	}
	if strings.IndexByte(raw, '\\') >= 0 {
		return spellBackslash
	}
	for i := 0; i < len(raw); i++ {
		if raw[i] < utf8.RuneSelf {
			continue
		}
		r, size := utf8.DecodeRuneInString(raw[i:])
		if invisible(r) {
			return fmt.Sprintf("%s %s", spellInvisible, codePoint(r))
		}
		i += size - 1
	}
	return ""
}

// schemeLen returns the length of the RFC 3986 scheme and its colon at the
// start of s (a letter, then letters, digits, "+", "-" or "."), 0 if none.
func schemeLen(s string) int {
	for i := 0; i < len(s); i++ {
		c := s[i]
		switch {
		case c|0x20 >= 'a' && c|0x20 <= 'z':
		case i > 0 && (c >= '0' && c <= '9' || c == '+' || c == '-' || c == '.'):
		case i > 0 && c == ':':
			return i + 1
		default:
			return 0
		}
	}
	return 0
}

// invisible reports whether r is a code point a reader cannot see or that
// changes how the text around it is displayed, without being a control
// character (those are refused as such): every format character (Cf:
// zero-width spaces and joiners, bidi controls, soft hyphen, tags, ...),
// the Other_Default_Ignorable_Code_Point and Variation_Selector properties
// (together with Cf a superset of Unicode's Default_Ignorable_Code_Point),
// line and paragraph separators, noncharacters, and U+FFFD (an earlier
// layer replaced bytes it could not decode: the name meant is unknown).
func invisible(r rune) bool {
	switch {
	case r < 0x34f:
		// ASCII and C1 controls are refused as control characters; below
		// U+034F only the soft hyphen is in a table.
		return r == 0xad
	case r >= 0x3400 && r <= 0x9fff:
		return false // CJK ideographs: in no table
	}
	return r == utf8.RuneError ||
		unicode.In(r, unicode.Cf, unicode.Other_Default_Ignorable_Code_Point, unicode.Variation_Selector,
			unicode.Zl, unicode.Zp, unicode.Noncharacter_Code_Point)
}

// codePoint writes r as U+XXXX, never the character itself.
func codePoint(r rune) string { return fmt.Sprintf("U+%04X", r) }

// protectedNames are the names isProtectedRepoFile protects, and the 8.3
// short-name stems Windows gives them (".gitmodules" is GITMOD~1).
var protectedNames = []string{".git", ".gitmodules", ".gitattributes", ".envrc", ".env"}

var shortNameStems = map[string]string{
	"git": ".git", "gitmod": ".gitmodules", "gitatt": ".gitattributes", "envrc": ".envrc", "env": ".env",
}

// protectedName returns the protected name that the path component comp
// may be read as ("" when none): compared after NFKC normalisation and
// case folding (so ．ｇｉｔ, .GIT and .Git are .git, and the Kelvin sign is
// k), with what Windows file systems ignore removed (an NTFS stream suffix
// from the first colon, trailing dots and spaces), and 8.3 short names
// (GIT~1, GITMOD~1, GITATT~1, ENV~1, ENVRC~1) read as the long ones.
func protectedName(comp string) string {
	if comp == "" {
		return ""
	}
	// Every protected name and short name starts with ".", "g" or "e". A
	// first byte that is ASCII stays the first character under NFKC and
	// folding (or becomes a non-ASCII one with a combining mark after it),
	// so any other ASCII first byte rules the component out.
	if c := comp[0]; c < utf8.RuneSelf && c != '.' && c|0x20 != 'g' && c|0x20 != 'e' {
		return ""
	}
	for i := 0; i < len(comp); i++ {
		if comp[i] >= utf8.RuneSelf {
			comp = foldUnicode(comp)
			break
		}
	}
	if i := strings.IndexByte(comp, ':'); i >= 0 {
		comp = comp[:i]
	}
	comp = strings.TrimRight(comp, ". ")
	if len(comp) < 4 || len(comp) > len(".gitattributes") {
		return ""
	}
	for _, n := range protectedNames {
		if strings.EqualFold(comp, n) {
			return n
		}
	}
	if i := strings.IndexByte(comp, '~'); i > 0 && allDigits(comp[i+1:]) {
		return shortNameStems[strings.ToLower(comp[:i])]
	}
	return ""
}

// foldUnicode returns the NFKC form of s with every letter mapped through
// upper and then lower case (so that ı, İ, ſ and K fold like i, i, s and
// k), normalised again.
func foldUnicode(s string) string {
	s = norm.NFKC.String(s)
	s = strings.Map(func(r rune) rune { return unicode.ToLower(unicode.ToUpper(r)) }, s)
	return norm.NFKC.String(s)
}

// protectedSpelling returns the first component of raw that reads as a
// protected name without being spelled exactly as that name, and the name.
func protectedSpelling(raw string) (comp, name string) {
	for raw != "" {
		var c string
		if i := strings.IndexByte(raw, '/'); i >= 0 {
			c, raw = raw[:i], raw[i+1:]
		} else {
			c, raw = raw, ""
		}
		if n := protectedName(c); n != "" && c != n {
			return c, n
		}
	}
	return "", ""
}

// eachRawPath calls fn with each raw string value of a path-role argument
// (realpath canonicalisation), with the argument's name, until fn returns
// true; it stops after maxValuesPerCall values (prepare refuses more).
func (c *call) eachRawPath(fn func(arg, raw string) bool) {
	n := 0
	for i, a := range c.t.ann.Args {
		role := c.rr.first[i]
		if role == "" || c.rr.kind[i]&argRealpath == 0 {
			continue
		}
		switch x := c.arg(i).(type) {
		case string:
			if n++; n > maxValuesPerCall || fn(a.Name, x) {
				return
			}
		case []any:
			for j, e := range x {
				s, ok := e.(string)
				if !ok {
					continue
				}
				if n++; n > maxValuesPerCall || fn(fmt.Sprintf("%s[%d]", a.Name, j), s) {
					return
				}
			}
		}
	}
}

// checkSpelling refuses a path-role value whose characters or start another
// layer may read differently (spellingProblem). It runs before the values
// are canonicalised, so nothing is looked up on disk for them.
func (c *call) checkSpelling() (Evaluation, bool) {
	if !c.rr.anyPath {
		return Evaluation{}, false
	}
	var ev Evaluation
	done := false
	c.eachRawPath(func(arg, raw string) bool {
		if p := spellingProblem(raw); p != "" {
			ev, done = c.deny(RuleAmbiguousPath, fmt.Sprintf("argument %q %s", arg, p), "value "+echoFull(raw))
		}
		return done
	})
	return ev, done
}

// checkProtectedSpelling refuses a path-role value with a component that
// reads as .git, .gitmodules, .gitattributes, .envrc or .env without being
// spelled so (protectedSpelling), for reads as well as writes: a
// case-insensitive or normalising file system opens the protected file, a
// reviewer sees another name. It runs after the protected-path invariant,
// which denies writes of such names as protected paths. It also refuses a
// canonical value that is a protected path (Settings.ProtectedPaths and the
// policy files) only when compared case-insensitively and after NFKC
// (/ETC/ironcurtain on a case-insensitive mount is /etc/ironcurtain).
func (c *call) checkProtectedSpelling() (Evaluation, bool) {
	if !c.rr.anyPath {
		return Evaluation{}, false
	}
	var ev Evaluation
	done := false
	c.eachRawPath(func(arg, raw string) bool {
		if comp, name := protectedSpelling(raw); comp != "" {
			ev, done = c.deny(RuleAmbiguousPath, fmt.Sprintf("argument %q %s %s: %s", arg, spellProtected, name, echo(comp)),
				"value "+echoFull(raw))
		}
		return done
	})
	if done {
		return ev, done
	}
	sb := c.e.canon.sandbox
	for i := range c.vals {
		if c.rr.kind[i]&argPath == 0 {
			continue
		}
		for _, p := range c.vals[i].canon {
			for _, pp := range c.e.protect {
				if within(p, pp) || (sb != "" && within(sb, pp) && within(p, sb)) || !withinFolded(p, pp) {
					continue
				}
				return c.deny(RuleAmbiguousPath, fmt.Sprintf("argument %q %s", c.t.ann.Args[i].Name, spellProtectedPath),
					"protected path "+echoFull(pp)+" spelled "+echoFull(p))
			}
		}
	}
	return Evaluation{}, false
}

const spellProtectedPath = "names a protected path in another case or Unicode form, which a case-insensitive or normalising file system opens"

// withinFolded reports whether p is root or below it when each component
// is compared as a case-insensitive, normalising file system may: after
// NFKC and case folding, without trailing dots and spaces. Both are
// absolute.
func withinFolded(p, root string) bool {
	for root != "" {
		var rc, pc string
		rc, root = nextComponent(root)
		if rc == "" {
			continue
		}
		for pc == "" {
			if p == "" {
				return false
			}
			pc, p = nextComponent(p)
		}
		if !componentFoldEqual(pc, rc) {
			return false
		}
	}
	return true
}

func nextComponent(p string) (comp, rest string) {
	if i := strings.IndexByte(p, '/'); i >= 0 {
		return p[:i], p[i+1:]
	}
	return p, ""
}

func componentFoldEqual(a, b string) bool {
	if a == b {
		return true
	}
	if isASCII(a) && isASCII(b) {
		return strings.EqualFold(strings.TrimRight(a, ". "), strings.TrimRight(b, ". "))
	}
	return strings.TrimRight(foldUnicode(a), ". ") == strings.TrimRight(foldUnicode(b), ". ")
}

func isASCII(s string) bool {
	for i := 0; i < len(s); i++ {
		if s[i] >= utf8.RuneSelf {
			return false
		}
	}
	return true
}

// echoFull quotes a value (ASCII only) for an audit detail: at most
// maxDetailEcho bytes of it.
func echoFull(s string) string { return quoteCapped(s, maxDetailEcho) }

const maxDetailEcho = 512

// echo quotes s for a reason: ASCII only (anything else escaped), at most
// maxEcho bytes of s.
func echo(s string) string { return quoteCapped(s, maxEcho) }

func quoteCapped(s string, n int) string {
	if len(s) <= n {
		return strconv.QuoteToASCII(s)
	}
	for n > 0 && !utf8.RuneStart(s[n]) {
		n--
	}
	return strconv.QuoteToASCII(s[:n]) + "..."
}
