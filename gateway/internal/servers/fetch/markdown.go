package fetch

import (
	"bytes"
	"io"
	"net/url"
	"strconv"
	"strings"
	"unicode/utf8"

	"golang.org/x/net/html"
	"golang.org/x/net/html/atom"
)

// Format is the output format of a fetched HTML page.
type Format string

const (
	// FormatMarkdown converts HTML to readable markdown (the default).
	FormatMarkdown Format = "markdown"
	// FormatText converts HTML to plain text without markdown markers.
	FormatText Format = "text"
	// FormatHTML returns the page source unchanged.
	FormatHTML Format = "html"
)

// skipped elements carry no readable content (scripts, styles, embedded
// documents) or page boilerplate (navigation, footers, sidebars).
var skipped = map[atom.Atom]bool{
	atom.Script: true, atom.Style: true, atom.Noscript: true, atom.Template: true,
	atom.Svg: true, atom.Math: true, atom.Iframe: true, atom.Object: true,
	atom.Canvas: true, atom.Nav: true, atom.Footer: true, atom.Aside: true,
	atom.Select: true, atom.Button: true,
}

// paragraphs are block elements separated from their neighbours by a blank line.
var paragraphs = map[atom.Atom]bool{
	atom.P: true, atom.Div: true, atom.Section: true, atom.Article: true,
	atom.Main: true, atom.Header: true, atom.Table: true, atom.Ul: true,
	atom.Ol: true, atom.Dl: true, atom.Figure: true, atom.Form: true,
	atom.Fieldset: true, atom.Details: true, atom.Address: true,
}

// lines are block elements that start on a new line.
var lines = map[atom.Atom]bool{
	atom.Tr: true, atom.Dt: true, atom.Dd: true, atom.Figcaption: true,
	atom.Summary: true, atom.Caption: true, atom.Legend: true,
}

// maxIndent caps the indentation of nested lists and quotes, so that a page
// nested thousands of levels deep cannot make the output quadratic.
const maxIndent = 8

// maxTitle caps the page title shown above the converted text.
const maxTitle = 300

type listState struct {
	ordered bool
	n       int
}

// converter turns a token stream into markdown. It works on the tokenizer,
// not on a parsed tree: the work is linear in the input and the nesting
// depth of the page costs no stack.
type converter struct {
	out   bytes.Buffer
	plain bool
	base  *url.URL
	limit int

	skip      int // depth inside skipped elements
	pre       int // depth inside <pre>
	quote     int // blockquote depth
	lists     []listState
	cell      int // cells written in the current table row
	nl        int // newlines owed before the next text
	lineStart bool

	linkStart int // offset in out where the open link's text starts, -1 if none
	linkHref  string

	inTitle bool
	title   strings.Builder
}

// toMarkdown converts an HTML document to readable text: markdown when plain
// is false, bare text otherwise. Relative links resolve against base (may be
// nil). The output is cut at limit bytes (limit <= 0: no limit).
func toMarkdown(r io.Reader, base *url.URL, plain bool, limit int) string {
	c := &converter{plain: plain, base: base, limit: limit, linkStart: -1, lineStart: true}
	z := html.NewTokenizer(r)
	for !c.full() {
		tt := z.Next()
		if tt == html.ErrorToken {
			break
		}
		switch tt {
		case html.TextToken:
			c.text(z.Text())
		case html.StartTagToken, html.SelfClosingTagToken:
			name, hasAttr := z.TagName()
			a := atom.Lookup(name)
			var attrs map[string]string
			if hasAttr && (a == atom.A || a == atom.Img) {
				attrs = readAttrs(z)
			}
			c.start(a, attrs, tt == html.SelfClosingTagToken)
		case html.EndTagToken:
			name, _ := z.TagName()
			c.end(atom.Lookup(name))
		}
	}
	return c.result()
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

func (c *converter) full() bool { return c.limit > 0 && c.out.Len() >= c.limit }

func (c *converter) result() string {
	body := strings.TrimSpace(c.out.String())
	if c.limit > 0 && len(body) > c.limit {
		body = cutUTF8(body, c.limit)
	}
	if t := strings.Join(strings.Fields(c.title.String()), " "); t != "" {
		return "Title: " + cutUTF8(t, maxTitle) + "\n\n" + body
	}
	return body
}

// block asks for n newlines before the next text (1: new line, 2: blank line).
func (c *converter) block(n int) {
	if c.out.Len() == 0 {
		return
	}
	if n > c.nl {
		c.nl = n
	}
}

// flush writes the owed newlines and the line prefix of the current context.
func (c *converter) flush() {
	if c.nl > 0 {
		for range c.nl {
			c.out.WriteByte('\n')
		}
		c.nl = 0
		c.lineStart = true
	}
	if c.lineStart {
		if !c.plain {
			for range min(c.quote, maxIndent) {
				c.out.WriteString("> ")
			}
		}
		c.lineStart = false
	}
}

// marker writes markdown syntax (not in plain mode).
func (c *converter) marker(s string) {
	if c.plain || c.skip > 0 {
		return
	}
	c.flush()
	c.out.WriteString(s)
}

func (c *converter) text(b []byte) {
	if c.skip > 0 {
		return
	}
	if c.inTitle {
		if c.title.Len() < maxTitle {
			c.title.Write(b)
		}
		return
	}
	if c.pre > 0 {
		c.flush()
		s := strings.ReplaceAll(string(b), "\r\n", "\n")
		c.out.WriteString(s)
		return
	}
	// Collapse whitespace; a space is kept only between words on a line.
	s := string(b)
	leading := len(s) > 0 && isSpace(s[0])
	trailing := len(s) > 0 && isSpace(s[len(s)-1])
	words := strings.Fields(s)
	if len(words) == 0 {
		if leading && c.nl == 0 && !c.lineStart && c.out.Len() > 0 && !endsWithSpace(c.out.Bytes()) {
			c.out.WriteByte(' ')
		}
		return
	}
	if leading && c.nl == 0 && !c.lineStart && c.out.Len() > 0 && !endsWithSpace(c.out.Bytes()) {
		c.out.WriteByte(' ')
	}
	c.flush()
	c.out.WriteString(strings.Join(words, " "))
	if trailing {
		c.out.WriteByte(' ')
	}
}

func isSpace(b byte) bool { return b == ' ' || b == '\t' || b == '\n' || b == '\r' || b == '\f' }

func endsWithSpace(b []byte) bool {
	return len(b) > 0 && (b[len(b)-1] == ' ' || b[len(b)-1] == '\n')
}

func (c *converter) start(a atom.Atom, attrs map[string]string, selfClosing bool) {
	if skipped[a] {
		if !selfClosing {
			c.skip++
		}
		return
	}
	if c.skip > 0 {
		return
	}
	switch {
	case a == atom.Title:
		c.inTitle = !selfClosing
	case a == atom.Ul || a == atom.Ol:
		if len(c.lists) > 0 {
			c.block(1) // a nested list continues its parent item
		} else {
			c.block(2)
		}
		c.lists = append(c.lists, listState{ordered: a == atom.Ol})
	case paragraphs[a]:
		c.block(2)
	case lines[a]:
		c.block(1)
		if a == atom.Tr {
			c.cell = 0
		}
	}
	switch a {
	case atom.H1, atom.H2, atom.H3, atom.H4, atom.H5, atom.H6:
		c.block(2)
		level := int(a.String()[1] - '0')
		c.marker(strings.Repeat("#", level) + " ")
	case atom.Br:
		c.trimTrailingSpace()
		c.out.WriteByte('\n')
		c.lineStart = true
	case atom.Hr:
		c.block(2)
		c.marker("---")
		c.block(2)
	case atom.Li:
		c.block(1)
		c.flush()
		depth := len(c.lists)
		if depth > 1 {
			c.out.WriteString(strings.Repeat("  ", min(depth-1, maxIndent)))
		}
		if depth > 0 && c.lists[depth-1].ordered {
			c.lists[depth-1].n++
			c.out.WriteString(strconv.Itoa(c.lists[depth-1].n) + ". ")
		} else {
			c.out.WriteString("- ")
		}
	case atom.Blockquote:
		c.block(2)
		c.quote++
	case atom.Pre:
		c.block(2)
		c.marker("```\n")
		c.pre++
	case atom.Code:
		if c.pre == 0 {
			c.marker("`")
		}
	case atom.Strong, atom.B:
		c.marker("**")
	case atom.Em, atom.I:
		c.marker("_")
	case atom.Td, atom.Th:
		if c.cell > 0 {
			c.flush()
			c.out.WriteString(" | ")
		}
		c.cell++
	case atom.A:
		if c.linkStart < 0 && !c.plain {
			if href := c.resolve(attrs["href"]); href != "" {
				c.flush()
				c.linkStart = c.out.Len()
				c.linkHref = href
			}
		}
	case atom.Img:
		alt := strings.Join(strings.Fields(attrs["alt"]), " ")
		if alt == "" {
			return
		}
		if c.plain {
			c.text([]byte(alt))
			return
		}
		c.flush()
		if src := c.resolve(attrs["src"]); src != "" {
			c.out.WriteString("![" + escapeLinkText(alt) + "](" + src + ")")
		} else {
			c.out.WriteString("[image: " + alt + "]")
		}
	}
}

func (c *converter) end(a atom.Atom) {
	if skipped[a] {
		if c.skip > 0 {
			c.skip--
		}
		return
	}
	if c.skip > 0 {
		return
	}
	switch a {
	case atom.Title:
		c.inTitle = false
	case atom.H1, atom.H2, atom.H3, atom.H4, atom.H5, atom.H6:
		c.block(2)
	case atom.Ul, atom.Ol:
		if n := len(c.lists); n > 0 {
			c.lists = c.lists[:n-1]
		}
		if len(c.lists) > 0 {
			c.block(1)
		} else {
			c.block(2)
		}
	case atom.Blockquote:
		if c.quote > 0 {
			c.quote--
		}
		c.block(2)
	case atom.Pre:
		if c.pre > 0 {
			c.pre--
			if !c.plain {
				if b := c.out.Bytes(); len(b) > 0 && b[len(b)-1] != '\n' {
					c.out.WriteByte('\n')
				}
				c.out.WriteString("```")
			}
		}
		c.block(2)
	case atom.Code:
		if c.pre == 0 {
			c.marker("`")
		}
	case atom.Strong, atom.B:
		c.marker("**")
	case atom.Em, atom.I:
		c.marker("_")
	case atom.A:
		c.closeLink()
	default:
		if paragraphs[a] {
			c.block(2)
		} else if lines[a] {
			c.block(1)
		}
	}
}

// closeLink rewrites the text written since the link opened as [text](href).
func (c *converter) closeLink() {
	if c.linkStart < 0 {
		return
	}
	start := c.linkStart
	c.linkStart = -1
	if start > c.out.Len() {
		return
	}
	label := strings.TrimSpace(string(c.out.Bytes()[start:]))
	c.out.Truncate(start)
	if label == "" {
		return
	}
	c.out.WriteString("[" + escapeLinkText(label) + "](" + c.linkHref + ")")
}

func (c *converter) trimTrailingSpace() {
	b := c.out.Bytes()
	n := len(b)
	for n > 0 && b[n-1] == ' ' {
		n--
	}
	c.out.Truncate(n)
}

// resolve returns an absolute http(s) or mailto link, or "" for anything else
// (javascript:, data:, unparsable).
func (c *converter) resolve(ref string) string {
	ref = strings.TrimSpace(ref)
	if ref == "" || strings.ContainsAny(ref, "\x00\r\n\t") {
		return ""
	}
	u, err := url.Parse(ref)
	if err != nil {
		return ""
	}
	if c.base != nil {
		u = c.base.ResolveReference(u)
	}
	switch u.Scheme {
	case "http", "https", "mailto":
	default:
		return ""
	}
	s := u.String()
	// Keep the markdown well formed: a ')' or space would end the target.
	s = strings.NewReplacer(" ", "%20", "(", "%28", ")", "%29").Replace(s)
	return s
}

func escapeLinkText(s string) string {
	return strings.NewReplacer("[", "\\[", "]", "\\]").Replace(s)
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
