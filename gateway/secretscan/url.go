package secretscan

import (
	"encoding/base64"
	"math"
	"net/url"
	"sort"
	"strings"
)

// A Hit is a finding located for people: where in a structured value (a URL, a host name, a
// pull request's body) it is, and the masked excerpt an operator may see. It never holds the
// value.
type Hit struct {
	Kind    Kind
	Where   string // "query parameter q", "path", "host label 2", "body", ...; "(base64)" when decoded
	Excerpt string // Mask's output
}

// String is "<kind> in <where> (<excerpt>)", for reasons and escalations.
func (h Hit) String() string {
	return string(h.Kind) + " in " + h.Where + " (" + h.Excerpt + ")"
}

// maxDecodedScan bounds how much of one URL part is scanned again after decoding.
const maxDecodedScan = 64 << 10

// ScanText returns the secrets in text as hits located at where.
func (d *Detector) ScanText(where, text string) []Hit {
	if d == nil {
		return nil
	}
	var hits []Hit
	for _, f := range d.Scan(text) {
		hits = append(hits, Hit{Kind: f.Kind, Where: where, Excerpt: Mask(text, f)})
	}
	return hits
}

// ScanURL returns the secrets in a URL: its user information, host name, path, query
// parameters (names and values, percent-decoded, and base64-decoded when a value looks like
// base64) and fragment. A URL that does not parse is scanned as text.
func (d *Detector) ScanURL(raw string) []Hit { return d.scanURL(raw, true) }

// scanURL is ScanURL, with the urlClean prefilter when prefilter is set (tests compare both).
func (d *Detector) scanURL(raw string, prefilter bool) []Hit {
	if d == nil || prefilter && d.urlClean(raw) {
		return nil
	}
	u, err := url.Parse(raw)
	if err != nil {
		return dedupe(d.scanPart("url", raw))
	}
	var hits []Hit
	if u.User != nil {
		if p, ok := u.User.Password(); ok && p != "" && d.has(KindURLPassword) && (d.loose || plausiblePassword(p)) {
			hits = append(hits, Hit{Kind: KindURLPassword, Where: "user information", Excerpt: Mask(p, Finding{Kind: KindURLPassword, Start: 0, End: len(p)})})
		}
		hits = append(hits, d.scanPart("user name", u.User.Username())...)
	}
	hits = append(hits, d.ScanHost(u.Hostname())...)
	hits = append(hits, d.scanPart("path", u.Path)...)
	if u.RawPath != "" && u.RawPath != u.Path {
		hits = append(hits, d.scanPart("path", u.RawPath)...)
	}
	for _, seg := range strings.Split(u.Path, "/") {
		hits = append(hits, d.scanDecoded("path", seg)...)
	}
	if u.RawQuery != "" {
		q, qerr := url.ParseQuery(u.RawQuery)
		if qerr != nil {
			hits = append(hits, d.scanPart("query", u.RawQuery)...)
		}
		names := make([]string, 0, len(q))
		for k := range q {
			names = append(names, k)
		}
		sort.Strings(names)
		for _, k := range names {
			nameHits := d.scanPart("query parameter name", k)
			hits = append(hits, nameHits...)
			where := "query parameter " + quoteName(k)
			if len(nameHits) > 0 || len(d.Scan(k)) > 0 {
				where = "query parameter (whose name holds a secret)" // never spell it out
			}
			for _, v := range q[k] {
				hits = append(hits, d.scanPart(where, v)...)
				hits = append(hits, d.scanDecoded(where, v)...)
			}
		}
	}
	if u.Fragment != "" {
		hits = append(hits, d.scanPart("fragment", u.Fragment)...)
		hits = append(hits, d.scanDecoded("fragment", u.Fragment)...)
	}
	if u.Opaque != "" {
		hits = append(hits, d.scanPart("url", u.Opaque)...)
	}
	return dedupe(hits)
}

// ScanHost returns the secrets in a host name: the formats (a key spelled into labels) and,
// when high-entropy detection is on, labels that look like encoded data (DNS exfiltration).
//
// Give it the name as it arrived, before any mapping or lower-casing: a scan of the
// lower-cased name misses the formats that are case-sensitive. And since a host name is
// case-insensitive (whatever the agent wrote, the lower-cased name is what a resolver is
// asked), the name is scanned in upper case too, where a format written in upper case only
// (AWS key ids) is found however the agent spelled it, and the gateway's exact values are
// matched ignoring case.
func (d *Detector) ScanHost(host string) []Hit {
	if d == nil || host == "" {
		return nil
	}
	hits := d.ScanText("host name", host)
	if upper := strings.ToUpper(host); upper != host {
		hits = append(hits, d.ScanText("host name", upper)...)
	}
	hits = append(hits, d.exactFolded("host name", host)...)
	if d.entropy {
		for i, label := range strings.Split(host, ".") {
			if len(label) >= defaultLabelMinLength && entropy(label) >= defaultLabelEntropy {
				hits = append(hits, Hit{Kind: KindHighEntropy, Where: "host label " + itoa(i+1), Excerpt: maskPlain(label)})
			}
		}
	}
	return dedupe(hits)
}

// exactFolded finds the exact values in text ignoring case (for host names, where case
// carries nothing: the lower-cased name is what leaves).
func (d *Detector) exactFolded(where, text string) []Hit {
	if len(d.exact) == 0 {
		return nil
	}
	lower := strings.ToLower(text)
	var hits []Hit
	for _, s := range d.exact {
		if strings.Contains(lower, strings.ToLower(s.Value)) {
			hits = append(hits, Hit{Kind: KindExact, Where: where, Excerpt: Mask(lower, Finding{Kind: KindExact, Label: s.Label})})
		}
	}
	return hits
}

// scanPart scans one part of a URL, and for long opaque values, their entropy.
func (d *Detector) scanPart(where, s string) []Hit {
	if len(s) > maxDecodedScan {
		s = s[:maxDecodedScan]
	}
	hits := d.ScanText(where, s)
	if d.entropy {
		for _, tok := range base64Runs(s) {
			if opaque(tok) {
				hits = append(hits, Hit{Kind: KindHighEntropy, Where: where, Excerpt: maskPlain(tok)})
				break
			}
		}
	}
	return hits
}

// opaque reports whether a run of base64 characters looks like encoded data rather than
// words: long, high in entropy, and mixing upper case, lower case and digits (paths,
// slugs and identifiers rarely do; base64 of anything does). Hex is not flagged: commit
// ids and digests in URLs are hex.
func opaque(tok string) bool {
	if len(tok) < defaultEntropyMinLen {
		return false
	}
	var upper, lower, digit int
	for i := 0; i < len(tok); i++ {
		switch c := tok[i]; {
		case c >= 'A' && c <= 'Z':
			upper++
		case c >= 'a' && c <= 'z':
			lower++
		case c >= '0' && c <= '9':
			digit++
		}
	}
	return upper >= 2 && lower >= 2 && digit >= 2 && entropy(tok) >= defaultEntropyBits
}

// scanDecoded scans the base64 decodings of the base64-looking runs in s.
func (d *Detector) scanDecoded(where, s string) []Hit {
	var hits []Hit
	for _, run := range base64Runs(s) {
		dec, ok := decodeBase64(run)
		if !ok {
			continue
		}
		for _, h := range d.ScanText(where+" (base64)", dec) {
			hits = append(hits, h)
		}
	}
	return hits
}

// base64Runs returns the runs of base64 characters at least 16 long in s (at most 8).
func base64Runs(s string) []string {
	var runs []string
	start := -1
	for i := 0; i <= len(s); i++ {
		inRun := i < len(s) && isBase64Byte(s[i])
		if inRun && start < 0 {
			start = i
		}
		if !inRun && start >= 0 {
			if i-start >= 16 {
				runs = append(runs, s[start:i])
				if len(runs) == 8 {
					return runs
				}
			}
			start = -1
		}
	}
	return runs
}

func isBase64Byte(c byte) bool {
	return c >= 'A' && c <= 'Z' || c >= 'a' && c <= 'z' || c >= '0' && c <= '9' ||
		c == '+' || c == '/' || c == '-' || c == '_' || c == '='
}

// decodeBase64 decodes s in any of the four base64 alphabets/paddings, when the result is
// mostly printable text (a secret's spelling).
func decodeBase64(s string) (string, bool) {
	if len(s) > maxDecodedScan {
		s = s[:maxDecodedScan&^3]
	}
	trimmed := strings.TrimRight(s, "=")
	for _, enc := range []*base64.Encoding{base64.RawStdEncoding, base64.RawURLEncoding} {
		b, err := enc.DecodeString(trimmed)
		if err != nil || len(b) < 12 {
			continue
		}
		printable := 0
		for _, c := range b {
			if c >= 0x20 && c < 0x7f || c == '\n' || c == '\r' || c == '\t' {
				printable++
			}
		}
		if printable*10 >= len(b)*9 {
			return string(b), true
		}
	}
	return "", false
}

// entropy is the Shannon entropy of s in bits per byte.
func entropy(s string) float64 {
	var counts [256]int
	for i := 0; i < len(s); i++ {
		counts[s[i]]++
	}
	n := float64(len(s))
	h := 0.0
	for _, c := range counts {
		if c > 0 {
			p := float64(c) / n
			h -= p * math.Log2(p)
		}
	}
	return h
}

// maskPlain masks a whole value that is itself the finding.
func maskPlain(s string) string {
	return Mask(s, Finding{Kind: KindHighEntropy, Start: 0, End: len(s)})
}

// quoteName shows a query parameter's name safely (bounded, printable).
func quoteName(k string) string {
	if len(k) > 40 {
		k = k[:40] + "…"
	}
	var b strings.Builder
	for _, r := range k {
		if r >= 0x20 && r < 0x7f {
			b.WriteRune(r)
		} else {
			b.WriteByte('?')
		}
	}
	return b.String()
}

func itoa(n int) string {
	if n == 0 {
		return "0"
	}
	var b [20]byte
	i := len(b)
	for n > 0 {
		i--
		b[i] = byte('0' + n%10)
		n /= 10
	}
	return string(b[i:])
}

// dedupe keeps the first hit of each kind and place.
func dedupe(hits []Hit) []Hit {
	if len(hits) < 2 {
		return hits
	}
	seen := make(map[[2]string]bool, len(hits))
	out := hits[:0]
	for _, h := range hits {
		k := [2]string{string(h.Kind), h.Where}
		if seen[k] {
			continue
		}
		seen[k] = true
		out = append(out, h)
	}
	return out
}
