package fetch

import (
	"bytes"
	"io"
	"net/url"
	"strings"
	"sync"
	"unicode/utf8"

	"github.com/JohannesKaufmann/html-to-markdown/v2/converter"
	"github.com/JohannesKaufmann/html-to-markdown/v2/plugin/base"
	"github.com/JohannesKaufmann/html-to-markdown/v2/plugin/commonmark"
	"github.com/JohannesKaufmann/html-to-markdown/v2/plugin/table"
	"golang.org/x/net/html"
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

// toMarkdown converts an HTML document to readable text: markdown when plain
// is false, bare text otherwise. Relative links resolve against base (may be
// nil). The output is cut at limit bytes (limit <= 0: no limit).
//
// The page goes through sanitize first (boilerplate and scripts dropped,
// links checked, nesting capped); html-to-markdown converts what is left.
func toMarkdown(r io.Reader, base *url.URL, plain bool, limit int) string {
	textLimit := 0
	if limit > 0 {
		// Enough text for limit bytes of output even after whitespace is
		// collapsed; the converter never reads more than that.
		textLimit = 4*limit + 64
	}
	clean, title := sanitize(r, base, plain, textLimit)
	body := convert(clean, plain)
	if limit > 0 && len(body) > limit {
		body = cutUTF8(body, limit)
	}
	if title != "" {
		return "Title: " + cutUTF8(title, maxTitle) + "\n\n" + body
	}
	return body
}

// convert runs html-to-markdown on sanitized HTML. The converter only fails
// on a misconfiguration (a missing plugin): then the page's text is shown.
func convert(clean string, plain bool) string {
	conv := markdownConverter()
	if plain {
		conv = plainConverter()
	}
	out, err := conv.ConvertString(clean)
	if err != nil {
		return strings.Join(strings.Fields(html.UnescapeString(clean)), " ")
	}
	if plain {
		// The base plugin writes every "<" and ">" of the text as an
		// entity, escape mode or not.
		out = strings.NewReplacer("&lt;", "<", "&gt;", ">").Replace(out)
	}
	return strings.TrimSpace(out)
}

// The converters are built once; html-to-markdown's Converter is safe for
// concurrent use.
var (
	markdownConverter = sync.OnceValue(func() *converter.Converter { return newConverter(false) })
	plainConverter    = sync.OnceValue(func() *converter.Converter { return newConverter(true) })
)

// newConverter is html-to-markdown with the gateway's style: "-" bullets,
// "_" emphasis, "**" strong, "```" fences, ATX headings, GitHub tables, and
// a link whose target the sanitiser removed rendered as its text. Its
// escaping stays on: "[" and "]" in a link's text cannot close the link
// early (nor in prose open one), "<" and ">" in text come out as &lt; and
// &gt; (never raw HTML). The plain converter writes no markers, escapes
// nothing and gives "<" and ">" back.
func newConverter(plain bool) *converter.Converter {
	opts := []func(*converter.Converter) error{converter.WithPlugins(
		base.NewBasePlugin(),
		commonmark.NewCommonmarkPlugin(
			commonmark.WithBulletListMarker("-"),
			commonmark.WithEmDelimiter("_"),
			commonmark.WithStrongDelimiter("**"),
			commonmark.WithCodeBlockFence("```"),
			commonmark.WithHorizontalRule("---"),
			commonmark.WithLinkEmptyHrefBehavior(commonmark.LinkBehaviorSkip),
		),
		table.NewTablePlugin(),
	)}
	if plain {
		opts = append(opts, converter.WithEscapeMode(converter.EscapeModeDisabled))
	}
	conv := converter.NewConverter(opts...)
	if plain {
		registerPlain(conv)
	}
	return conv
}

// registerPlain replaces the markers of the markdown renderers with the
// bare content.
func registerPlain(conv *converter.Converter) {
	children := func(ctx converter.Context, w converter.Writer, n *html.Node) converter.RenderStatus {
		ctx.RenderChildNodes(ctx, w, n)
		return converter.RenderSuccess
	}
	block := func(ctx converter.Context, w converter.Writer, n *html.Node) converter.RenderStatus {
		w.WriteString("\n\n")
		ctx.RenderChildNodes(ctx, w, n)
		w.WriteString("\n\n")
		return converter.RenderSuccess
	}
	for _, tag := range []string{"strong", "b", "em", "i", "code", "a"} {
		conv.Register.RendererFor(tag, converter.TagTypeInline, children, converter.PriorityEarly)
	}
	for _, tag := range []string{"h1", "h2", "h3", "h4", "h5", "h6", "blockquote"} {
		conv.Register.RendererFor(tag, converter.TagTypeBlock, block, converter.PriorityEarly)
	}
	conv.Register.RendererFor("pre", converter.TagTypeBlock, func(_ converter.Context, w converter.Writer, n *html.Node) converter.RenderStatus {
		var b bytes.Buffer
		textOf(&b, n)
		w.WriteString("\n\n" + b.String() + "\n\n")
		return converter.RenderSuccess
	}, converter.PriorityEarly)
	conv.Register.RendererFor("br", converter.TagTypeInline, func(_ converter.Context, w converter.Writer, _ *html.Node) converter.RenderStatus {
		w.WriteString("\n")
		return converter.RenderSuccess
	}, converter.PriorityEarly)
	conv.Register.TagType("hr", converter.TagTypeRemove, converter.PriorityEarly)
}

// textOf writes the text under n (the sanitiser capped its depth).
func textOf(b *bytes.Buffer, n *html.Node) {
	for c := n.FirstChild; c != nil; c = c.NextSibling {
		if c.Type == html.TextNode {
			b.WriteString(c.Data)
		}
		textOf(b, c)
	}
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
