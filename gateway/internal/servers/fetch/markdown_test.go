package fetch

import (
	"net/url"
	"strings"
	"testing"
	"unicode/utf8"
)

func TestToMarkdown(t *testing.T) {
	base, _ := url.Parse("https://docs.example.com/guide/intro.html")
	tests := []struct {
		name  string
		html  string
		plain bool
		want  string
	}{
		{name: "paragraphs", html: "<p>Hello\n  world</p><p>Second</p>", want: "Hello world\n\nSecond"},
		{name: "title and heading", html: "<html><head><title> My  Page </title><meta x=1></head><body><h2>Setup</h2><p>Run it.</p></body></html>", want: "Title: My Page\n\n## Setup\n\nRun it."},
		{name: "scripts and styles dropped", html: "<p>a</p><script>alert('x')</script><style>p{}</style><p>b</p>", want: "a\n\nb"},
		{name: "boilerplate dropped", html: "<nav><a href='/'>Home</a></nav><main><p>Body</p></main><footer>(c) 2026</footer>", want: "Body"},
		{name: "relative link resolved", html: `<p>See <a href="../api.html">the API</a>.</p>`, want: "See [the API](https://docs.example.com/api.html)."},
		{name: "javascript link kept as text", html: `<p><a href="javascript:alert(1)">click</a></p>`, want: "click"},
		{name: "link text with brackets escaped", html: `<a href="/x">a [b] c</a>`, want: `[a \[b\] c](https://docs.example.com/x)`},
		{name: "link target with parens encoded", html: `<a href="/wiki/Go_(language)">Go</a>`, want: "[Go](https://docs.example.com/wiki/Go_%28language%29)"},
		{name: "unordered list", html: "<ul><li>one</li><li>two <b>bold</b></li></ul>", want: "- one\n- two **bold**"},
		{name: "ordered nested list", html: "<ol><li>a<ul><li>b</li></ul></li><li>c</li></ol>", want: "1. a\n  - b\n2. c"},
		{name: "pre keeps whitespace", html: "<p>x</p><pre>  if a {\n    b()\n  }</pre><p>y</p>", want: "x\n\n```\n  if a {\n    b()\n  }\n```\n\ny"},
		{name: "inline code", html: "<p>call <code>Run()</code> now</p>", want: "call `Run()` now"},
		{name: "entities decoded", html: "<p>a &amp; b &lt;c&gt; &quot;d&quot; &#x263A;</p>", want: "a & b <c> \"d\" ☺"},
		{name: "table", html: "<table><tr><th>k</th><th>v</th></tr><tr><td>a</td><td>1</td></tr></table>", want: "k | v\na | 1"},
		{name: "blockquote", html: "<blockquote><p>quoted</p></blockquote><p>after</p>", want: "> quoted\n\nafter"},
		{name: "br", html: "<p>line1<br>line2</p>", want: "line1\nline2"},
		{name: "image with alt", html: `<img src="/logo.png" alt="Logo">`, want: "![Logo](https://docs.example.com/logo.png)"},
		{name: "image without alt dropped", html: `<p>x<img src="/t.gif">y</p>`, want: "xy"},
		{name: "plain mode has no markers", html: `<h1>T</h1><p><b>b</b> <a href="/x">link</a></p><ul><li>i</li></ul>`, plain: true, want: "T\n\nb link\n\n- i"},
		{name: "unclosed skipped element swallows rest", html: "<p>kept</p><aside>dropped <p>also", want: "kept"},
		{name: "stray end tags ignored", html: "</div></ul></a></pre><p>ok</p>", want: "ok"},
		{name: "empty", html: "", want: ""},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			got := toMarkdown(strings.NewReader(tt.html), base, tt.plain, 0)
			if got != tt.want {
				t.Errorf("toMarkdown(%q)\n got: %q\nwant: %q", tt.html, got, tt.want)
			}
		})
	}
}

func TestToMarkdownLimit(t *testing.T) {
	page := "<p>" + strings.Repeat("é word ", 10000) + "</p>"
	got := toMarkdown(strings.NewReader(page), nil, false, 1001)
	if len(got) > 1001 {
		t.Fatalf("len = %d, want <= 1001", len(got))
	}
	if !utf8.ValidString(got) {
		t.Fatal("cut output is not valid UTF-8")
	}
}

func TestToMarkdownDeepNesting(t *testing.T) {
	// A page nested a million levels deep costs no stack: the converter is
	// a flat loop over tokens.
	page := strings.Repeat("<div><blockquote><ul><li>", 250000) + "deep"
	got := toMarkdown(strings.NewReader(page), nil, false, 0)
	if !strings.HasSuffix(got, "deep") {
		t.Fatalf("tail = %q", got[max(0, len(got)-40):])
	}
}

func FuzzToMarkdown(f *testing.F) {
	for _, s := range []string{
		"<p>a</p>", "<a href='x'>y</a>", "<pre>z</pre>", "<ol><li>1<li>2</ol>",
		"<title>t</title><script>x</script>", "<a href=\"javascript:x\"><a href=/y>n</a></a>",
		"<table><td>a<td>b</table>", "\xff\xfe<p>bad utf8 \xc3</p>", "<img alt='[x]' src='(y)'>",
	} {
		f.Add(s, false)
		f.Add(s, true)
	}
	base, _ := url.Parse("https://example.com/a/b")
	f.Fuzz(func(t *testing.T, page string, plain bool) {
		const limit = 512
		got := toMarkdown(strings.NewReader(page), base, plain, limit)
		body := got
		if strings.HasPrefix(got, "Title: ") {
			_, body, _ = strings.Cut(got, "\n\n")
		}
		if len(body) > limit {
			t.Fatalf("body len %d > limit %d", len(body), limit)
		}
		if utf8.ValidString(page) && !utf8.ValidString(got) {
			t.Fatalf("valid input gave invalid UTF-8 output %q", got)
		}
		if strings.Contains(got, "](javascript:") || strings.Contains(got, "](data:") {
			t.Fatalf("dangerous link target in %q", got)
		}
	})
}

func BenchmarkToMarkdown(b *testing.B) {
	page := "<html><head><title>Bench</title></head><body>" +
		strings.Repeat(`<h2>Section</h2><p>Some <b>text</b> with <a href="/x">a link</a> and more words.</p><ul><li>one</li><li>two</li></ul>`, 200) +
		"</body></html>"
	b.SetBytes(int64(len(page)))
	b.ReportAllocs()
	for b.Loop() {
		_ = toMarkdown(strings.NewReader(page), nil, false, 0)
	}
}
