package console

import (
	"bytes"
	"encoding/json"
	"fmt"
	"strings"
	"unicode"
	"unicode/utf8"
)

// Bounds of what one value shows. Every agent-written string goes through
// Text, which cuts it to a preview and a bounded "show all".
const (
	// PreviewBytes is what a value shows inline.
	PreviewBytes = 1 << 10
	// FullBytes is what its "show all" shows at most; the rest is counted,
	// never sent (the CLI and the ops API show a value whole).
	FullBytes = 64 << 10
)

// Seg is one piece of displayed text: plain text, or the visible name of a
// character that would otherwise change how the text around it reads
// (bidi overrides, zero-width and other invisible characters, controls,
// invalid UTF-8). Templates print both with html/template's escaping; a mark
// is styled so the operator sees it.
type Seg struct {
	Text string
	Mark bool
}

// Text is an agent-written value prepared for display: a preview and, when
// the value is longer, a bounded full form; Omitted counts the bytes of the
// value neither shows.
type Text struct {
	Preview []Seg
	Full    []Seg // nil when Preview is the whole value
	Bytes   int   // the value's length
	Omitted int   // bytes beyond FullBytes, not sent
}

// Cut reports whether the preview is not the whole value.
func (t Text) Cut() bool { return t.Full != nil }

// NewText prepares s for display with the default bounds.
func NewText(s string) Text { return newText(s, PreviewBytes, FullBytes) }

func newText(s string, preview, full int) Text {
	t := Text{Bytes: len(s)}
	var rest string
	t.Preview, rest = neutraliseBounded(s, preview)
	if rest == "" {
		return t
	}
	var left string
	t.Full, left = neutraliseBounded(s, full)
	t.Omitted = len(left)
	return t
}

// neutraliseBounded is Neutralise of the longest prefix of s whose rendered
// form (HTML-escaped text, marks with their markup) costs at most budget
// bytes; rest is what did not fit.
func neutraliseBounded(s string, budget int) (segs []Seg, rest string) {
	// The rendered form is never shorter than the text: neutralise at
	// most budget bytes, not the whole (possibly huge) value.
	all := Neutralise(cutUTF8(s, budget))
	cost := 0
	consumed := 0 // bytes of s covered by the segments kept
	for _, g := range all {
		src := len(g.Text) // bytes of s this segment stands for
		if g.Mark {
			src = markSource(g.Text)
			if cost+markCost > budget {
				return segs, s[consumed:]
			}
			cost += markCost
			segs = append(segs, g)
			consumed += src
			continue
		}
		n := 0
		for i := 0; i < len(g.Text); {
			_, size := utf8.DecodeRuneInString(g.Text[i:])
			c := escapedLen(g.Text[i : i+size])
			if cost+c > budget {
				if n > 0 {
					segs = append(segs, Seg{Text: g.Text[:n]})
				}
				return segs, s[consumed+n:]
			}
			cost += c
			n += size
			i += size
		}
		segs = append(segs, g)
		consumed += src
	}
	return segs, s[consumed:]
}

// markCost is what one mark costs on the page (its text and markup).
const markCost = 130

// markSource is the length in the original text of the character a mark
// stands for: ⟨0xNN⟩ is one invalid byte, ⟨U+XXXX⟩ one rune.
func markSource(mark string) int {
	if strings.HasPrefix(mark, "⟨0x") {
		return 1
	}
	var r rune
	_, _ = fmt.Sscanf(strings.TrimSuffix(strings.TrimPrefix(mark, "⟨U+"), "⟩"), "%X", &r)
	return utf8.RuneLen(r)
}

// escapedLen is the length of s once html/template escaped it.
func escapedLen(s string) int {
	switch s {
	case "<", ">":
		return 4
	case "&":
		return 5
	case "\"", "'", "+":
		return 5
	}
	return len(s)
}

// cutUTF8 returns the longest prefix of s of at most n bytes that does not
// split a UTF-8 sequence.
func cutUTF8(s string, n int) string {
	if len(s) <= n {
		return s
	}
	for n > 0 && !utf8.RuneStart(s[n]) {
		n--
	}
	return s[:n]
}

// Neutralise splits s into plain text and marks for the characters that
// could make the text read differently from what it is: Unicode format
// characters (bidi embeddings, overrides and isolates, zero-width joiners
// and spaces, the BOM, soft hyphen, tag characters), controls other than
// newline and tab, line and paragraph separators, and invalid UTF-8 bytes.
// Each is shown as its code point, e.g. ⟨U+202E⟩, and removed from the text.
func Neutralise(s string) []Seg {
	var out []Seg
	start := 0
	for i := 0; i < len(s); {
		r, size := utf8.DecodeRuneInString(s[i:])
		mark := ""
		switch {
		case r == utf8.RuneError && size == 1:
			mark = fmt.Sprintf("⟨0x%02X⟩", s[i])
		case r == '\n' || r == '\t':
		case unicode.Is(unicode.Cc, r), unicode.Is(unicode.Cf, r), unicode.Is(unicode.Zl, r), unicode.Is(unicode.Zp, r),
			unicode.Is(unicode.Co, r), r >= 0xFE00 && r <= 0xFE0F, r >= 0xE0100 && r <= 0xE01EF, r == 0x115F, r == 0x1160, r == 0x3164, r == 0xFFA0:
			mark = fmt.Sprintf("⟨U+%04X⟩", r)
		}
		if mark != "" {
			if start < i {
				out = append(out, Seg{Text: s[start:i]})
			}
			out = append(out, Seg{Text: mark, Mark: true})
			start = i + size
		}
		i += size
	}
	if start < len(s) {
		out = append(out, Seg{Text: s[start:]})
	}
	return out
}

// PrettyJSON indents a JSON value for display (two spaces, keys in their
// stored order, no HTML escaping: the template escapes). Text that is not
// JSON is shown as it is.
func PrettyJSON(raw []byte) string {
	if len(raw) == 0 {
		return ""
	}
	var buf bytes.Buffer
	if err := json.Indent(&buf, raw, "", "  "); err != nil {
		return string(raw)
	}
	return unescapeHTMLSafe(buf.String())
}

// unescapeHTMLSafe turns the escapes Go's JSON encoder writes for HTML
// safety (\u003c, \u003e, \u0026) and for JavaScript (\u2028, \u2029)
// back into their characters, so the operator reads "<" where the value has
// "<" (the template escapes it; Neutralise marks the separators). Other
// escapes stay as they are.
func unescapeHTMLSafe(s string) string {
	if !strings.Contains(s, `\u`) {
		return s
	}
	var b strings.Builder
	b.Grow(len(s))
	for i := 0; i < len(s); i++ {
		if s[i] != '\\' || i+1 >= len(s) {
			b.WriteByte(s[i])
			continue
		}
		if s[i+1] == 'u' && i+6 <= len(s) {
			switch strings.ToLower(s[i+2 : i+6]) {
			case "003c":
				b.WriteByte('<')
				i += 5
				continue
			case "003e":
				b.WriteByte('>')
				i += 5
				continue
			case "0026":
				b.WriteByte('&')
				i += 5
				continue
			case "2028":
				b.WriteString("\u2028")
				i += 5
				continue
			case "2029":
				b.WriteString("\u2029")
				i += 5
				continue
			}
		}
		b.WriteByte(s[i]) // an escape pair: copy both bytes
		b.WriteByte(s[i+1])
		i++
	}
	return b.String()
}

// oneLine shortens a value for a table cell: its first line, bounded.
func oneLine(s string, n int) string {
	if i := strings.IndexByte(s, '\n'); i >= 0 {
		s = s[:i] + " …"
	}
	if len(s) > n {
		s = cutUTF8(s, n) + "…"
	}
	return s
}
