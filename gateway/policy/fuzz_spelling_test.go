package policy

import (
	"context"
	"regexp"
	"strings"
	"testing"
	"unicode"
	"unicode/utf8"

	"golang.org/x/text/cases"
	"golang.org/x/text/unicode/norm"
)

// oracleFold is an independent reading of a component: full Unicode case
// folding (x/text/cases) around NFKC, the NTFS stream suffix and trailing
// dots and spaces removed. The engine's key (protectedName) must refuse at
// least what this one reads as a protected name.
func oracleFold(comp string) string {
	k := norm.NFKC.String(cases.Fold().String(norm.NFKC.String(comp)))
	if i := strings.IndexByte(k, ':'); i >= 0 {
		k = k[:i]
	}
	return strings.TrimRight(k, ". ")
}

var oracleShortName = regexp.MustCompile(`^(git|gitmod|gitatt|env|envrc)~[0-9]+$`)

func oracleProtected(comp string) bool {
	switch k := oracleFold(comp); k {
	case ".git", ".gitmodules", ".gitattributes", ".env", ".envrc":
		return true
	default:
		return oracleShortName.MatchString(k)
	}
}

var oracleScheme = regexp.MustCompile(`^[A-Za-z][A-Za-z0-9+.-]*:`)

// oracleInvisible lists the ranges SECURITY-NOTES and the brief name, by
// hand, next to the Cf category.
func oracleInvisible(r rune) bool {
	switch {
	case r == 0x00ad, r == 0x034f, r == 0x061c, r == 0x180e, r == 0xfeff, r == 0x3164, r == 0xffa0, r == 0x115f, r == 0x1160:
	case r >= 0x200b && r <= 0x200f, r >= 0x202a && r <= 0x202e, r >= 0x2060 && r <= 0x206f:
	case r >= 0x180b && r <= 0x180f, r >= 0xfe00 && r <= 0xfe0f, r >= 0xe0000 && r <= 0xe0fff:
	case r >= 0xfff0 && r <= 0xfff8, r == 0x2028, r == 0x2029:
	default:
		return unicode.Is(unicode.Cf, r)
	}
	return true
}

// FuzzAmbiguousPath: whatever the agent spells, a call the engine allows
// has no component that folds to .git or another protected name unless it
// is a read of exactly that name, and no tilde-user, URL scheme, leading
// "//", backslash, invisible code point or invalid UTF-8; a refusal never
// echoes a character outside printable ASCII.
func FuzzAmbiguousPath(f *testing.F) {
	tr, e := fuzzTree(f)
	for _, s := range []string{".git/config", ".GIT/config", "\uff0e\uff47\uff49\uff54/config", ".git./config", ".git /x", "GIT~1/x",
		".git::$DATA", ".gi\u0307t", ".g\u0131t/x", ".G\u0130T", ".e\u207fv", "\u2024env", "ENV~1", ".Envrc", "dir/.gitmodules ",
		"~root/x", "~/x", "file:///etc/passwd", "notes:v2.txt", "./notes:v2.txt", "//x", "a\\b", "a\u200bb", "a\u202eb",
		"a\U000E0041", "a\xff", "$SANDBOX/.git\u200b/config", "$SANDBOX/a.txt", "dir/b.txt", "\ufb00", "\u212a"} {
		f.Add(s)
	}
	tools := []string{"read_text_file", "write_file", "list_directory", "create_directory"}
	f.Fuzz(func(t *testing.T, raw string) {
		raw = tr.expand(raw)
		for _, tool := range tools {
			args := map[string]any{"path": raw}
			if tool == "write_file" {
				args["content"] = "x"
			}
			ev := e.Evaluate(context.Background(), Request{Server: "filesystem", Tool: tool, Args: args})
			d := ev.Decision
			if d.Status == Deny {
				if strings.IndexFunc(d.Reason, func(r rune) bool { return r >= utf8.RuneSelf || r < 0x20 }) >= 0 || !utf8.ValidString(d.Reason) {
					t.Fatalf("%s(%q): reason %q is not printable ASCII", tool, raw, d.Reason)
				}
				continue
			}
			writes := tool == "write_file" || tool == "create_directory"
			for _, comp := range strings.Split(raw, "/") {
				if !oracleProtected(comp) {
					continue
				}
				literal := comp == ".git" || comp == ".gitmodules" || comp == ".gitattributes" || comp == ".env" || comp == ".envrc"
				if writes || !literal {
					t.Fatalf("%s(%q) allowed (%s) with component %+q that reads as a protected name", tool, raw, d.Rule, comp)
				}
			}
			if p, _ := ev.Transport["path"].(string); writes {
				for _, comp := range strings.Split(p, "/") {
					if oracleProtected(comp) {
						t.Fatalf("%s(%q) allowed (%s) writing %q", tool, raw, d.Rule, p)
					}
				}
			}
			switch {
			case !utf8.ValidString(raw):
				t.Fatalf("%s(%q) allowed invalid UTF-8", tool, raw)
			case len(raw) > 1 && raw[0] == '~' && raw[1] != '/':
				t.Fatalf("%s(%q) allowed a tilde-user path", tool, raw)
			case oracleScheme.MatchString(raw):
				t.Fatalf("%s(%q) allowed a URL scheme", tool, raw)
			case strings.HasPrefix(raw, "//"):
				t.Fatalf("%s(%q) allowed a network path", tool, raw)
			case strings.ContainsRune(raw, '\\'):
				t.Fatalf("%s(%q) allowed a backslash", tool, raw)
			case strings.IndexFunc(raw, oracleInvisible) >= 0:
				t.Fatalf("%s(%q) allowed an invisible code point", tool, raw)
			}
		}
	})
}
