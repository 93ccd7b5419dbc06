package fetch

import (
	"io"
	"net/url"
	"strings"

	"golang.org/x/net/html"
	"golang.org/x/net/html/atom"
)

// skipped elements carry no readable content (scripts, styles, embedded
// documents) or page boilerplate (navigation, footers, sidebars).
var skipped = map[atom.Atom]bool{
	atom.Script: true, atom.Style: true, atom.Noscript: true, atom.Template: true,
	atom.Svg: true, atom.Math: true, atom.Iframe: true, atom.Object: true,
	atom.Canvas: true, atom.Nav: true, atom.Footer: true, atom.Aside: true,
	atom.Select: true, atom.Button: true,
}

// kept elements pass the sanitiser as they are (without attributes, except
// a link's href and an image's src and alt). Any other element is dropped
// and its content kept.
var kept = map[atom.Atom]bool{
	atom.P: true, atom.Div: true, atom.H1: true, atom.H2: true, atom.H3: true,
	atom.H4: true, atom.H5: true, atom.H6: true, atom.Ul: true, atom.Ol: true,
	atom.Li: true, atom.Blockquote: true, atom.Pre: true, atom.Code: true,
	atom.Strong: true, atom.B: true, atom.Em: true, atom.I: true, atom.A: true,
	atom.Img: true, atom.Br: true, atom.Hr: true, atom.Table: true,
	atom.Thead: true, atom.Tbody: true, atom.Tfoot: true, atom.Tr: true,
	atom.Td: true, atom.Th: true, atom.Dl: true, atom.Dt: true, atom.Dd: true,
}

// blocks are other block elements, passed on as a div so that their
// content stays a block of its own.
var blocks = map[atom.Atom]bool{
	atom.Section: true, atom.Article: true, atom.Main: true, atom.Header: true,
	atom.Figure: true, atom.Figcaption: true, atom.Form: true, atom.Fieldset: true,
	atom.Details: true, atom.Summary: true, atom.Address: true, atom.Caption: true,
	atom.Legend: true,
}

// voids have no end tag.
var voids = map[atom.Atom]bool{atom.Br: true, atom.Hr: true, atom.Img: true}

// maxDepth caps the nesting the sanitiser passes on: deeper start tags are
// dropped (their text kept). The HTML parser and the converter behind it
// work on a tree, recursively and with scans of the open elements; the cap
// keeps a page nested a million levels deep linear and off the stack, and
// the indentation of nested lists and quotes small.
const maxDepth = 32

// maxIndent caps the nesting of lists and of quotes (each counted on its
// own) that the sanitiser passes on: the converter prefixes every line of a
// quote with "> " per level and indents nested lists, so deeper levels
// would multiply the output and the converter's work.
const maxIndent = 8

// maxTitle caps the page title shown above the converted text.
const maxTitle = 300

// sanitizer reads HTML as tokens (linear work, no recursion) and writes a
// well-formed subset of it: skipped elements and their content removed,
// unknown elements unwrapped, nesting at most maxDepth, every link and
// image source resolved against base and kept only when it is http(s) or
// mailto. The converter only ever sees this output.
type sanitizer struct {
	out      strings.Builder
	base     *url.URL
	plain    bool
	open     []atom.Atom       // elements written and not yet closed
	dropped  map[atom.Atom]int // start tags dropped for depth, not yet ended
	skip     int               // depth inside skipped elements
	inTitle  bool
	title    strings.Builder
	textSeen int // bytes of text written
}

// sanitize returns the cleaned HTML of r and the page title. With
// textLimit > 0 it stops once that much text has been written. For plain
// text an image becomes its alt text.
func sanitize(r io.Reader, base *url.URL, plain bool, textLimit int) (clean, title string) {
	s := &sanitizer{base: base, plain: plain, dropped: map[atom.Atom]int{}}
	z := html.NewTokenizer(r)
	for textLimit <= 0 || s.textSeen < textLimit {
		tt := z.Next()
		if tt == html.ErrorToken {
			break
		}
		switch tt {
		case html.TextToken:
			s.text(z.Text())
		case html.StartTagToken, html.SelfClosingTagToken:
			name, hasAttr := z.TagName()
			a := atom.Lookup(name)
			var attrs map[string]string
			if hasAttr && (a == atom.A || a == atom.Img) {
				attrs = readAttrs(z)
			}
			s.start(a, attrs, tt == html.SelfClosingTagToken)
		case html.EndTagToken:
			name, _ := z.TagName()
			s.end(atom.Lookup(name))
		}
	}
	for i := len(s.open) - 1; i >= 0; i-- {
		s.out.WriteString("</" + s.open[i].String() + ">")
	}
	return s.out.String(), strings.Join(strings.Fields(s.title.String()), " ")
}

func readAttrs(z *html.Tokenizer) map[string]string {
	m := make(map[string]string, 2)
	for {
		k, v, more := z.TagAttr()
		switch string(k) {
		case "href", "src", "alt":
			m[string(k)] = string(v)
		}
		if !more {
			return m
		}
	}
}

func (s *sanitizer) text(b []byte) {
	if s.skip > 0 {
		return
	}
	if s.inTitle {
		if s.title.Len() < maxTitle {
			s.title.Write(b)
		}
		return
	}
	s.textSeen += len(b)
	s.out.WriteString(html.EscapeString(string(b)))
}

func (s *sanitizer) start(a atom.Atom, attrs map[string]string, selfClosing bool) {
	if skipped[a] {
		if !selfClosing && !voids[a] {
			s.skip++
		}
		return
	}
	if s.skip > 0 {
		return
	}
	if a == atom.Title {
		s.inTitle = !selfClosing
		return
	}
	if blocks[a] {
		a = atom.Div
	}
	if !kept[a] {
		return
	}
	if voids[a] {
		s.void(a, attrs)
		return
	}
	if selfClosing {
		return // <p/> and the like open nothing
	}
	if len(s.open) >= maxDepth || s.tooIndented(a) {
		s.dropped[a]++
		return
	}
	s.out.WriteString("<" + a.String())
	if a == atom.A {
		s.attr("href", s.resolve(attrs["href"]))
	}
	s.out.WriteByte('>')
	s.open = append(s.open, a)
}

// void writes <br>, <hr> or <img>; an image without alt text is dropped.
func (s *sanitizer) void(a atom.Atom, attrs map[string]string) {
	if a != atom.Img {
		s.out.WriteString("<" + a.String() + ">")
		return
	}
	alt := strings.Join(strings.Fields(attrs["alt"]), " ")
	if alt == "" {
		return
	}
	s.textSeen += len(alt)
	if s.plain {
		s.out.WriteString(html.EscapeString(alt))
		return
	}
	src := s.resolve(attrs["src"])
	if src == "" {
		s.out.WriteString(html.EscapeString("[image: " + alt + "]"))
		return
	}
	s.out.WriteString("<img")
	s.attr("src", src)
	s.attr("alt", alt)
	s.out.WriteByte('>')
}

// tooIndented reports whether opening a would nest more than maxIndent
// lists, or quotes.
func (s *sanitizer) tooIndented(a atom.Atom) bool {
	var kind func(atom.Atom) bool
	switch a {
	case atom.Ul, atom.Ol:
		kind = func(o atom.Atom) bool { return o == atom.Ul || o == atom.Ol }
	case atom.Blockquote:
		kind = func(o atom.Atom) bool { return o == atom.Blockquote }
	default:
		return false
	}
	n := 0
	for _, o := range s.open {
		if kind(o) {
			n++
		}
	}
	return n >= maxIndent
}

func (s *sanitizer) attr(k, v string) {
	if v != "" {
		s.out.WriteString(" " + k + `="` + html.EscapeString(v) + `"`)
	}
}

func (s *sanitizer) end(a atom.Atom) {
	if skipped[a] {
		if s.skip > 0 {
			s.skip--
		}
		return
	}
	if s.skip > 0 {
		return
	}
	if a == atom.Title {
		s.inTitle = false
		return
	}
	if blocks[a] {
		a = atom.Div
	}
	if !kept[a] || voids[a] {
		return
	}
	if s.dropped[a] > 0 {
		s.dropped[a]--
		return
	}
	for i := len(s.open) - 1; i >= 0; i-- {
		if s.open[i] != a {
			continue
		}
		for j := len(s.open) - 1; j >= i; j-- {
			s.out.WriteString("</" + s.open[j].String() + ">")
		}
		s.open = s.open[:i]
		return
	}
}

// resolve returns an absolute http(s) or mailto link, or "" for anything else
// (javascript:, data:, unparsable).
func (s *sanitizer) resolve(ref string) string {
	ref = strings.TrimSpace(ref)
	if ref == "" || strings.ContainsAny(ref, "\x00\r\n\t") {
		return ""
	}
	u, err := url.Parse(ref)
	if err != nil {
		return ""
	}
	if s.base != nil {
		u = s.base.ResolveReference(u)
	}
	switch u.Scheme {
	case "http", "https", "mailto":
	default:
		return ""
	}
	// Keep the markdown well formed: a ')' or space would end the target.
	return strings.NewReplacer(" ", "%20", "(", "%28", ")", "%29").Replace(u.String())
}
