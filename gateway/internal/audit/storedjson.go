package audit

import (
	"encoding/json"
	"slices"
	"strconv"
	"strings"
	"unicode/utf8"
)

// storedEncoder writes the stored form of decoded arguments in one pass:
// what redactValue, escapeKeys, truncateValues and marshal make of them in
// turn (strings redacted, "$" keys escaped, long strings replaced by
// markers, compact JSON with keys sorted and HTML not escaped), without
// building the intermediate values. TestStoredEncoderMatchesTree and
// FuzzStoredEncoderMatchesTree hold it to the same bytes.
type storedEncoder struct {
	buf     []byte
	max     int         // longest string value kept (0: no limit)
	changed bool        // some value was replaced by a marker
	keys    []storedKey // the entries of the objects being written, a stack
	seen    map[string]bool
}

// storedKey is one object entry: the key as stored, and its value.
type storedKey struct {
	key   string // the agent's key, then the stored key (redacted, escaped)
	val   any
	under bool // the value is below a sensitive key
}

// encodeStored returns the stored JSON of v (a value decoded with
// UseNumber), strings longer than max bytes replaced by markers (max 0:
// none), and whether any was.
func encodeStored(v any, max, sizeHint int) ([]byte, bool) {
	e := storedEncoder{buf: make([]byte, 0, sizeHint+16), max: max}
	e.value(v, false)
	return e.buf, e.changed
}

func (e *storedEncoder) value(v any, under bool) {
	switch x := v.(type) {
	case string:
		e.str(x, under)
	case map[string]any:
		e.object(x, under)
	case []any:
		e.buf = append(e.buf, '[')
		for i, val := range x {
			if i > 0 {
				e.buf = append(e.buf, ',')
			}
			e.value(val, under)
		}
		e.buf = append(e.buf, ']')
	case json.Number:
		if x == "" {
			x = "0" // as encoding/json writes it
		}
		e.buf = append(e.buf, x...)
	case bool:
		e.buf = strconv.AppendBool(e.buf, x)
	case nil:
		e.buf = append(e.buf, "null"...)
	default: // not produced by the decoder; written as marshal would
		b, _ := marshal(x)
		e.buf = append(e.buf, b...)
	}
}

// str writes a string value: redacted (Redacted entirely below a sensitive
// key), then replaced by a marker when longer than e.max.
func (e *storedEncoder) str(s string, under bool) {
	if under && s != "" {
		s = Redacted
	} else {
		s = RedactString(s)
	}
	if e.max > 0 && len(s) > e.max {
		e.changed = true
		e.buf = appendTruncated(e.buf, truncation(s, e.max))
		return
	}
	e.buf = appendJSONString(e.buf, s)
}

// object writes an object: its keys redacted (a key that redacts to one
// already taken gets "#2", "#3", ..., the agent's keys taken in sorted
// order), "$" keys escaped, entries sorted by the stored key.
func (e *storedEncoder) object(m map[string]any, under bool) {
	start := len(e.keys)
	for k, val := range m {
		e.keys = append(e.keys, storedKey{key: k, val: val})
	}
	entries := e.keys[start:]
	slices.SortFunc(entries, func(a, b storedKey) int { return strings.Compare(a.key, b.key) })
	renamed := false
	for i := range entries {
		k := entries[i].key
		entries[i].under = under || sensitiveKey(k)
		if rk := RedactString(k); rk != k {
			entries[i].key, renamed = rk, true
		}
	}
	if renamed {
		e.dedupe(entries)
	}
	escaped := false
	for i := range entries {
		if strings.HasPrefix(entries[i].key, "$") {
			entries[i].key, escaped = "$"+entries[i].key, true
		}
	}
	if renamed || escaped {
		slices.SortFunc(entries, func(a, b storedKey) int { return strings.Compare(a.key, b.key) })
	}
	e.buf = append(e.buf, '{')
	for i := start; i < start+len(entries); i++ {
		if i > start {
			e.buf = append(e.buf, ',')
		}
		ent := e.keys[i] // e.keys may grow (and move) while the value is written
		e.buf = appendJSONString(e.buf, ent.key)
		e.buf = append(e.buf, ':')
		e.value(ent.val, ent.under)
	}
	e.buf = append(e.buf, '}')
	e.keys = e.keys[:start]
}

// dedupe renames the redacted keys of one object that collide, in order:
// a key already taken becomes key#2, key#3, ... (redactValue's rule).
func (e *storedEncoder) dedupe(entries []storedKey) {
	if e.seen == nil {
		e.seen = make(map[string]bool, len(entries))
	}
	clear(e.seen)
	for i := range entries {
		rk := entries[i].key
		for n := 2; e.seen[rk]; n++ {
			rk = entries[i].key + "#" + itoa(n)
		}
		entries[i].key = rk
		e.seen[rk] = true
	}
}

// appendTruncated appends a KeyTruncated marker as marshal writes it.
func appendTruncated(dst []byte, t Truncation) []byte {
	dst = append(dst, `{"`+KeyTruncated+`":{"bytes":`...)
	dst = strconv.AppendInt(dst, int64(t.Bytes), 10)
	dst = append(dst, `,"sha256":`...)
	dst = appendJSONString(dst, t.SHA256)
	dst = append(dst, `,"head":`...)
	dst = appendJSONString(dst, t.Head)
	return append(dst, "}}"...)
}

const hexDigits = "0123456789abcdef"

// appendJSONString appends s as encoding/json writes a string with HTML
// escaping off: '"', '\\' and control characters escaped (\b, \f, \n, \r, \t
// short), invalid UTF-8 as \ufffd, U+2028 and U+2029 escaped.
func appendJSONString(dst []byte, s string) []byte {
	dst = append(dst, '"')
	start := 0
	for i := 0; i < len(s); {
		if b := s[i]; b < utf8.RuneSelf {
			if b >= 0x20 && b != '"' && b != '\\' {
				i++
				continue
			}
			dst = append(dst, s[start:i]...)
			switch b {
			case '\\', '"':
				dst = append(dst, '\\', b)
			case '\b':
				dst = append(dst, '\\', 'b')
			case '\f':
				dst = append(dst, '\\', 'f')
			case '\n':
				dst = append(dst, '\\', 'n')
			case '\r':
				dst = append(dst, '\\', 'r')
			case '\t':
				dst = append(dst, '\\', 't')
			default:
				dst = append(dst, '\\', 'u', '0', '0', hexDigits[b>>4], hexDigits[b&0xF])
			}
			i++
			start = i
			continue
		}
		c, size := utf8.DecodeRuneInString(s[i:])
		if c == utf8.RuneError && size == 1 {
			dst = append(dst, s[start:i]...)
			dst = append(dst, `\ufffd`...)
			i += size
			start = i
			continue
		}
		if c == '\u2028' || c == '\u2029' {
			dst = append(dst, s[start:i]...)
			dst = append(dst, '\\', 'u', '2', '0', '2', hexDigits[c&0xF])
			i += size
			start = i
			continue
		}
		i += size
	}
	dst = append(dst, s[start:]...)
	return append(dst, '"')
}
