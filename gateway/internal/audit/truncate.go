package audit

import (
	"bytes"
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"io"
	"strings"
	"unicode/utf8"
)

// Defaults of Limits.
//
// 4 KiB per value keeps every argument policy decides on whole: paths
// (PATH_MAX is 4,096 bytes on Linux), URLs, ref names, commit messages and
// commands are far below it; what it cuts is file contents, patches and
// bodies, whose length and SHA-256 are kept so an operator can match them
// to the file. 64 KiB for the whole arguments bounds a row (and so a page of
// an audit query) whatever the shape: many keys, long arrays, a huge key.
const (
	DefaultMaxValueBytes = 4 << 10
	DefaultMaxArgsBytes  = 64 << 10
	// MinMaxValueBytes is the smallest per-value limit accepted.
	MinMaxValueBytes = 256
)

// Reserved keys of the stored arguments. Every key the agent sent that
// begins with "$" is stored with one more "$" in front ("$ref" is stored as
// "$$ref"), so a key with a single leading "$" can only have been written by
// the gateway: an agent cannot forge a marker.
const (
	// KeyTruncated marks a value (a string, or the whole arguments) that
	// was cut: {"$truncated": {"bytes": N, "sha256": "...", "head": "..."}}
	// where bytes and sha256 are the length and hash of the full redacted
	// value (for a string: its UTF-8 bytes; for the whole arguments: their
	// canonical JSON text, keys escaped) and head is its first bytes.
	KeyTruncated = "$truncated"
	// KeyInvalidJSON holds arguments that did not parse as JSON, in the
	// same form as a truncated value, over their redacted text.
	KeyInvalidJSON = "$invalid_json"
)

// Limits bounds the arguments stored with a tool-call decision. The zero
// value uses the defaults.
type Limits struct {
	// MaxValueBytes caps each string value (longer ones are replaced by a
	// KeyTruncated marker holding their first MaxValueBytes bytes).
	MaxValueBytes int
	// MaxArgsBytes caps the stored arguments as a whole (when they are
	// still longer, the whole is replaced by one marker).
	MaxArgsBytes int
}

func (l Limits) withDefaults() Limits {
	if l.MaxValueBytes <= 0 {
		l.MaxValueBytes = DefaultMaxValueBytes
	}
	l.MaxValueBytes = max(l.MaxValueBytes, MinMaxValueBytes)
	if l.MaxArgsBytes <= 0 {
		l.MaxArgsBytes = DefaultMaxArgsBytes
	}
	// A whole-arguments marker holds a head of MaxValueBytes: leave room.
	l.MaxArgsBytes = max(l.MaxArgsBytes, 2*l.MaxValueBytes)
	return l
}

// Truncation is the body of a KeyTruncated or KeyInvalidJSON marker.
type Truncation struct {
	Bytes  int    `json:"bytes"`  // length of the full value in bytes
	SHA256 string `json:"sha256"` // hex SHA-256 of the full value
	Head   string `json:"head"`   // its first bytes (at most Limits.MaxValueBytes, whole UTF-8 sequences)
}

func truncation(full string, maxHead int) Truncation {
	sum := sha256.Sum256([]byte(full))
	return Truncation{Bytes: len(full), SHA256: hex.EncodeToString(sum[:]), Head: headOf(full, maxHead)}
}

// headOf returns the longest prefix of s of at most n bytes that ends on a
// UTF-8 sequence boundary.
func headOf(s string, n int) string {
	if len(s) <= n {
		return s
	}
	cut := n
	for cut > 0 && !utf8.RuneStart(s[cut]) {
		cut--
	}
	return s[:cut]
}

// StoredArgs returns the form of a call's arguments that audit sinks store:
// redacted (see Redact), with the agent's "$" keys escaped, string values
// longer than l.MaxValueBytes replaced by a KeyTruncated marker, and the
// whole replaced by one marker if it is still longer than l.MaxArgsBytes.
// The result is always valid JSON of at most about l.MaxArgsBytes.
func StoredArgs(args json.RawMessage, l Limits) json.RawMessage {
	l = l.withDefaults()
	if len(bytes.TrimSpace(args)) == 0 {
		return json.RawMessage(`{}`)
	}
	dec := json.NewDecoder(bytes.NewReader(args))
	dec.UseNumber()
	var v any
	if err := dec.Decode(&v); err != nil {
		return invalidMarker(args, l)
	}
	if _, err := dec.Token(); err != io.EOF {
		return invalidMarker(args, l)
	}
	out, changed := encodeStored(v, l.MaxValueBytes, len(args))
	if len(out) <= l.MaxArgsBytes {
		return out
	}
	whole := out
	if changed {
		whole, _ = encodeStored(v, 0, len(args))
	}
	return appendTruncated(nil, truncation(string(whole), l.MaxValueBytes))
}

func invalidMarker(args []byte, l Limits) json.RawMessage {
	// Redact the whole text first: a secret cut in two by the head would
	// escape the patterns, and the hash of a short secret could be guessed.
	m, _ := marshal(map[string]any{KeyInvalidJSON: truncation(RedactString(string(args)), l.MaxValueBytes)})
	return m
}

// escapeKeys prefixes every object key that begins with "$" with one more
// "$" (exactly one: "$a" and "$$a" become "$$a" and "$$$a"), in place where
// no key changes (v is a freshly decoded value nobody else holds).
func escapeKeys(v any) any {
	switch x := v.(type) {
	case map[string]any:
		escape := false
		for k, val := range x {
			x[k] = escapeKeys(val)
			escape = escape || strings.HasPrefix(k, "$")
		}
		if !escape {
			return x
		}
		// A new map: renaming keys while ranging over x could meet a renamed
		// key again and escape it twice.
		out := make(map[string]any, len(x))
		for k, val := range x {
			if strings.HasPrefix(k, "$") {
				k = "$" + k
			}
			out[k] = val
		}
		return out
	case []any:
		for i := range x {
			x[i] = escapeKeys(x[i])
		}
		return x
	}
	return v
}

// truncateValues returns v with every string longer than n bytes replaced
// by a marker, copying only the containers it changes, and whether it
// changed anything.
func truncateValues(v any, n int) (any, bool) {
	switch x := v.(type) {
	case string:
		if len(x) > n {
			return map[string]any{KeyTruncated: truncation(x, n)}, true
		}
	case map[string]any:
		var out map[string]any
		for k, val := range x {
			nv, ch := truncateValues(val, n)
			if !ch {
				continue
			}
			if out == nil {
				out = make(map[string]any, len(x))
				for k2, v2 := range x {
					out[k2] = v2
				}
			}
			out[k] = nv
		}
		if out != nil {
			return out, true
		}
	case []any:
		var out []any
		for i, val := range x {
			nv, ch := truncateValues(val, n)
			if !ch {
				continue
			}
			if out == nil {
				out = append([]any(nil), x...)
			}
			out[i] = nv
		}
		if out != nil {
			return out, true
		}
	}
	return v, false
}

// ArgLimits makes a JSONL sink bound stored arguments by l (the default
// limits apply without it).
func ArgLimits(l Limits) JSONLOption {
	return func(j *JSONL) { j.limits = l }
}
