package console

import (
	"strings"
	"testing"
	"unicode/utf8"
)

func TestNeutralise(t *testing.T) {
	for _, tc := range []struct {
		name, in, want string // want: marks in brackets
	}{
		{name: "plain", in: "hello /w/a.txt", want: "hello /w/a.txt"},
		{name: "newline and tab kept", in: "a\n\tb", want: "a\n\tb"},
		{name: "RTL override", in: "evil\u202Etxt.exe", want: "evil[⟨U+202E⟩]txt.exe"},
		{name: "isolates", in: "\u2066x\u2069", want: "[⟨U+2066⟩]x[⟨U+2069⟩]"},
		{name: "LRM RLM ALM", in: "\u200E\u200F\u061C", want: "[⟨U+200E⟩][⟨U+200F⟩][⟨U+061C⟩]"},
		{name: "zero width", in: "pay\u200Bpal\u200D\uFEFF", want: "pay[⟨U+200B⟩]pal[⟨U+200D⟩][⟨U+FEFF⟩]"},
		{name: "controls", in: "a\rb\x00c\x1b[31m", want: "a[⟨U+000D⟩]b[⟨U+0000⟩]c[⟨U+001B⟩][31m"},
		{name: "C1 control", in: "a\u0085b", want: "a[⟨U+0085⟩]b"},
		{name: "line separator", in: "a\u2028b", want: "a[⟨U+2028⟩]b"},
		{name: "tag characters", in: "a\U000E0041b", want: "a[⟨U+E0041⟩]b"},
		{name: "variation selector", in: "a\uFE0Fb", want: "a[⟨U+FE0F⟩]b"},
		{name: "hangul filler", in: "a\u3164b", want: "a[⟨U+3164⟩]b"},
		{name: "invalid UTF-8", in: "a\xffb", want: "a[⟨0xFF⟩]b"},
		{name: "Hebrew letters stay (isolated by CSS)", in: "שלום", want: "שלום"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			if got := render(Neutralise(tc.in)); got != tc.want {
				t.Fatalf("got %q, want %q", got, tc.want)
			}
		})
	}
}

func render(segs []Seg) string {
	var b strings.Builder
	for _, s := range segs {
		if s.Mark {
			b.WriteString("[" + s.Text + "]")
		} else {
			b.WriteString(s.Text)
		}
	}
	return b.String()
}

func TestTextBounds(t *testing.T) {
	small := NewText("short")
	if small.Cut() || render(small.Preview) != "short" {
		t.Fatalf("%+v", small)
	}
	big := strings.Repeat("<", 1<<20)
	tx := NewText(big)
	if !tx.Cut() {
		t.Fatal("1 MB value not cut")
	}
	// "<" renders as "&lt;": the preview holds a quarter of its budget.
	if n := len(render(tx.Preview)); n != PreviewBytes/4 {
		t.Fatalf("preview %d bytes", n)
	}
	if n := len(render(tx.Full)); n != FullBytes/4 {
		t.Fatalf("full %d bytes", n)
	}
	if tx.Omitted != len(big)-FullBytes/4 {
		t.Fatalf("omitted %d", tx.Omitted)
	}
	marks := NewText(strings.Repeat("\u202E", 100000))
	if n := len(marks.Full); n*markCost > FullBytes || marks.Omitted != (100000-n)*3 {
		t.Fatalf("%d marks, omitted %d", n, marks.Omitted)
	}
}

func FuzzNeutralise(f *testing.F) {
	for _, s := range append(hostile, "a\xffb", "\u202E\u2066x", "") {
		f.Add(s)
	}
	f.Fuzz(func(t *testing.T, s string) {
		segs := Neutralise(s)
		var plain strings.Builder
		for _, g := range segs {
			if !g.Mark {
				plain.WriteString(g.Text)
			}
		}
		out := plain.String()
		if !utf8.ValidString(out) {
			t.Fatalf("plain text of %q is not valid UTF-8", s)
		}
		for _, r := range out {
			if r != '\n' && r != '\t' && (r < 0x20 || r >= 0x7f && r < 0xa0 || r >= 0x200b && r <= 0x200f || r >= 0x202a && r <= 0x202e || r >= 0x2066 && r <= 0x2069 || r == 0xfeff) {
				t.Fatalf("%q passes through as text in %q", r, s)
			}
		}
		tx := newText(s, 64, 256)
		if tx.Cut() && tx.Omitted < 0 {
			t.Fatalf("omitted %d", tx.Omitted)
		}
	})
}

func TestPrettyJSON(t *testing.T) {
	for _, tc := range []struct{ in, want string }{
		{in: `{"a":1}`, want: "{\n  \"a\": 1\n}"},
		{in: `{"p":"\u003cimg\u003e \u0026 x"}`, want: "{\n  \"p\": \"<img> & x\"\n}"},
		{in: `{"p":"\\u003c stays"}`, want: "{\n  \"p\": \"\\\\u003c stays\"\n}"},
		{in: `{"p":"a\u2028b"}`, want: "{\n  \"p\": \"a\u2028b\"\n}"},
		{in: `{"p":"\u0041"}`, want: "{\n  \"p\": \"\\u0041\"\n}"},
		{in: `not json <b>`, want: `not json <b>`},
	} {
		if got := PrettyJSON([]byte(tc.in)); got != tc.want {
			t.Errorf("PrettyJSON(%s) = %q, want %q", tc.in, got, tc.want)
		}
	}
}
