package fetch

import (
	"bytes"
	"fmt"
	"io"
	"net/url"
	"strings"
	"unicode/utf8"

	"golang.org/x/net/html/charset"
)

// render turns a fetched page into the tool's text: a short header, then the
// requested window of the converted content, with notes saying what was cut.
func render(p *page, r request) string {
	text := decode(p.body, p.contentType)
	if isHTML(p.contentType) && r.format != FormatHTML {
		base, _ := url.Parse(p.url.String())
		text = toMarkdown(strings.NewReader(text), base, r.format == FormatText, 0)
	}
	window, rest, ok := runeWindow(text, r.startIndex, r.maxLength)

	var b strings.Builder
	b.Grow(len(window) + 256)
	fmt.Fprintf(&b, "URL: %s\n", p.url.String())
	if p.first != p.url {
		fmt.Fprintf(&b, "Redirected from: %s\n", p.first.String())
	}
	fmt.Fprintf(&b, "Status: %s\n", p.status)
	if p.contentType != "" {
		fmt.Fprintf(&b, "Content-Type: %s\n", cutUTF8(p.contentType, 200))
	}
	b.WriteString("\n")
	if !ok {
		fmt.Fprintf(&b, "[start_index %d is past the end of the content (%d characters)]", r.startIndex, utf8.RuneCountInString(text))
		return b.String()
	}
	b.WriteString(window)
	if rest > 0 {
		fmt.Fprintf(&b, "\n\n[content cut: %d more characters; call again with start_index=%d to continue]", rest, r.startIndex+utf8.RuneCountInString(window))
	}
	if p.cut {
		fmt.Fprintf(&b, "\n\n[the response was longer than the gateway's limit of %d bytes; the rest was not read]", len(p.body))
	}
	return b.String()
}

// decode converts a body to valid UTF-8 using the charset of the
// Content-Type (or the page's own declaration), dropping NUL bytes.
func decode(body []byte, contentType string) string {
	var s string
	if r, err := charset.NewReader(bytes.NewReader(body), contentType); err == nil {
		if b, err := io.ReadAll(r); err == nil {
			s = string(b)
		}
	}
	if s == "" {
		s = string(body)
	}
	s = strings.ToValidUTF8(s, "\uFFFD")
	return strings.ReplaceAll(s, "\x00", "")
}

// runeWindow returns at most n characters of s starting at character start,
// and how many characters follow the window. ok is false when start is past
// the end (start 0 of an empty text is fine).
func runeWindow(s string, start, n int) (window string, rest int, ok bool) {
	i := 0
	for c := 0; c < start; c++ {
		if i >= len(s) {
			return "", 0, false
		}
		_, size := utf8.DecodeRuneInString(s[i:])
		i += size
	}
	if i > len(s) || (start > 0 && i == len(s)) {
		return "", 0, false
	}
	j := i
	for c := 0; c < n && j < len(s); c++ {
		_, size := utf8.DecodeRuneInString(s[j:])
		j += size
	}
	return s[i:j], utf8.RuneCountInString(s[j:]), true
}
