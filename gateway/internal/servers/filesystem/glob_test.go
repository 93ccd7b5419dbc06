package filesystem

import (
	"strings"
	"testing"
)

func TestGlobMatch(t *testing.T) {
	cases := []struct {
		pattern string
		path    string
		want    bool
	}{
		{pattern: "*.go", path: "main.go", want: true},
		{pattern: "*.go", path: "pkg/main.go", want: false},
		{pattern: "*.go", path: ".hidden.go", want: true},
		{pattern: "**/*.go", path: "main.go", want: true},
		{pattern: "**/*.go", path: "a/b/c/main.go", want: true},
		{pattern: "**/*.go", path: "a/b/c/main.gox", want: false},
		{pattern: "a/**/z", path: "a/z", want: true},
		{pattern: "a/**/z", path: "a/b/c/z", want: true},
		{pattern: "a/**/z", path: "b/a/z", want: false},
		{pattern: "**", path: "anything/at/all", want: true},
		{pattern: "?.txt", path: "a.txt", want: true},
		{pattern: "?.txt", path: "ab.txt", want: false},
		{pattern: "[ab].txt", path: "b.txt", want: true},
		{pattern: "[!ab].txt", path: "c.txt", want: false}, // path.Match negates with ^, "!" is literal
		{pattern: "[^ab].txt", path: "c.txt", want: true},
		{pattern: "*.{js,ts}", path: "x.ts", want: true},
		{pattern: "*.{js,ts}", path: "x.rs", want: false},
		{pattern: "{src,lib}/**/*.{js,ts}", path: "lib/a/x.js", want: true},
		{pattern: "{a}", path: "{a}", want: true}, // no comma: literal
		{pattern: `\*.txt`, path: "*.txt", want: true},
		{pattern: `\*.txt`, path: "a.txt", want: false},
		{pattern: "/a/", path: "a", want: true},
		{pattern: "a**b", path: "axxb", want: true},
		{pattern: "a**b", path: "ax/xb", want: false},
	}
	for _, tc := range cases {
		t.Run(tc.pattern+" "+tc.path, func(t *testing.T) {
			g, err := compileGlob(tc.pattern)
			if err != nil {
				t.Fatal(err)
			}
			if got := g.match(tc.path); got != tc.want {
				t.Fatalf("match = %v, want %v", got, tc.want)
			}
		})
	}
}

func TestGlobExclude(t *testing.T) {
	cases := []struct {
		pattern string
		path    string
		want    bool
	}{
		{pattern: "node_modules", path: "node_modules", want: true},
		{pattern: "node_modules", path: "a/node_modules", want: true},
		{pattern: "node_modules", path: "a/node_modules/x/y.js", want: true},
		{pattern: "node_modules", path: "a/node_modules2", want: false},
		{pattern: "a/b", path: "x/a/b/c", want: true},
		{pattern: "*.log", path: "x.log", want: true},
		{pattern: "*.log", path: "d/x.log", want: false}, // a wildcard pattern is matched as is
		{pattern: "**/*.log", path: "d/x.log", want: true},
	}
	for _, tc := range cases {
		t.Run(tc.pattern+" "+tc.path, func(t *testing.T) {
			g, err := compileGlob(tc.pattern)
			if err != nil {
				t.Fatal(err)
			}
			if got := g.matchExclude(tc.path); got != tc.want {
				t.Fatalf("matchExclude = %v, want %v", got, tc.want)
			}
		})
	}
}

func TestGlobRefusals(t *testing.T) {
	for _, tc := range []struct {
		name    string
		pattern string
	}{
		{name: "empty", pattern: ""},
		{name: "unclosed class", pattern: "[a"},
		{name: "too long", pattern: strings.Repeat("a", maxPatternLen+1)},
		{name: "NUL", pattern: "a\x00b"},
		{name: "newline", pattern: "a\nb"},
		{name: "brace bomb", pattern: strings.Repeat("{a,b}", 7)},
	} {
		t.Run(tc.name, func(t *testing.T) {
			if _, err := compileGlob(tc.pattern); err == nil {
				t.Fatal("accepted")
			}
		})
	}
}

func FuzzGlob(f *testing.F) {
	for _, s := range []string{"*.go", "**/*.go", "{a,b}/**", `\{x,y}`, "[a-z]*", "a/**/**/**/b"} {
		f.Add(s, "a/b/c.go")
	}
	f.Fuzz(func(t *testing.T, pattern, p string) {
		g, err := compileGlob(pattern)
		if err != nil {
			return
		}
		got := g.match(p)
		g.matchExclude(p)
		// Without any special character a pattern is a literal path.
		if !strings.ContainsAny(pattern, `*?[]{}\`) {
			want := strings.Trim(pattern, "/") == p
			if got != want {
				t.Fatalf("literal %q vs %q: match = %v", pattern, p, got)
			}
		}
	})
}

func BenchmarkGlobMatch(b *testing.B) {
	g, err := compileGlob("{src,lib}/**/*.{go,ts}")
	if err != nil {
		b.Fatal(err)
	}
	b.ReportAllocs()
	for b.Loop() {
		g.match("src/internal/servers/filesystem/glob_test.go")
	}
}
