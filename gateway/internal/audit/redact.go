package audit

import (
	"bytes"
	"encoding/json"
	"io"
	"regexp"
	"strings"
	"unicode/utf8"

	"ironcurtain.dev/gateway/secretscan"
)

// Redacted replaces every secret that redaction finds.
const Redacted = "[REDACTED]"

// maxInvalidJSON bounds how much of an unparsable argument blob is kept.
const maxInvalidJSON = 64 << 10

// sensitiveKeyParts mark an object key whose string values are secrets. Keys
// are compared lower-cased with '-', '_', '.' and spaces removed, so
// "X-Api-Key", "api_key" and "apiKey" all match "apikey".
var sensitiveKeyParts = []string{
	"password", "passwd", "passphrase", "secret", "token", "apikey",
	"accesskey", "privatekey", "authorization", "cookie", "credential",
	"sessionkey", "signingkey", "encryptionkey",
}

// sensitiveKeysExact are keys that are secrets only as a whole word.
var sensitiveKeysExact = map[string]bool{"pwd": true, "auth": true, "pass": true, "otp": true, "pin": true}

// sensitiveKey reports whether values under key must be masked.
func sensitiveKey(key string) bool {
	var buf [64]byte // an ASCII key of up to 64 bytes folds here, without allocating
	if n, ok := foldKeyASCII(key, &buf); ok {
		return sensitiveFolded(buf[:n])
	}
	var b strings.Builder
	b.Grow(len(key))
	for _, r := range key {
		switch {
		case r == '-' || r == '_' || r == '.' || r == ' ':
		case r >= 'A' && r <= 'Z':
			b.WriteRune(r + ('a' - 'A'))
		default:
			b.WriteRune(r)
		}
	}
	return sensitiveFolded([]byte(b.String()))
}

// foldKeyASCII writes sensitiveKey's normalisation of key into buf and
// returns its length; ok is false (and buf unusable) unless key is ASCII and
// fits.
func foldKeyASCII(key string, buf *[64]byte) (n int, ok bool) {
	if len(key) > len(buf) {
		return 0, false
	}
	for i := 0; i < len(key); i++ {
		c := key[i]
		switch {
		case c >= utf8.RuneSelf:
			return 0, false
		case c == '-' || c == '_' || c == '.' || c == ' ':
		case c >= 'A' && c <= 'Z':
			buf[n] = c + ('a' - 'A')
			n++
		default:
			buf[n] = c
			n++
		}
	}
	return n, true
}

// sensitiveFolded is sensitiveKey of a normalised key.
func sensitiveFolded(k []byte) bool {
	if sensitiveKeysExact[string(k)] {
		return true
	}
	for _, p := range sensitiveKeyPartBytes {
		if bytes.Contains(k, p) {
			return true
		}
	}
	return false
}

var sensitiveKeyPartBytes = func() [][]byte {
	out := make([][]byte, len(sensitiveKeyParts))
	for i, p := range sensitiveKeyParts {
		out[i] = []byte(p)
	}
	return out
}()

// A secretPattern masks what re matches; repl may keep a non-secret prefix
// (a header name, "Bearer ", a key name) through submatch references. re
// runs only when the lower-cased text contains one of hints: every match of
// re contains one of them, and most text contains none, which is far cheaper
// to find out than running the regexp.
//
// These are the redaction's context rules: a value is a secret because of
// where it stands (an Authorization header, "password=", a PEM block up to
// its end), whatever it looks like. The secret formats themselves (GitHub,
// AWS, Slack, model and Google keys, JWTs, passwords in URLs, ...) come from
// secretscan, the one list the egress scanning uses too (formats).
type secretPattern struct {
	name  string
	hints []string
	re    *regexp.Regexp
	repl  string
	sets  []secretscan.ByteSet // BytesOf each hint (computed at init)
}

func init() {
	for _, ps := range [][]secretPattern{contextPatterns, assignmentPatterns} {
		for i := range ps {
			for _, h := range ps[i].hints {
				ps[i].sets = append(ps[i].sets, secretscan.BytesOf(h))
			}
		}
	}
}

// contextPatterns run before the formats: whole private-key blocks and
// header values go first so the formats do not leave parts of them behind.
var contextPatterns = []secretPattern{
	{"private key block", []string{"private key"}, regexp.MustCompile(`-----BEGIN[A-Z0-9 ]*PRIVATE KEY(?: BLOCK)?-----(?s:.*?)(?:-----END[A-Z0-9 ]*PRIVATE KEY(?: BLOCK)?-----|\z)`), Redacted, nil},
	{"authorization header", []string{"authorization"}, regexp.MustCompile(`(?i)\b((?:proxy-)?authorization\s*[:=]\s*"?)(?:(?:bearer|basic|token|digest|negotiate|aws4-hmac-sha256)\s+)?[^\s"',;]+`), "${1}" + Redacted, nil},
	{"bearer token", []string{"bearer"}, regexp.MustCompile(`(?i)\b(bearer\s+)[A-Za-z0-9\-._~+/]+=*`), "${1}" + Redacted, nil},
	{"basic credentials", []string{"basic"}, regexp.MustCompile(`(?i)\b(basic\s+)[A-Za-z0-9+/]{8,}={0,2}`), "${1}" + Redacted, nil},
}

// assignmentPatterns run after the formats.
var assignmentPatterns = []secretPattern{
	{"password assignment", []string{"pass", "secret", "token", "key"}, regexp.MustCompile(`(?i)([A-Za-z0-9_.\-]*(?:password|passwd|passphrase|secret|token|api[_\-]?key|access[_\-]?key|private[_\-]?key)["']?\s*[=:]\s*["']?)[^\s"'&,;]+`), "${1}" + Redacted, nil},
}

// formats finds the secret formats: secretscan's detectors in their loose
// form (shorter and older spellings too: a false positive costs a masked
// word here, not an escalation).
var formats = func() *secretscan.Detector {
	d, err := secretscan.New(secretscan.Options{Loose: true})
	if err != nil {
		panic(err) // static options
	}
	return d
}()

// RedactString masks secrets inside free text (error messages, reasons,
// command lines). Invalid UTF-8 is replaced, and NUL bytes, which Postgres
// text cannot hold, become U+FFFD.
func RedactString(s string) string {
	if !utf8.ValidString(s) {
		s = strings.ToValidUTF8(s, "\uFFFD")
	}
	if strings.IndexByte(s, 0) >= 0 {
		s = strings.ReplaceAll(s, "\x00", "\uFFFD")
	}
	if len(s) <= min(prefilterMax, secretscan.PrefilterMax) && !mayNeedRedaction(s) {
		return s
	}
	s = applyPatterns(s, contextPatterns)
	s = maskFormats(s)
	return applyPatterns(s, assignmentPatterns)
}

// mayNeedRedaction is the three prefilters of RedactString at the cost of
// one pass over s (at most prefilterMax bytes): false when no context
// pattern, secret format or assignment pattern has all of its hint's bytes
// in s, so that each step would return s unchanged.
func mayNeedRedaction(s string) bool {
	set := secretscan.BytesOf(s)
	folded := set.Folded()
	return hintIn(&folded, contextPatterns) || formats.MayFind(&set) || hintIn(&folded, assignmentPatterns)
}

func applyPatterns(s string, ps []secretPattern) string {
	if len(s) <= prefilterMax && !mayHaveHint(s, ps) {
		return s // no pattern's hint can be in s (see secretscan.ByteSet)
	}
	return applyAllPatterns(s, ps)
}

// applyAllPatterns is applyPatterns without the prefilter.
func applyAllPatterns(s string, ps []secretPattern) string {
	lower := asciiLower(s)
	for _, p := range ps {
		if !containsAny(lower, p.hints) {
			continue
		}
		if r := p.re.ReplaceAllString(s, p.repl); r != s {
			s, lower = r, asciiLower(r)
		}
	}
	return s
}

// maskFormats replaces every secret secretscan finds with Redacted. A scan
// reports a bounded number of findings; while one is full, the text is
// scanned again (each pass masks at least one new value, so this ends).
func maskFormats(s string) string {
	for pass := 0; pass < maxFormatPasses; pass++ {
		fs := formats.Scan(s)
		var b strings.Builder
		prev, masked := 0, 0
		for _, f := range fs {
			if s[f.Start:f.End] == Redacted {
				continue // already masked (a URL password's place)
			}
			if masked == 0 {
				b.Grow(len(s))
			}
			b.WriteString(s[prev:f.Start])
			b.WriteString(Redacted)
			prev = f.End
			masked++
		}
		if masked == 0 {
			return s
		}
		b.WriteString(s[prev:])
		s = b.String()
		if len(fs) < secretscan.MaxFindings {
			return s
		}
	}
	return s
}

// maxFormatPasses bounds maskFormats: 32 findings a pass, over a thousand
// passes is more secrets than any stored field holds (they are bounded).
const maxFormatPasses = 4096

// prefilterMax bounds the texts applyPatterns first reduces to their set of
// bytes: most short texts lack a byte of every hint, which one pass finds.
const prefilterMax = 1 << 10

// mayHaveHint reports whether s, lower-cased, may contain a hint of ps: it
// has every byte of one of them.
func mayHaveHint(s string, ps []secretPattern) bool {
	set := secretscan.FoldedBytesOf(s)
	return hintIn(&set, ps)
}

// hintIn reports whether the folded byte set holds every byte of a hint of
// ps.
func hintIn(set *secretscan.ByteSet, ps []secretPattern) bool {
	for i := range ps {
		for _, h := range ps[i].sets {
			if set.Contains(&h) {
				return true
			}
		}
	}
	return false
}

func containsAny(s string, subs []string) bool {
	for _, sub := range subs {
		if strings.Contains(s, sub) {
			return true
		}
	}
	return false
}

// asciiLower lower-cases ASCII letters only (hints are ASCII), allocating
// only when s has an upper-case letter.
func asciiLower(s string) string {
	i := 0
	for i < len(s) && !(s[i] >= 'A' && s[i] <= 'Z') {
		i++
	}
	if i == len(s) {
		return s
	}
	b := []byte(s)
	for ; i < len(b); i++ {
		if c := b[i]; c >= 'A' && c <= 'Z' {
			b[i] = c + ('a' - 'A')
		}
	}
	return string(b)
}

// Redact returns a copy of the JSON arguments with secrets masked: string
// values under sensitive keys (password, token, api_key, Authorization, ...)
// become Redacted, and secrets found by pattern inside any string (GitHub
// and cloud tokens, bearer and basic credentials, private-key blocks,
// passwords in URLs and assignments) are masked in place. The result is
// always valid JSON (keys sorted, HTML not escaped); input that does not
// parse is kept, redacted and bounded, as {"invalid_json": "..."}.
func Redact(args json.RawMessage) json.RawMessage {
	if len(bytes.TrimSpace(args)) == 0 {
		return json.RawMessage(`{}`)
	}
	dec := json.NewDecoder(bytes.NewReader(args))
	dec.UseNumber()
	var v any
	if err := dec.Decode(&v); err != nil {
		return invalidJSON(args)
	}
	if _, err := dec.Token(); err != io.EOF {
		return invalidJSON(args) // trailing data after the value
	}
	out, err := marshal(redactValue(v, false))
	if err != nil {
		return invalidJSON(args)
	}
	return out
}

func invalidJSON(args []byte) json.RawMessage {
	s := string(args)
	if len(s) > maxInvalidJSON {
		s = s[:maxInvalidJSON]
	}
	out, _ := marshal(map[string]any{"invalid_json": RedactString(s)})
	return out
}

// redactValue walks a decoded JSON value. under is true below a sensitive key.
func redactValue(v any, under bool) any {
	switch x := v.(type) {
	case string:
		if under && x != "" {
			return Redacted
		}
		return RedactString(x)
	case map[string]any:
		out := make(map[string]any, len(x))
		for k, val := range x {
			rk := RedactString(k)
			for n := 2; ; n++ {
				if _, dup := out[rk]; !dup {
					break
				}
				rk = RedactString(k) + "#" + itoa(n)
			}
			out[rk] = redactValue(val, under || sensitiveKey(k))
		}
		return out
	case []any:
		out := make([]any, len(x))
		for i, val := range x {
			out[i] = redactValue(val, under)
		}
		return out
	default: // json.Number, bool, nil: not secrets
		return v
	}
}

func itoa(n int) string {
	var b [20]byte
	i := len(b)
	for n > 0 {
		i--
		b[i] = byte('0' + n%10)
		n /= 10
	}
	return string(b[i:])
}

// marshal encodes v as compact JSON without HTML escaping.
func marshal(v any) (json.RawMessage, error) {
	var buf bytes.Buffer
	enc := json.NewEncoder(&buf)
	enc.SetEscapeHTML(false)
	if err := enc.Encode(v); err != nil {
		return nil, err
	}
	return bytes.TrimRight(buf.Bytes(), "\n"), nil
}

// RedactEvent returns a copy of e with arguments and free-text fields
// redacted, ready to be stored, with the default Limits on the arguments.
// Every sink stores only redacted events.
func RedactEvent(e Event) Event { return StoredEvent(e, Limits{}) }

// StoredEvent returns a copy of e in the form every sink stores: free-text
// fields redacted and, for a tool-call decision, the arguments in their
// stored form (StoredArgs with l: redacted, "$" keys escaped, bounded).
// Sinks apply it once, before hashing and storing.
func StoredEvent(e Event, l Limits) Event {
	switch x := e.(type) {
	case *ToolCallDecision:
		c := *x
		c.Args = StoredArgs(x.Args, l)
		c.Reason = RedactString(x.Reason)
		c.Detail = RedactString(x.Detail)
		c.Rule, c.Server, c.Tool = RedactString(x.Rule), RedactString(x.Server), RedactString(x.Tool)
		c.SessionID, c.CallID = RedactString(x.SessionID), RedactString(x.CallID)
		c.Decision, c.EscalationID = RedactString(x.Decision), RedactString(x.EscalationID)
		c.ShadowDecision, c.ShadowRule = RedactString(x.ShadowDecision), RedactString(x.ShadowRule)
		return &c
	case *ToolCallOutcome:
		c := *x
		c.Error = RedactString(x.Error)
		c.SessionID, c.CallID, c.Status = RedactString(x.SessionID), RedactString(x.CallID), RedactString(x.Status)
		return &c
	case *EgressEvent:
		c := *x
		c.Reason, c.Error, c.Rule = RedactString(x.Reason), RedactString(x.Error), RedactString(x.Rule)
		c.Host, c.Method, c.Kind = RedactString(x.Host), RedactString(x.Method), RedactString(x.Kind)
		c.SessionID, c.ID, c.ToolCallID = RedactString(x.SessionID), RedactString(x.ID), RedactString(x.ToolCallID)
		c.ResolvedIP, c.Decision = RedactString(x.ResolvedIP), RedactString(x.Decision)
		return &c
	case *LLMCall:
		c := *x
		c.Error, c.Path, c.Model = RedactString(x.Error), RedactString(x.Path), RedactString(x.Model)
		c.SessionID, c.ID, c.Provider = RedactString(x.SessionID), RedactString(x.ID), RedactString(x.Provider)
		return &c
	}
	return e
}
