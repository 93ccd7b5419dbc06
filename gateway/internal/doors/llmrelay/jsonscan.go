package llmrelay

import (
	"bytes"
	"encoding/json"
)

// maxCaptureBytes bounds a captured top-level value ("model", "usage").
const maxCaptureBytes = 64 << 10

// maxKeyBytes bounds a top-level key kept for comparison; longer keys are
// never one of the wanted ones.
const maxKeyBytes = 64

// jsonScanner finds the raw values of the top-level keys "model" and
// "usage" in a JSON object that arrives in chunks, without holding the
// whole body: the relay streams JSON responses through as they arrive and
// reads usage on the way. It tracks strings, escapes and nesting depth
// only; it does not validate, never panics on any input and keeps at most
// maxCaptureBytes per wanted value. A duplicate key's last value wins, as
// in encoding/json.
type jsonScanner struct {
	depth   int
	inStr   bool
	esc     bool
	done    bool // the top-level object closed, or the input is not an object
	state   scanState
	key     []byte // raw key being read, quotes included
	keyLong bool
	target  int // key whose value is being captured (capNone when none)
	capKind byte
	buf     []byte // the value being captured
	capOver bool
	model   []byte
	usage   []byte
}

type scanState uint8

const (
	stExpectKey   scanState = iota // after '{' or ',' at depth 1
	stInKey                        // reading a key string at depth 1
	stAfterKey                     // key read, waiting for ':'
	stExpectValue                  // after ':' at depth 1
	stInValue                      // inside a value at depth 1 or deeper
)

const (
	capNone = iota
	capModel
	capUsage
)

var (
	keyModel = []byte(`"model"`)
	keyUsage = []byte(`"usage"`)
)

func (s *jsonScanner) feed(p []byte) {
	for _, c := range p {
		if s.done {
			return
		}
		s.step(c)
	}
}

func (s *jsonScanner) step(c byte) {
	if s.inStr {
		s.stringByte(c)
		return
	}
	switch c {
	case ' ', '\t', '\n', '\r':
		if s.target != capNone && s.depth > 1 {
			s.capture(c)
		} else if s.target != capNone && s.capKind == 's' {
			s.endCapture() // a scalar at depth 1 ends at whitespace
		}
		return
	}
	if s.depth == 0 {
		if c != '{' {
			s.done = true
			return
		}
		s.depth, s.state = 1, stExpectKey
		return
	}
	if s.depth == 1 {
		switch s.state {
		case stExpectKey:
			if c == '"' {
				s.inStr, s.state = true, stInKey
				s.key, s.keyLong = append(s.key[:0], c), false
			} else if c == '}' {
				s.closeTop()
			}
			return
		case stAfterKey:
			if c == ':' {
				s.state = stExpectValue
			}
			return
		case stExpectValue:
			s.startValue(c)
			return
		case stInValue:
			// a scalar value continues, or ends at ',' or '}'
			switch c {
			case ',':
				s.endCapture()
				s.state = stExpectKey
				return
			case '}':
				s.endCapture()
				s.closeTop()
				return
			}
			s.capture(c)
			return
		}
	}
	// depth > 1: inside a nested value of a top-level key
	s.capture(c)
	switch c {
	case '"':
		s.inStr = true
	case '{', '[':
		s.depth++
	case '}', ']':
		s.depth--
		if s.depth == 1 {
			s.endCapture()
			s.state = stAfterValue
		}
	}
}

// stAfterValue: a nested or string value at depth 1 ended; wait for ','
// or '}'. It shares stInValue's handling of those two bytes.
const stAfterValue = stInValue

func (s *jsonScanner) startValue(c byte) {
	s.state = stInValue
	switch {
	case bytes.Equal(s.key, keyModel):
		s.target = capModel
	case bytes.Equal(s.key, keyUsage):
		s.target = capUsage
	default:
		s.target = capNone
	}
	s.buf, s.capOver = s.buf[:0], false
	s.capture(c)
	switch c {
	case '"':
		s.inStr, s.capKind = true, '"'
	case '{', '[':
		s.depth++
		s.capKind = '{'
	case ',':
		s.target, s.state = capNone, stExpectKey // malformed: no value
	case '}':
		s.target = capNone
		s.closeTop()
	default:
		s.capKind = 's'
	}
}

func (s *jsonScanner) stringByte(c byte) {
	if s.depth == 1 && s.state == stInKey {
		if len(s.key) < maxKeyBytes {
			s.key = append(s.key, c)
		} else {
			s.keyLong = true
		}
	} else {
		s.capture(c)
	}
	if s.esc {
		s.esc = false
		return
	}
	switch c {
	case '\\':
		s.esc = true
	case '"':
		s.inStr = false
		if s.depth == 1 && s.state == stInKey {
			s.state = stAfterKey
			s.normaliseKey()
		} else if s.depth == 1 && s.capKind == '"' {
			s.endCapture()
			s.state = stAfterValue
		}
	}
}

// normaliseKey unescapes a key written with escapes ("mod\u0065l"), so it
// compares as encoding/json would read it.
func (s *jsonScanner) normaliseKey() {
	if s.keyLong {
		s.key = s.key[:0]
		return
	}
	if bytes.IndexByte(s.key, '\\') < 0 {
		return
	}
	var k string
	if json.Unmarshal(s.key, &k) != nil {
		s.key = s.key[:0]
		return
	}
	b, _ := json.Marshal(k)
	s.key = append(s.key[:0], b...)
}

func (s *jsonScanner) capture(c byte) {
	if s.target == capNone || s.capOver {
		return
	}
	if len(s.buf) >= maxCaptureBytes {
		s.capOver = true
		return
	}
	s.buf = append(s.buf, c)
}

func (s *jsonScanner) endCapture() {
	if s.target != capNone {
		var v []byte
		if !s.capOver {
			v = append([]byte(nil), s.buf...)
		}
		if s.target == capModel {
			s.model = v
		} else {
			s.usage = v
		}
	}
	s.target, s.capKind = capNone, 0
}

func (s *jsonScanner) closeTop() {
	s.depth, s.done = 0, true
}
