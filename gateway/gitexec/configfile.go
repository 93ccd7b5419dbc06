package gitexec

import (
	"bytes"
	"errors"
	"fmt"
	"unicode/utf8"
)

// ErrUnsure is wrapped by the native config reader's errors when it cannot
// be certain that git would read the repository's configuration the same
// way (a syntax git rejects or that this reader does not model, odd bytes, a
// file that is not a plain regular file, a setting git validates and could
// die on, ...). Callers then run git itself (ListConfig), which stays the
// reference.
var ErrUnsure = errors.New("native config reader is unsure")

// Limits of the native reader: anything larger is left to git.
const (
	// MaxNativeConfigSize bounds the size of one config file.
	MaxNativeConfigSize = 1 << 20
	// MaxNativeConfigLine bounds the length of one physical line.
	MaxNativeConfigLine = 16 << 10
	// MaxNativeConfigEntries bounds the number of entries in one file.
	MaxNativeConfigEntries = 10_000
)

func unsure(format string, a ...any) error {
	return fmt.Errorf("%w: %s", ErrUnsure, fmt.Sprintf(format, a...))
}

// ParseConfigFile parses the text of one git config file exactly as git
// 2.39's parser (config.c: git_parse_source, get_base_var,
// get_extended_base_var, get_value, parse_value) reads it, without following
// includes, and returns its entries with the given scope, in file order:
// section and variable names lower-cased, the subsection of a
// `[section "sub"]` header as written (of the deprecated `[section.sub]`
// form lower-cased), values unquoted and unescaped.
//
// It is strict: whenever git would reject the file, or the text contains
// something this reader is not certain to read as git does, it returns an
// error wrapping ErrUnsure. That covers NUL and other control characters
// (tab excepted), a carriage return not followed by a line feed, invalid
// UTF-8, a partial byte order mark, escapes other than \" \\ \n \t \b in
// values and other than \" \\ in subsections, a header with an empty
// section name or an empty component, a dotted section name in the
// `[section "sub"]` form, a variable before any section header, include
// and includeIf sections anywhere, a file over MaxNativeConfigSize, a line
// over MaxNativeConfigLine and more than MaxNativeConfigEntries entries.
func ParseConfigFile(data []byte, scope string) ([]Entry, error) {
	buf, err := normalizeConfigText(data)
	if err != nil {
		return nil, err
	}
	p := configParser{buf: buf, scope: scope}
	if err := p.parse(); err != nil {
		return nil, err
	}
	return p.entries, nil
}

// normalizeConfigText checks the raw bytes and returns the text git's
// character reader would deliver: the byte order mark dropped, CR LF read
// as LF, and a final LF (git reads end of file as one).
func normalizeConfigText(data []byte) ([]byte, error) {
	if len(data) > MaxNativeConfigSize {
		return nil, unsure("config file larger than %d bytes", MaxNativeConfigSize)
	}
	if len(data) > 0 && data[0] == 0xEF {
		if !bytes.HasPrefix(data, []byte("\xEF\xBB\xBF")) {
			return nil, unsure("partial byte order mark")
		}
		data = data[3:]
	}
	if !utf8.Valid(data) {
		return nil, unsure("invalid UTF-8")
	}
	out := make([]byte, 0, len(data)+1)
	line := 0
	for i := 0; i < len(data); i++ {
		c := data[i]
		switch {
		case c == '\r':
			if i+1 >= len(data) || data[i+1] != '\n' {
				return nil, unsure("carriage return not followed by a line feed")
			}
			continue
		case c == '\n':
			line = -1
		case c == '\t':
		case c < 0x20 || c == 0x7f:
			return nil, unsure("control character 0x%02x", c)
		}
		line++
		if line > MaxNativeConfigLine {
			return nil, unsure("line longer than %d bytes", MaxNativeConfigLine)
		}
		out = append(out, c)
	}
	if len(out) == 0 || out[len(out)-1] != '\n' {
		out = append(out, '\n')
	}
	return out, nil
}

type configParser struct {
	buf     []byte
	pos     int
	eof     bool
	scope   string
	entries []Entry
}

// next returns the next byte, or '\n' (and sets eof) at the end, as git's
// get_next_char does.
func (p *configParser) next() byte {
	if p.pos >= len(p.buf) {
		p.eof = true
		return '\n'
	}
	c := p.buf[p.pos]
	p.pos++
	return c
}

// isSpace is git's isspace (sane_ctype): tab, LF, CR and space only.
func isSpace(c byte) bool { return c == ' ' || c == '\t' || c == '\n' || c == '\r' }

func isAlpha(c byte) bool { return c >= 'a' && c <= 'z' || c >= 'A' && c <= 'Z' }

// isKeyChar is git's iskeychar: ASCII letters, digits and '-'.
func isKeyChar(c byte) bool { return isAlpha(c) || c >= '0' && c <= '9' || c == '-' }

func lower(c byte) byte {
	if c >= 'A' && c <= 'Z' {
		return c + 'a' - 'A'
	}
	return c
}

func (p *configParser) parse() error {
	var section []byte // "section." or "section.sub." of the current header
	comment := false
	for {
		c := p.next()
		if c == '\n' {
			if p.eof {
				return nil
			}
			comment = false
			continue
		}
		if comment || isSpace(c) {
			continue
		}
		if c == '#' || c == ';' {
			comment = true
			continue
		}
		if c == '[' {
			s, err := p.header()
			if err != nil {
				return err
			}
			section = append(s, '.')
			continue
		}
		if !isAlpha(c) {
			return unsure("a line starts with %q, which git rejects", c)
		}
		if section == nil {
			return unsure("a variable appears before any section header")
		}
		if err := p.entry(section, c); err != nil {
			return err
		}
		if len(p.entries) > MaxNativeConfigEntries {
			return unsure("more than %d entries", MaxNativeConfigEntries)
		}
	}
}

// header parses a section header after '[' (git's get_base_var and
// get_extended_base_var) and returns "section" or "section.sub".
func (p *configParser) header() ([]byte, error) {
	var name []byte
	for {
		c := p.next()
		if p.eof {
			return nil, unsure("unterminated section header")
		}
		if c == ']' {
			return simpleSection(name)
		}
		if isSpace(c) {
			return p.extendedHeader(name, c)
		}
		if !isKeyChar(c) && c != '.' {
			return nil, unsure("character %q in a section name", c)
		}
		name = append(name, lower(c))
	}
}

// simpleSection accepts "section" and the deprecated "section.sub" form,
// whose subsection git lower-cases like the rest.
func simpleSection(name []byte) ([]byte, error) {
	if len(name) == 0 {
		return nil, unsure("empty section header")
	}
	for _, comp := range bytes.Split(name, []byte{'.'}) {
		if len(comp) == 0 {
			return nil, unsure("empty component in section header %q", name)
		}
	}
	if err := checkSectionName(name); err != nil {
		return nil, err
	}
	return name, nil
}

func checkSectionName(name []byte) error {
	sec := name
	if i := bytes.IndexByte(name, '.'); i >= 0 {
		sec = name[:i]
	}
	if string(sec) == "include" || string(sec) == "includeif" {
		return unsure("%s section (includes are left to git, which refuses them)", sec)
	}
	return nil
}

func (p *configParser) extendedHeader(name []byte, c byte) ([]byte, error) {
	for {
		if c == '\n' {
			return nil, unsure("unterminated section header")
		}
		c = p.next()
		if !isSpace(c) {
			break
		}
	}
	if c != '"' {
		return nil, unsure(`section header without a quoted subsection`)
	}
	if len(name) == 0 || bytes.IndexByte(name, '.') >= 0 {
		return nil, unsure("section name %q before a subsection", name)
	}
	if err := checkSectionName(name); err != nil {
		return nil, err
	}
	out := append(name, '.')
	for {
		c := p.next()
		switch c {
		case '\n':
			return nil, unsure("unterminated subsection")
		case '"':
			if p.next() != ']' {
				return nil, unsure("text between a subsection and ']'")
			}
			return out, nil
		case '\\':
			c = p.next()
			if c != '\\' && c != '"' {
				return nil, unsure("escape \\%c in a subsection", c)
			}
		}
		out = append(out, c)
	}
}

// entry parses "name [= value]" whose first letter is c (git's get_value).
func (p *configParser) entry(section []byte, c byte) error {
	key := make([]byte, 0, len(section)+16)
	key = append(key, section...)
	key = append(key, lower(c))
	for {
		c = p.next()
		if p.eof || !isKeyChar(c) {
			break
		}
		key = append(key, lower(c))
	}
	for c == ' ' || c == '\t' {
		c = p.next()
	}
	e := Entry{Scope: p.scope, Key: string(key)}
	switch c {
	case '\n':
		e.NoValue = true
	case '=':
		v, err := p.value()
		if err != nil {
			return fmt.Errorf("%w (variable %s)", err, key)
		}
		e.Value = v
	default:
		return unsure("character %q after variable name %s", c, key)
	}
	p.entries = append(p.entries, e)
	return nil
}

// value parses a value after '=' up to the end of its logical line (git's
// parse_value): unquoted whitespace runs are kept as that many spaces
// between words and dropped at both ends, '#' and ';' outside quotes start
// a comment, a backslash before the line end continues the value.
func (p *configParser) value() (string, error) {
	var v []byte
	quote, comment := false, false
	space := 0
	for {
		c := p.next()
		if c == '\n' {
			if quote {
				return "", unsure("unterminated quoted value")
			}
			return string(v), nil
		}
		if comment {
			continue
		}
		if isSpace(c) && !quote {
			if len(v) > 0 {
				space++
			}
			continue
		}
		if !quote && (c == ';' || c == '#') {
			comment = true
			continue
		}
		for ; space > 0; space-- {
			v = append(v, ' ')
		}
		switch c {
		case '\\':
			c = p.next()
			switch c {
			case '\n':
				if p.eof {
					return "", unsure("backslash at the end of the file")
				}
				continue
			case 't':
				c = '\t'
			case 'b':
				c = '\b'
			case 'n':
				c = '\n'
			case '\\', '"':
			default:
				return "", unsure("unknown escape \\%c", c)
			}
		case '"':
			quote = !quote
			continue
		}
		v = append(v, c)
	}
}
