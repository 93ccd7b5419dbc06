// Package strictjson decodes request bodies the way the upstream reads them,
// so the gateway never judges one request while another one runs.
//
// Go's encoding/json matches object keys to struct fields case-insensitively
// and lets a later duplicate key overwrite an earlier one; GitHub, git and
// most servers read keys exactly. A body with both "query" and "Query" was
// judged on one and executed on the other. This package refuses every such
// body: duplicate names (compared exactly, after unescaping), names that
// match no field exactly, anything after the value, invalid UTF-8, and
// shapes past the Limits (depth, members, elements, string length), which
// are checked while the bytes are read, before any value is built.
//
// Decode and Check are the only ways in. A door decodes its request with
// Decode, decides on the decoded value, and forwards the value re-encoded
// (Marshal), never the raw bytes it was handed.
package strictjson

import (
	"errors"
	"fmt"

	jsonv2 "github.com/go-json-experiment/json"
	"github.com/go-json-experiment/json/jsontext"
)

// ErrRefused wraps every refusal, so callers can tell a bad body from an
// I/O error with errors.Is.
var ErrRefused = errors.New("refused JSON")

// Limits bounds the shape of one JSON value. A zero field takes the
// default for it (Default*); a negative one means no bound (tests only).
type Limits struct {
	// MaxBytes bounds the whole value.
	MaxBytes int
	// MaxDepth bounds nesting of objects and arrays.
	MaxDepth int
	// MaxMembers bounds the object members of the whole value, summed.
	MaxMembers int
	// MaxElements bounds the array elements of the whole value, summed.
	MaxElements int
	// MaxString bounds one string (a name or a value), in bytes after
	// unescaping (a \uXXXX escape counts as the bytes it stands for).
	MaxString int
}

// Defaults for a zero Limits field.
const (
	DefaultMaxBytes    = 4 << 20
	DefaultMaxDepth    = 64
	DefaultMaxMembers  = 10000
	DefaultMaxElements = 100000
	DefaultMaxString   = 4 << 20
)

func (l Limits) withDefaults() Limits {
	def := func(v *int, d int) {
		if *v == 0 {
			*v = d
		}
	}
	def(&l.MaxBytes, DefaultMaxBytes)
	def(&l.MaxDepth, DefaultMaxDepth)
	def(&l.MaxMembers, DefaultMaxMembers)
	def(&l.MaxElements, DefaultMaxElements)
	def(&l.MaxString, DefaultMaxString)
	return l
}

func over(n, limit int) bool { return limit >= 0 && n > limit }

// Error is a refusal. Path is where in the value it was found (a JSON
// pointer, "" for the whole value); Reason is short and safe to show to
// the client that sent the body.
type Error struct {
	Path   string
	Reason string
}

func (e *Error) Error() string {
	if e.Path == "" {
		return "refused JSON: " + e.Reason
	}
	return fmt.Sprintf("refused JSON at %s: %s", e.Path, e.Reason)
}

// Unwrap makes errors.Is(err, ErrRefused) true.
func (e *Error) Unwrap() error { return ErrRefused }

func refuse(path, format string, args ...any) error {
	return &Error{Path: path, Reason: fmt.Sprintf(format, args...)}
}

// Check reports whether data is exactly one JSON value (surrounding
// whitespace allowed) within lim, with valid UTF-8 and no duplicate object
// names. It builds nothing: its cost is one pass over the bytes.
func Check(data []byte, lim Limits) error {
	lim = lim.withDefaults()
	if over(len(data), lim.MaxBytes) {
		return refuse("", "the body is larger than %d bytes", lim.MaxBytes)
	}
	dec := jsontext.NewDecoder(bytesReader(data),
		jsontext.AllowDuplicateNames(false), jsontext.AllowInvalidUTF8(false))
	return checkTokens(dec, lim)
}

// Decode checks data (Check) and decodes it into v, matching object names
// to struct fields exactly (as their json tags spell them) and refusing a
// name that matches no field. Maps keep their names as sent. v must be a
// non-nil pointer.
func Decode(data []byte, v any, lim Limits) error {
	if err := Check(data, lim); err != nil {
		return err
	}
	return DecodeChecked(data, v)
}

// DecodeChecked is Decode of data that has already passed Check or
// ReadChecked with the caller's limits, or that is a value inside data
// that has (a part of a checked value is within the same limits): it
// decodes without checking the shape a second time. Names are matched
// exactly, unknown and duplicate names and invalid UTF-8 are still
// refused, as is data after the value.
func DecodeChecked(data []byte, v any) error {
	err := jsonv2.Unmarshal(data, v,
		jsonv2.RejectUnknownMembers(true),
		jsonv2.MatchCaseInsensitiveNames(false),
		jsontext.AllowDuplicateNames(false),
		jsontext.AllowInvalidUTF8(false))
	if err != nil {
		var se *jsonv2.SemanticError
		if errors.As(err, &se) {
			reason := "the value does not fit the request"
			if errors.Is(err, jsonv2.ErrUnknownName) {
				reason = "unknown name"
			}
			return refuse(string(se.JSONPointer), "%s", reason)
		}
		return refuse("", "the body is not valid JSON")
	}
	return nil
}

// Marshal encodes v for forwarding: the re-encoded form of what was
// decided. Names are as the struct tags spell them; map keys are sorted.
func Marshal(v any) ([]byte, error) {
	b, err := jsonv2.Marshal(v, jsonv2.Deterministic(true))
	if err != nil {
		return nil, fmt.Errorf("encoding JSON: %w", err)
	}
	return b, nil
}

func syntaxRefusal(dec *jsontext.Decoder, err error) error {
	if isEOF(err) {
		return refuse("", "the body ends before the JSON value does")
	}
	var se *jsontext.SyntacticError
	if errors.As(err, &se) {
		if errors.Is(err, jsontext.ErrDuplicateName) {
			return refuse(string(se.JSONPointer), "a name appears twice in one object")
		}
		if errors.Is(err, jsontext.ErrNonStringName) {
			return refuse(string(se.JSONPointer), "an object name is not a string")
		}
		return refuse(string(se.JSONPointer), "the body is not valid JSON")
	}
	return refuse(string(dec.StackPointer()), "the body is not valid JSON")
}

// checkTokens reads one value and what follows it from dec, within lim
// (Check and ReadChecked).
func checkTokens(dec *jsontext.Decoder, lim Limits) error {
	members, elements := 0, 0
	for {
		tok, err := dec.ReadToken()
		if err != nil {
			return syntaxRefusal(dec, err)
		}
		switch tok.Kind() {
		case '{', '[':
			if over(dec.StackDepth(), lim.MaxDepth) {
				return refuse(string(dec.StackPointer()), "nested deeper than %d", lim.MaxDepth)
			}
		case '"':
			if over(len(tok.String()), lim.MaxString) {
				return refuse(string(dec.StackPointer()), "a string is longer than %d bytes", lim.MaxString)
			}
		}
		// Count what the token just added to its container (an opening
		// brace or bracket belongs to the level below the one it opened).
		level := dec.StackDepth()
		switch tok.Kind() {
		case '}', ']':
			level = 0
		case '{', '[':
			level--
		}
		if level > 0 {
			kind, n := dec.StackIndex(level)
			if kind == '{' && n%2 == 1 { // a name was read
				members++
				if over(members, lim.MaxMembers) {
					return refuse(string(dec.StackPointer()), "more than %d object members", lim.MaxMembers)
				}
			} else if kind == '[' {
				elements++
				if over(elements, lim.MaxElements) {
					return refuse(string(dec.StackPointer()), "more than %d array elements", lim.MaxElements)
				}
			}
		}
		if dec.StackDepth() == 0 {
			break
		}
	}
	if _, err := dec.ReadToken(); err == nil {
		return refuse("", "data after the JSON value")
	} else if !isEOF(err) {
		return refuse("", "data after the JSON value")
	}
	return nil
}
