package gitexec

import (
	"errors"
	"strings"
	"testing"
)

// kv is a compact way to write expected local entries: "key=value", or
// "key" alone for a key written without '='.
func kv(pairs ...string) []Entry {
	out := make([]Entry, 0, len(pairs))
	for _, p := range pairs {
		k, v, ok := strings.Cut(p, "=")
		out = append(out, Entry{Scope: "local", Key: k, Value: v, NoValue: !ok})
	}
	return out
}

func TestParseConfigFile(t *testing.T) {
	tests := []struct {
		name   string
		in     string
		want   []Entry
		unsure string // substring of the ErrUnsure reason; "" when sure
	}{
		{name: "empty", in: "", want: kv()},
		{name: "comments and blank lines", in: "# c\n; c\n\n  \t\n[core] # c\n\tbare = false ; c\n", want: kv("core.bare=false")},
		{name: "case of section and key, not subsection", in: "[Remote \"Origin\"]\n\tURL = x\n", want: kv("remote.Origin.url=x")},
		{name: "deprecated dotted form is lower-cased", in: "[Remote.Origin]\nurl = x\n", want: kv("remote.origin.url=x")},
		{name: "deprecated form with several dots", in: "[a.B.c]\nk = 1\n", want: kv("a.b.c.k=1")},
		{name: "subsection escapes", in: "[remote \"a\\\"b\\\\c\"]\nurl = x\n", want: kv("remote.a\"b\\c.url=x")},
		{name: "subsection with spaces and dots", in: "[url  \t\"https://x.example/a b\"]\ninsteadOf = y\n", want: kv("url.https://x.example/a b.insteadof=y")},
		{name: "empty subsection", in: "[foo \"\"]\nk = v\n", want: kv("foo..k=v")},
		{name: "entry on the header line", in: "[core] bare = true\n[a]b=c\n", want: kv("core.bare=true", "a.b=c")},
		{name: "two headers on a line", in: "[a][b]k\n", want: kv("b.k")},
		{name: "bare boolean key", in: "[core]\n\tbare\n\tx-y2\n", want: kv("core.bare", "core.x-y2")},
		{name: "key at end of file without newline", in: "[core]\nbare", want: kv("core.bare")},
		{name: "value at end of file without newline", in: "[core]\nbare = yes", want: kv("core.bare=yes")},
		{name: "spaces around =", in: "[a]\n k \t =  \t v  \n", want: kv("a.k=v")},
		{name: "internal whitespace becomes spaces", in: "[a]\nk = x \t y\n", want: kv("a.k=x   y")},
		{name: "quotes", in: "[a]\nk = \"  x # ; y  \"\nl = a\"b c\"d\n", want: kv("a.k=  x # ; y  ", "a.l=ab cd")},
		{name: "escapes", in: "[a]\nk = \\t\\n\\b\\\\\\\"\n", want: kv("a.k=\t\n\b\\\"")},
		{name: "continuation", in: "[a]\nk = one \\\n  two\nl = \"x\\\ny\"\n", want: kv("a.k=one   two", "a.l=xy")},
		{name: "empty values", in: "[a]\nk =\nl = \"\"\nm = \"\" x\n", want: kv("a.k=", "a.l=", "a.m=x")},
		{name: "comment right after =", in: "[a]\nk =# c\n", want: kv("a.k=")},
		{name: "byte order mark", in: "\xEF\xBB\xBF[a]\nk = v\n", want: kv("a.k=v")},
		{name: "CRLF", in: "[a]\r\nk = v\r\nl = \"x\\\r\ny\"\r\n", want: kv("a.k=v", "a.l=xy")},
		{name: "UTF-8 in values and subsections", in: "[remote \"é\"]\nurl = https://bücher.example/x\n", want: kv("remote.é.url=https://bücher.example/x")},
		{name: "tab inside quotes kept", in: "[a]\nk = \"x\ty\"\n", want: kv("a.k=x\ty")},

		{name: "unknown escape", in: "[a]\nk = \\x\n", unsure: "unknown escape"},
		{name: "NUL", in: "[a]\nk = a\x00b\n", unsure: "control character"},
		{name: "control character", in: "[a]\nk = a\x01b\n", unsure: "control character"},
		{name: "lone carriage return", in: "[a]\nk = a\rb\n", unsure: "carriage return"},
		{name: "partial byte order mark", in: "\xEF\xBB[a]\n", unsure: "byte order mark"},
		{name: "invalid UTF-8", in: "[a]\nk = \xff\n", unsure: "UTF-8"},
		{name: "include", in: "[include]\npath = /etc/x\n", unsure: "include"},
		{name: "include, odd case", in: "[InClUdE]\npath = /etc/x\n", unsure: "include"},
		{name: "includeIf", in: "[includeIf \"gitdir:/x/\"]\npath = /etc/x\n", unsure: "include"},
		{name: "deprecated include form", in: "[include.x]\npath = /etc/x\n", unsure: "include"},
		{name: "unterminated quote", in: "[a]\nk = \"x\n", unsure: "unterminated quoted value"},
		{name: "variable before section", in: "k = v\n", unsure: "before any section"},
		{name: "line starting with a digit", in: "[a]\n1k = v\n", unsure: "git rejects"},
		{name: "junk after a key", in: "[a]\nk : v\n", unsure: "after variable name"},
		{name: "unterminated header", in: "[a\n", unsure: "unterminated"},
		{name: "empty header", in: "[]\n", unsure: "empty section"},
		{name: "header without a quote", in: "[a b]\n", unsure: "quoted subsection"},
		{name: "text after subsection", in: "[a \"b\" ]\n", unsure: "between a subsection"},
		{name: "subsection with an unknown escape", in: "[a \"b\\n\"]\n", unsure: "escape"},
		{name: "subsection spanning lines", in: "[a \"b\nc\"]\n", unsure: "unterminated subsection"},
		{name: "dotted section before a subsection", in: "[a.b \"c\"]\n", unsure: "section name"},
		{name: "empty section before a subsection", in: "[ \"c\"]\n", unsure: "section name"},
		{name: "empty dotted component", in: "[a..b]\n", unsure: "empty component"},
		{name: "odd character in section", in: "[a_b]\n", unsure: "section name"},
		{name: "line too long", in: "[a]\nk = " + strings.Repeat("x", MaxNativeConfigLine) + "\n", unsure: "line longer"},
		{name: "file too large", in: strings.Repeat("#", MaxNativeConfigSize+1), unsure: "larger than"},
		{name: "too many entries", in: "[a]\n" + strings.Repeat("k\n", MaxNativeConfigEntries+1), unsure: "entries"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			got, err := ParseConfigFile([]byte(tt.in), "local")
			if tt.unsure != "" {
				if !errors.Is(err, ErrUnsure) || !strings.Contains(err.Error(), tt.unsure) {
					t.Fatalf("err = %v, want ErrUnsure mentioning %q (entries %+v)", err, tt.unsure, got)
				}
				return
			}
			if err != nil {
				t.Fatalf("err = %v", err)
			}
			if !sameEntries(got, tt.want) {
				t.Fatalf("entries\n got %+v\nwant %+v", got, tt.want)
			}
		})
	}
}

func sameEntries(a, b []Entry) bool {
	if len(a) != len(b) {
		return false
	}
	for i := range a {
		if a[i] != b[i] {
			return false
		}
	}
	return true
}

func TestSimpleRefspec(t *testing.T) {
	tests := []struct {
		in   string
		want bool
	}{
		{in: "+refs/heads/*:refs/remotes/origin/*", want: true},
		{in: "refs/heads/main:refs/heads/main", want: true},
		{in: "HEAD:refs/heads/x", want: true},
		{in: "main", want: true},
		{in: "refs/heads/release-1.0:refs/heads/r_1", want: true},
		{in: ":refs/heads/x"},
		{in: "refs/heads/x:"},
		{in: ":"},
		{in: "^refs/heads/x"},
		{in: "refs/heads/*"},
		{in: "refs/heads/*:refs/heads/x"},
		{in: "refs/heads/x*:refs/heads/*"},
		{in: "refs/heads/a..b"},
		{in: "refs/heads/x.lock"},
		{in: "refs/heads/.x"},
		{in: "refs/heads/x."},
		{in: "refs//x"},
		{in: "a:b:c"},
		{in: "@"},
		{in: "refs/heads/x y"},
		{in: "-x"},
	}
	for _, tt := range tests {
		t.Run(tt.in, func(t *testing.T) {
			if got := simpleRefspec(tt.in); got != tt.want {
				t.Fatalf("simpleRefspec(%q) = %v, want %v", tt.in, got, tt.want)
			}
		})
	}
}

func TestCheckPackedRefs(t *testing.T) {
	const id = "0123456789abcdef0123456789abcdef01234567"
	tests := []struct {
		name string
		in   string
		sure bool
	}{
		{name: "empty", in: "", sure: true},
		{name: "header and records", in: "# pack-refs with: peeled fully-peeled sorted \n" + id + " refs/heads/main\n" + id + " refs/tags/v1\n^" + id + "\n", sure: true},
		{name: "no header", in: id + " refs/heads/main\n", sure: true},
		{name: "no final newline", in: id + " refs/heads/main"},
		{name: "other header", in: "# something\n" + id + " refs/heads/main\n"},
		{name: "short record", in: "0123 refs/heads/main\n"},
		{name: "upper-case id", in: strings.ToUpper(id) + " refs/heads/main\n"},
		{name: "peeled line first", in: "^" + id + "\n"},
		{name: "two peeled lines", in: id + " refs/tags/v1\n^" + id + "\n^" + id + "\n"},
		{name: "space in refname", in: id + " refs/heads/a b\n"},
		{name: "garbage", in: "garbage\n"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			err := checkPackedRefs([]byte(tt.in))
			if tt.sure && err != nil || !tt.sure && !errors.Is(err, ErrUnsure) {
				t.Fatalf("err = %v, want sure=%v", err, tt.sure)
			}
		})
	}
}

// encodeConfig writes entries back as config text in one canonical form
// (every value quoted and escaped, every subsection quoted).
func encodeConfig(entries []Entry) []byte {
	var b strings.Builder
	for _, e := range entries {
		first, last := strings.IndexByte(e.Key, '.'), strings.LastIndexByte(e.Key, '.')
		b.WriteString("[" + e.Key[:first])
		if last > first {
			r := strings.NewReplacer(`\`, `\\`, `"`, `\"`)
			b.WriteString(` "` + r.Replace(e.Key[first+1:last]) + `"`)
		}
		b.WriteString("]\n\t" + e.Key[last+1:])
		if !e.NoValue {
			r := strings.NewReplacer(`\`, `\\`, `"`, `\"`, "\n", `\n`, "\t", `\t`, "\b", `\b`)
			b.WriteString(` = "` + r.Replace(e.Value) + `"`)
		}
		b.WriteString("\n")
	}
	return []byte(b.String())
}

// FuzzParseConfigFile checks the native parser's own properties on any
// input (the differential fuzzer, FuzzNativeConfig, compares it with git):
// it never panics, keys are well formed (lower-case section and variable
// name of git's key characters, no line feed), and whatever it is sure
// about survives a round trip through a canonical encoding.
func FuzzParseConfigFile(f *testing.F) {
	for _, s := range []string{
		"[core]\n\tbare = false\n", "[remote \"origin\"]\n\turl = \"x\" # c\n", "[a.B]\nk\n",
		"[a]\nk = x \\\n y\n", "\xEF\xBB\xBF[a]\r\nk = \\t\\n\\b\n", "[x \"a\\\"b\\\\\"]\n\tk=\"\"\n",
	} {
		f.Add([]byte(s))
	}
	f.Fuzz(func(t *testing.T, in []byte) {
		entries, err := ParseConfigFile(in, "local")
		if err != nil {
			if !errors.Is(err, ErrUnsure) {
				t.Fatalf("error without ErrUnsure: %v", err)
			}
			return
		}
		for _, e := range entries {
			first, last := strings.IndexByte(e.Key, '.'), strings.LastIndexByte(e.Key, '.')
			if first <= 0 || last == len(e.Key)-1 || strings.ContainsAny(e.Key, "\n\x00") || strings.Contains(e.Value, "\x00") {
				t.Fatalf("malformed entry %+v", e)
			}
			for _, part := range []string{e.Key[:first], e.Key[last+1:]} {
				for i := 0; i < len(part); i++ {
					if c := part[i]; !(c >= 'a' && c <= 'z' || c >= '0' && c <= '9' || c == '-') {
						t.Fatalf("key %q: section or name has %q", e.Key, c)
					}
				}
			}
			if e.NoValue && e.Value != "" {
				t.Fatalf("value on a key without '=': %+v", e)
			}
		}
		again, err := ParseConfigFile(encodeConfig(entries), "local")
		if err != nil || !sameEntries(entries, again) {
			t.Fatalf("round trip: %v\n got %+v\nwant %+v", err, again, entries)
		}
	})
}
