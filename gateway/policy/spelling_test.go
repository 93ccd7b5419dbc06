package policy

import (
	"context"
	"fmt"
	"strings"
	"testing"
	"unicode"
	"unicode/utf8"
)

func TestSpellingProblem(t *testing.T) {
	tests := []struct {
		name string
		raw  string
		want string // substring of the problem; "" means accepted
	}{
		{name: "plain relative", raw: "src/main.go"},
		{name: "plain absolute", raw: "/workspace/src/main.go"},
		{name: "empty", raw: ""},
		{name: "tilde alone", raw: "~"},
		{name: "tilde slash", raw: "~/Downloads/x"},
		{name: "tilde user", raw: "~root/.ssh/id_rsa", want: "another user's home"},
		{name: "tilde user alone", raw: "~root", want: "another user's home"},
		{name: "tilde plus", raw: "~+", want: "another user's home"},
		{name: "tilde in a name", raw: "a~b/~c"},
		{name: "file URL", raw: "file:///etc/passwd", want: `scheme ("file:")`},
		{name: "upper-case scheme", raw: "FILE:/etc/passwd", want: `("FILE:")`},
		{name: "scheme characters", raw: "x-y+z.w:q", want: `("x-y+z.w:")`},
		{name: "one-letter scheme is a drive", raw: "c:x", want: `("c:")`},
		{name: "colon name", raw: "notes:v2.txt", want: "scheme"},
		{name: "dot slash colon name", raw: "./notes:v2.txt"},
		{name: "colon in a later component", raw: "dir/notes:v2.txt"},
		{name: "absolute with colon", raw: "/a:b"},
		{name: "digit first is no scheme", raw: "1a:b"},
		{name: "empty scheme", raw: ":x"},
		{name: "long scheme is quoted in part", raw: strings.Repeat("a", 5000) + ":x", want: `"aaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaa"...)`},
		{name: "dash first is no scheme", raw: "-a:b"},
		{name: "network path", raw: "//host/share", want: `starts with "//"`},
		{name: "three slashes", raw: "///etc", want: `starts with "//"`},
		{name: "slash dot slash", raw: "/./etc"},
		{name: "backslash", raw: `dir\file`, want: "backslash"},
		{name: "backslash before a scheme colon", raw: `a\b:c`, want: "backslash"},
		{name: "trailing backslash", raw: `dir\`, want: "backslash"},
		{name: "invalid UTF-8", raw: "a\xffb", want: "not valid UTF-8"},
		{name: "truncated rune", raw: "a\xe2\x80", want: "not valid UTF-8"},
		{name: "zero width space", raw: "a\u200bb", want: "U+200B"},
		{name: "bidi override", raw: "a\u202eb", want: "U+202E"},
		{name: "isolate", raw: "a\u2066b", want: "U+2066"},
		{name: "BOM", raw: "\ufeff", want: "U+FEFF"},
		{name: "soft hyphen", raw: "a\u00adb", want: "U+00AD"},
		{name: "CGJ", raw: "a\u034fb", want: "U+034F"},
		{name: "MVS", raw: "a\u180eb", want: "U+180E"},
		{name: "variation selector", raw: "a\ufe00b", want: "U+FE00"},
		{name: "tag", raw: "a\U000E007Fb", want: "U+E007F"},
		{name: "hangul jungseong filler", raw: "a\u1160b", want: "U+1160"},
		{name: "khmer inherent vowel", raw: "a\u17b4b", want: "U+17B4"},
		{name: "arabic letter mark", raw: "a\u061cb", want: "U+061C"},
		{name: "noncharacter", raw: "a\ufdd0b", want: "U+FDD0"},
		{name: "paragraph separator", raw: "a\u2029b", want: "U+2029"},
		{name: "no-break space is a character", raw: "a\u00a0b"},
		{name: "accents", raw: "résumé/naïve.txt"},
		{name: "greek and CJK", raw: "λ/文書"},
		{name: "emoji without selector", raw: "\U0001F600.txt"},
		{name: "control characters are left to the canonicaliser", raw: "a\x00b\x1b\u0085"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			got := spellingProblem(tt.raw)
			if tt.want == "" {
				if got != "" {
					t.Fatalf("spellingProblem(%q) = %q, want accepted", tt.raw, got)
				}
				return
			}
			if !strings.Contains(got, tt.want) {
				t.Fatalf("spellingProblem(%q) = %q, want it to contain %q", tt.raw, got, tt.want)
			}
			for _, r := range got {
				if r >= utf8.RuneSelf || r < 0x20 {
					t.Fatalf("problem %q is not printable ASCII", got)
				}
			}
		})
	}
}

// TestInvisibleCoversDefaultIgnorable: every code point of the tables that
// make up Default_Ignorable_Code_Point (Cf, Other_Default_Ignorable_Code_Point,
// Variation_Selector) is refused, and the list from SECURITY-NOTES by name.
func TestInvisibleCoversDefaultIgnorable(t *testing.T) {
	for _, tab := range []*unicode.RangeTable{unicode.Cf, unicode.Other_Default_Ignorable_Code_Point, unicode.Variation_Selector} {
		for _, r16 := range tab.R16 {
			for r := rune(r16.Lo); r <= rune(r16.Hi); r += rune(r16.Stride) {
				if r >= 0xa0 && !invisible(r) {
					t.Errorf("U+%04X is not refused", r)
				}
			}
		}
		for _, r32 := range tab.R32 {
			for r := rune(r32.Lo); r <= rune(r32.Hi); r += rune(r32.Stride) {
				if !invisible(r) {
					t.Errorf("U+%04X is not refused", r)
				}
			}
		}
	}
	named := []rune{0x200b, 0x200c, 0x200d, 0x200e, 0x200f, 0x2060, 0x2061, 0x2062, 0x2063, 0x2064, 0xfeff, 0x00ad,
		0x034f, 0x180e, 0x180b, 0xfe0f, 0xe0001, 0xe0020, 0xe007f, 0x202a, 0x202b, 0x202c, 0x202d, 0x202e,
		0x2066, 0x2067, 0x2068, 0x2069, 0x115f, 0x3164, 0xffa0, 0x1d173, 0x1bca0, 0xe0100, 0xe01ef}
	for _, r := range named {
		if !invisible(r) {
			t.Errorf("U+%04X is not refused", r)
		}
		raw := "dir/a" + string(r) + "b"
		if p := spellingProblem(raw); !strings.Contains(p, fmt.Sprintf("U+%04X", r)) || strings.ContainsRune(p, r) {
			t.Errorf("spellingProblem(%q) = %q: want the code point named, not echoed", raw, p)
		}
	}
	for _, r := range []rune{'a', 'Z', '.', ' ', 0xe9, 0x4e2d, 0x1f600, 0xa0, 0x3000} {
		if invisible(r) {
			t.Errorf("U+%04X is refused", r)
		}
	}
}

func TestProtectedName(t *testing.T) {
	tests := []struct {
		comp, want string
	}{
		{comp: ".git", want: ".git"},
		{comp: ".GIT", want: ".git"},
		{comp: ".Git", want: ".git"},
		{comp: ".git.", want: ".git"},
		{comp: ".git. . ", want: ".git"},
		{comp: ".git ", want: ".git"},
		{comp: ".git\u00a0", want: ".git"},
		{comp: ".git\u3000", want: ".git"},
		{comp: "\uff0e\uff47\uff49\uff54", want: ".git"},
		{comp: "\uff0e\uff27\uff29\uff34", want: ".git"},
		{comp: ".g\u0131t", want: ".git"},
		{comp: ".G\u0130T", want: ".git"},
		{comp: "\u2024git", want: ".git"},
		{comp: "\ufe52git", want: ".git"},
		{comp: ".git::$INDEX_ALLOCATION", want: ".git"},
		{comp: ".git:stream", want: ".git"},
		{comp: ".git\uff1ax", want: ".git"},
		{comp: "GIT~1", want: ".git"},
		{comp: "git~12", want: ".git"},
		{comp: "\uff27\uff29\uff34~1", want: ".git"},
		{comp: "GITMOD~1", want: ".gitmodules"},
		{comp: "GITATT~1", want: ".gitattributes"},
		{comp: "ENV~1", want: ".env"},
		{comp: "ENVRC~1", want: ".envrc"},
		{comp: ".gitmodules", want: ".gitmodules"},
		{comp: ".GitAttributes", want: ".gitattributes"},
		{comp: ".ENVRC", want: ".envrc"},
		{comp: ".env", want: ".env"},
		{comp: "\uff0e\uff45\uff4e\uff56", want: ".env"},
		{comp: ".e\u207fv", want: ".env"}, // superscript n
		{comp: ".gitignore"},
		{comp: ".github"},
		{comp: "git"},
		{comp: "GIT~"},
		{comp: "GIT~1a"},
		{comp: ".env.local"},
		{comp: "env"},
		{comp: ".gi"},
		{comp: ""},
		{comp: "."},
		{comp: ".."},
		{comp: ".g\u0456t"}, // Cyrillic i: a confusable, not a normalisation
	}
	for _, tt := range tests {
		t.Run(fmt.Sprintf("%+q", tt.comp), func(t *testing.T) {
			if got := protectedName(tt.comp); got != tt.want {
				t.Fatalf("protectedName(%+q) = %q, want %q", tt.comp, got, tt.want)
			}
			if got := isProtectedRepoFile("/w/" + tt.comp + "/x"); got != (tt.want != "") {
				t.Fatalf("isProtectedRepoFile(%+q) = %v", tt.comp, got)
			}
		})
	}
	if got := foldUnicode("\u212a"); got != "k" {
		t.Errorf("the Kelvin sign folds to %q, want k", got)
	}
}

// TestAmbiguousSpellingsEvaluate runs every spelling through the engine for
// the path arguments of the filesystem and git tools: each is refused
// before policy with the argument named and the value never echoed raw.
func TestAmbiguousSpellingsEvaluate(t *testing.T) {
	tr := newTree(t)
	tr.apply(t, []op{{Write: "$SANDBOX/a.txt"}, {Write: "$SANDBOX/repo/.git/config"}})
	e := tr.engine(t, suite{})
	spellings := []struct {
		name, raw, reason string
	}{
		{name: "tilde user", raw: "~root/repo", reason: "another user's home"},
		{name: "file URL", raw: "file:///etc/passwd", reason: "scheme"},
		{name: "mixed-case scheme", raw: "File:repo", reason: "scheme"},
		{name: "network path", raw: "//srv/repo", reason: `"//"`},
		{name: "backslash", raw: `repo\.git\config`, reason: "backslash"},
		{name: "zero width space", raw: "re\u200bpo", reason: "U+200B"},
		{name: "zero width joiner after .git", raw: "repo/.git\u200d", reason: "U+200D"},
		{name: "bidi isolate", raw: "repo\u2067", reason: "U+2067"},
		{name: "tag", raw: "repo\U000E0067", reason: "U+E0067"},
		{name: "invalid UTF-8", raw: "repo\xc0", reason: "UTF-8"},
	}
	folded := []string{"repo/.GIT", "repo/\uff0e\uff47\uff49\uff54", "repo/.git.", "repo/GIT~1", "repo/.git::$DATA", ".ENV", "repo/.GitModules"}
	type target struct {
		tool string
		args func(v string) map[string]any
		arg  string
	}
	targets := []target{
		{tool: "filesystem__read_text_file", arg: "path", args: func(v string) map[string]any { return map[string]any{"path": v} }},
		{tool: "filesystem__list_directory", arg: "path", args: func(v string) map[string]any { return map[string]any{"path": v} }},
		{tool: "filesystem__get_file_info", arg: "path", args: func(v string) map[string]any { return map[string]any{"path": v} }},
		{tool: "filesystem__write_file", arg: "path", args: func(v string) map[string]any { return map[string]any{"path": v, "content": "x"} }},
		{tool: "filesystem__create_directory", arg: "path", args: func(v string) map[string]any { return map[string]any{"path": v} }},
		{tool: "filesystem__delete_file", arg: "path", args: func(v string) map[string]any { return map[string]any{"path": v} }},
		{tool: "filesystem__move_file", arg: "source", args: func(v string) map[string]any { return map[string]any{"source": v, "destination": "a2.txt"} }},
		{tool: "filesystem__move_file", arg: "destination", args: func(v string) map[string]any { return map[string]any{"source": "a.txt", "destination": v} }},
		{tool: "filesystem__read_multiple_files", arg: "paths[1]", args: func(v string) map[string]any { return map[string]any{"paths": []any{"a.txt", v}} }},
		{tool: "filesystem__edit_file", arg: "path", args: func(v string) map[string]any {
			return map[string]any{"path": v, "edits": []any{}, "dryRun": true}
		}},
		{tool: "git__status", arg: "path", args: func(v string) map[string]any { return map[string]any{"path": v} }},
		{tool: "git__commit", arg: "path", args: func(v string) map[string]any { return map[string]any{"path": v, "message": "m"} }},
		{tool: "git__reset", arg: "path", args: func(v string) map[string]any { return map[string]any{"path": v, "mode": "hard"} }},
		{tool: "git__fetch", arg: "path", args: func(v string) map[string]any { return map[string]any{"path": v} }},
		{tool: "git__clone", arg: "path", args: func(v string) map[string]any {
			return map[string]any{"url": "https://github.com/acme/app.git", "path": v}
		}},
	}
	eval := func(tg target, v string) Decision {
		server, tool, _ := strings.Cut(tg.tool, "__")
		return e.Evaluate(context.Background(), Request{Server: server, Tool: tool, Args: tg.args(v)}).Decision
	}
	for _, tg := range targets {
		for _, sp := range spellings {
			t.Run(tg.tool+"/"+tg.arg+"/"+sp.name, func(t *testing.T) {
				d := eval(tg, sp.raw)
				if d.Status != Deny || d.Rule != RuleAmbiguousPath {
					t.Fatalf("decision = %s (%s: %s), want deny by %s", d.Status, d.Rule, d.Reason, RuleAmbiguousPath)
				}
				if !strings.Contains(d.Reason, fmt.Sprintf("argument %q", tg.arg)) || !strings.Contains(d.Reason, sp.reason) {
					t.Fatalf("reason %q does not name argument %q and %q", d.Reason, tg.arg, sp.reason)
				}
				for _, s := range []string{d.Reason, d.Detail} {
					if strings.IndexFunc(s, func(r rune) bool { return r >= utf8.RuneSelf || r < 0x20 }) >= 0 || !utf8.ValidString(s) {
						t.Fatalf("reason or detail %q is not printable ASCII", s)
					}
				}
			})
		}
		for _, v := range folded {
			t.Run(tg.tool+"/"+tg.arg+"/folded "+v, func(t *testing.T) {
				d := eval(tg, v)
				if d.Status != Deny || (d.Rule != RuleAmbiguousPath && d.Rule != RuleProtectedPath) {
					t.Fatalf("decision = %s (%s: %s), want deny", d.Status, d.Rule, d.Reason)
				}
				if strings.IndexFunc(d.Reason, func(r rune) bool { return r >= utf8.RuneSelf }) >= 0 {
					t.Fatalf("reason %q is not ASCII", d.Reason)
				}
			})
		}
		t.Run(tg.tool+"/"+tg.arg+"/plain", func(t *testing.T) {
			if d := eval(tg, "repo/sub"); d.Rule == RuleAmbiguousPath {
				t.Fatalf("a plain path was refused: %s", d.Reason)
			}
		})
	}
}

func TestEchoBoundsAndEscapes(t *testing.T) {
	long := strings.Repeat("é", 100)
	if got := echo(long); len(got) > 4*maxEcho+8 || !strings.HasSuffix(got, "...") || strings.ContainsRune(got, 'é') {
		t.Fatalf("echo(long) = %q", got)
	}
	if got := echo("\u200b.git"); got != `"\u200b.git"` {
		t.Fatalf("echo = %s", got)
	}
	if got := echoFull(strings.Repeat("a", 10000)); len(got) > maxDetailEcho+8 {
		t.Fatalf("echoFull is %d bytes", len(got))
	}
}

func TestWithinFolded(t *testing.T) {
	tests := []struct {
		p, root string
		want    bool
	}{
		{p: "/etc/ironcurtain", root: "/etc/ironcurtain", want: true},
		{p: "/ETC/IronCurtain/policy.json", root: "/etc/ironcurtain", want: true},
		{p: "/etc/ironcurtain./x", root: "/etc/ironcurtain", want: true},
		{p: "/etc/\uff49roncurtain", root: "/etc/ironcurtain", want: true},
		{p: "/w/SECRET", root: "/w/secret", want: true},
		{p: "/w/secret2", root: "/w/secret"},
		{p: "/w", root: "/w/secret"},
		{p: "/x/secret", root: "/w/secret"},
		{p: "/etc/ironcurtainx", root: "/etc/ironcurtain"},
		{p: "/anything", root: "/", want: true},
	}
	for _, tt := range tests {
		t.Run(fmt.Sprintf("%+q in %q", tt.p, tt.root), func(t *testing.T) {
			if got := withinFolded(tt.p, tt.root); got != tt.want {
				t.Fatalf("withinFolded(%+q, %q) = %v, want %v", tt.p, tt.root, got, tt.want)
			}
		})
	}
}
