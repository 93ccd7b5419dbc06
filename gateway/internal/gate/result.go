package gate

import (
	"fmt"

	"ironcurtain.dev/gateway/internal/servers"
)

// resultSize is the number of bytes of text and data in r.
func resultSize(r servers.Result) int {
	n := 0
	for _, c := range r.Content {
		n += len(c.Text) + len(c.Data)
	}
	return n
}

// capResult cuts r to at most max bytes of text and data. Text is cut on a
// character boundary, items that do not fit are dropped, and a final note
// says what was cut. It returns the result, the original size and whether
// anything was cut; r itself is not modified.
func capResult(r servers.Result, max int) (servers.Result, int, bool) {
	size := resultSize(r)
	if size <= max {
		return r, size, false
	}
	out := servers.Result{IsError: r.IsError, Content: make([]servers.Content, 0, len(r.Content)+1)}
	budget := max
	dropped := 0
	for _, c := range r.Content {
		n := len(c.Text) + len(c.Data)
		switch {
		case n <= budget:
			out.Content = append(out.Content, c)
			budget -= n
		case c.Type == "text" && budget > 0:
			c.Text = cutBytes(c.Text, budget)
			out.Content = append(out.Content, c)
			budget = 0
		default:
			dropped++
		}
	}
	note := fmt.Sprintf("[result cut by the gateway: %d bytes, the limit is %d", size, max)
	if dropped > 0 {
		note += fmt.Sprintf("; %d item(s) left out", dropped)
	}
	note += "]"
	out.Content = append(out.Content, servers.Content{Type: "text", Text: note})
	return out, size, true
}

// cutBytes returns the longest prefix of s of at most n bytes that ends on a
// character boundary.
func cutBytes(s string, n int) string {
	if len(s) <= n {
		return s
	}
	for n > 0 && (s[n]&0xC0) == 0x80 {
		n--
	}
	return s[:n]
}
