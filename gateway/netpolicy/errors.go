package netpolicy

import (
	"errors"
	"strconv"
)

// Sentinel errors; every parse error wraps one of them (a URL error may also
// wrap the host or port error it came from), so callers can
// test with errors.Is and still print a message that says what was wrong.
var (
	ErrInvalidHost    = errors.New("invalid host")
	ErrInvalidPort    = errors.New("invalid port")
	ErrPortRequired   = errors.New("port required")
	ErrInvalidURL     = errors.New("invalid URL")
	ErrInvalidPattern = errors.New("invalid host pattern")
)

// maxQuoted bounds how much of an offending input an error message repeats,
// so that an attacker-sized string never ends up whole in a log or an answer.
const maxQuoted = 80

// ParseError describes why an input was rejected.
type ParseError struct {
	Kind   error  // one of the sentinel errors above
	Input  string // the input, truncated for display
	Reason string // short, safe explanation ("contains a backslash")
	Cause  error  // the inner parse error, when this one wraps another
}

func newParseError(kind error, input, reason string) *ParseError {
	if len(input) > maxQuoted {
		input = input[:maxQuoted] + "…"
	}
	return &ParseError{Kind: kind, Input: input, Reason: reason}
}

// Error implements error: `invalid host "a\\b": contains a backslash`.
func (e *ParseError) Error() string {
	return e.Kind.Error() + " " + strconv.Quote(e.Input) + ": " + e.Reason
}

// Unwrap returns the sentinel kind and the inner cause, if any.
func (e *ParseError) Unwrap() []error {
	if e.Cause != nil {
		return []error{e.Kind, e.Cause}
	}
	return []error{e.Kind}
}

// wrapParseError reports input as invalid of kind because of inner (an error
// from parsing a part of it), keeping inner's reason and sentinel.
func wrapParseError(kind error, input string, inner error) *ParseError {
	pe := newParseError(kind, input, inner.Error())
	pe.Cause = inner
	var ip *ParseError
	if errors.As(inner, &ip) {
		pe.Reason = ip.Reason
	}
	return pe
}
