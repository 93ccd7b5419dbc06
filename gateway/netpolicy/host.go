package netpolicy

import (
	"net/netip"
	"strconv"
	"strings"
	"unicode"
	"unicode/utf8"

	"golang.org/x/net/idna"
)

// Limits on what ParseHost looks at. A DNS name has at most 253 characters;
// the raw input may be longer because of Unicode, but not unboundedly so.
const (
	maxHostInput = 1024
	maxNameLen   = 253
	maxLabelLen  = 63
)

// idnaProfile maps names for lookup per UTS #46: non-transitional, STD3
// (letters, digits, hyphen only), Bidi and joiner rules. Hyphens in positions
// 3-4 are allowed (CheckHyphens off, as in browsers): real hosts such as
// "r3---sn-x.googlevideo.com" have them, and they cannot change which host
// a name denotes. Leading and trailing hyphens are refused by checkLabels.
var idnaProfile = idna.New(
	idna.MapForLookup(),
	idna.Transitional(false),
	idna.BidiRule(),
	idna.CheckJoiners(true),
	idna.CheckHyphens(false),
	idna.VerifyDNSLength(false), // checkLabels does it after the one trailing dot is removed
)

// Host is a canonical host: a lower-case ASCII DNS name (A-labels for
// internationalised names, no trailing dot) or an IP address literal.
// The zero Host is invalid. Hosts are comparable with ==: two Hosts are equal
// exactly when their canonical forms are equal.
type Host struct {
	name string     // canonical text (for an IP: addr.String())
	addr netip.Addr // valid exactly when the host is an IP literal
}

// String returns the canonical text: the DNS name, a dotted-quad IPv4 address,
// or an IPv6 address in RFC 5952 form WITHOUT brackets (use HostPort or
// URLHost where brackets are needed). ParseHost(h.String()) == h.
func (h Host) String() string { return h.name }

// IsIP reports whether h is an IP literal (in any notation on input).
func (h Host) IsIP() bool { return h.addr.IsValid() }

// Addr returns the address of an IP-literal host, or the zero Addr for a name.
func (h Host) Addr() netip.Addr { return h.addr }

// IsZero reports whether h is the zero (invalid) Host.
func (h Host) IsZero() bool { return h.name == "" }

// URLHost returns the host as it appears in a URL authority: IPv6 in brackets.
func (h Host) URLHost() string {
	if h.addr.Is6() {
		return "[" + h.name + "]"
	}
	return h.name
}

// HostPort returns "host:port" with IPv6 in brackets.
func (h Host) HostPort(port int) string {
	return h.URLHost() + ":" + strconv.Itoa(port)
}

// MarshalText implements encoding.TextMarshaler (canonical form).
func (h Host) MarshalText() ([]byte, error) { return []byte(h.name), nil }

// UnmarshalText implements encoding.TextUnmarshaler with ParseHost.
func (h *Host) UnmarshalText(b []byte) error {
	p, err := ParseHost(string(b))
	if err != nil {
		return err
	}
	*h = p
	return nil
}

// ParseHost parses a host name or IP literal strictly and returns its
// canonical form. IPv6 may be given with or without brackets. It rejects:
// empty input, control characters and whitespace (ASCII or Unicode, including
// invisible format characters), backslashes, percent signs (escapes and IPv6
// zones), '@' (userinfo), '/', '?', '#', a port, empty labels (so at most one
// trailing dot), labels that are not letters/digits/hyphen after IDNA mapping,
// and names whose last label is numeric but that are not a valid IPv4 address
// in some resolver notation.
func ParseHost(raw string) (Host, error) {
	if raw == "" {
		return Host{}, newParseError(ErrInvalidHost, raw, "empty host")
	}
	if len(raw) > maxHostInput {
		return Host{}, newParseError(ErrInvalidHost, raw, "too long")
	}
	if why := checkRaw(raw, true); why != "" {
		return Host{}, newParseError(ErrInvalidHost, raw, why)
	}
	if raw[0] == '[' {
		if raw[len(raw)-1] != ']' {
			return Host{}, newParseError(ErrInvalidHost, raw, "unbalanced '['")
		}
		return parseIPv6(raw, raw[1:len(raw)-1])
	}
	if strings.ContainsAny(raw, "[]") {
		return Host{}, newParseError(ErrInvalidHost, raw, "misplaced bracket")
	}
	if strings.IndexByte(raw, ':') >= 0 {
		return parseIPv6(raw, raw)
	}
	name, ok := fastLower(raw)
	if !ok {
		var err error
		name, err = idnaProfile.ToASCII(raw)
		if err != nil {
			return Host{}, newParseError(ErrInvalidHost, raw, "not a valid international domain name")
		}
	}
	name = strings.TrimSuffix(name, ".") // exactly one trailing dot
	if name == "" {
		return Host{}, newParseError(ErrInvalidHost, raw, "empty host")
	}
	if endsInNumber(name) {
		a, ok := parseIPv4Loose(name)
		if !ok {
			return Host{}, newParseError(ErrInvalidHost, raw, "numeric host that is not a valid IPv4 address")
		}
		return Host{name: a.String(), addr: a}, nil
	}
	if why := checkLabels(name); why != "" {
		return Host{}, newParseError(ErrInvalidHost, raw, why)
	}
	return Host{name: name}, nil
}

func parseIPv6(raw, lit string) (Host, error) {
	a, err := netip.ParseAddr(lit)
	if err != nil || !a.Is6() || a.Zone() != "" {
		return Host{}, newParseError(ErrInvalidHost, raw, "not a valid IPv6 address")
	}
	return Host{name: a.String(), addr: a}, nil
}

// checkRaw refuses characters that parsers are known to read differently.
// In a host (host == true) the URL delimiters are refused as well.
func checkRaw(s string, host bool) string {
	for i := 0; i < len(s); i++ {
		c := s[i]
		switch {
		case c < 0x20 || c == 0x7f:
			return "contains a control character"
		case c == ' ':
			return "contains whitespace"
		case c == '\\':
			return "contains a backslash"
		case host && c == '%':
			return "contains a percent sign (escape or IPv6 zone)"
		case host && c == '@':
			return "contains '@' (userinfo is not allowed)"
		case host && (c == '/' || c == '?' || c == '#'):
			return "contains a URL delimiter"
		case c >= utf8.RuneSelf:
			return checkUnicode(s[i:])
		}
	}
	return ""
}

// checkUnicode checks the non-ASCII tail of an input (ASCII in it was
// already vetted by the caller's loop up to the first non-ASCII byte, the
// rest is re-vetted here).
func checkUnicode(s string) string {
	for _, r := range s {
		switch {
		case r == utf8.RuneError:
			return "not valid UTF-8"
		case r < utf8.RuneSelf:
			if why := checkRaw(string(r), false); why != "" {
				return why
			}
		case unicode.In(r, unicode.Cc, unicode.Cf, unicode.Zs, unicode.Zl, unicode.Zp,
			unicode.Variation_Selector, unicode.Other_Default_Ignorable_Code_Point):
			return "contains an invisible, control or whitespace character"
		}
	}
	return ""
}

// fastLower handles the common case of a plain ASCII name with no A-labels,
// for which UTS #46 mapping is exactly lower-casing. ok is false when the
// full IDNA path is needed.
func fastLower(s string) (string, bool) {
	upper := false
	labelStart := true
	for i := 0; i < len(s); i++ {
		c := s[i]
		switch {
		case 'a' <= c && c <= 'z', '0' <= c && c <= '9', c == '-':
		case 'A' <= c && c <= 'Z':
			upper = true
		case c == '.':
			labelStart = true
			continue
		default:
			return "", false
		}
		if labelStart && len(s)-i >= 4 && (c == 'x' || c == 'X') && strings.EqualFold(s[i:i+4], "xn--") {
			return "", false
		}
		labelStart = false
	}
	if upper {
		return strings.ToLower(s), true
	}
	return s, true
}

// checkLabels validates a mapped ASCII name: LDH labels of 1..63 characters
// that neither start nor end with a hyphen, at most 253 characters in all.
func checkLabels(name string) string {
	if len(name) > maxNameLen {
		return "name longer than 253 characters"
	}
	start := 0
	for i := 0; i <= len(name); i++ {
		if i < len(name) && name[i] != '.' {
			c := name[i]
			if !('a' <= c && c <= 'z' || '0' <= c && c <= '9' || c == '-') {
				return "label contains a character other than letters, digits and '-'"
			}
			continue
		}
		n := i - start
		switch {
		case n == 0:
			return "empty label"
		case n > maxLabelLen:
			return "label longer than 63 characters"
		case name[start] == '-' || name[i-1] == '-':
			return "label starts or ends with '-'"
		}
		start = i + 1
	}
	return ""
}

// endsInNumber reports whether the last label is a number in the sense of
// the WHATWG URL standard: all decimal digits, or "0x" followed by hex
// digits. Such a host is an IPv4 address (or invalid), never a name.
func endsInNumber(name string) bool {
	last := name[strings.LastIndexByte(name, '.')+1:]
	if last == "" {
		return false
	}
	if len(last) >= 2 && last[0] == '0' && (last[1] == 'x' || last[1] == 'X') {
		for i := 2; i < len(last); i++ {
			if !isHex(last[i]) {
				return false
			}
		}
		return true
	}
	for i := 0; i < len(last); i++ {
		if last[i] < '0' || last[i] > '9' {
			return false
		}
	}
	return true
}

// parseIPv4Loose parses every IPv4 notation inet_aton and the WHATWG host
// parser accept: one to four parts, each decimal, octal (leading 0) or hex
// (0x), the last part filling the remaining bytes ("127.1", "2130706433",
// "0x7f.0.0.1", "0177.0.0.01").
func parseIPv4Loose(s string) (netip.Addr, bool) {
	var parts [4]uint64
	n := 0
	for {
		dot := strings.IndexByte(s, '.')
		part := s
		if dot >= 0 {
			part = s[:dot]
		}
		if n == 4 {
			return netip.Addr{}, false
		}
		v, ok := parseIPv4Part(part)
		if !ok {
			return netip.Addr{}, false
		}
		parts[n] = v
		n++
		if dot < 0 {
			break
		}
		s = s[dot+1:]
	}
	for i := 0; i < n-1; i++ {
		if parts[i] > 255 {
			return netip.Addr{}, false
		}
	}
	last := parts[n-1]
	if last >= 1<<(8*(5-n)) {
		return netip.Addr{}, false
	}
	v := last
	for i := 0; i < n-1; i++ {
		v |= parts[i] << (8 * (3 - i))
	}
	return netip.AddrFrom4([4]byte{byte(v >> 24), byte(v >> 16), byte(v >> 8), byte(v)}), true
}

func parseIPv4Part(p string) (uint64, bool) {
	if p == "" {
		return 0, false
	}
	base := uint64(10)
	switch {
	case len(p) >= 2 && p[0] == '0' && (p[1] == 'x' || p[1] == 'X'):
		base, p = 16, p[2:]
		if p == "" {
			return 0, true // "0x" is zero for WHATWG and inet_aton
		}
	case len(p) >= 2 && p[0] == '0':
		base, p = 8, p[1:]
	}
	var v uint64
	for i := 0; i < len(p); i++ {
		d, ok := digitVal(p[i])
		if !ok || d >= base {
			return 0, false
		}
		v = v*base + d
		if v > 0xffffffff {
			return 0, false
		}
	}
	return v, true
}

func digitVal(c byte) (uint64, bool) {
	switch {
	case '0' <= c && c <= '9':
		return uint64(c - '0'), true
	case 'a' <= c && c <= 'f':
		return uint64(c-'a') + 10, true
	case 'A' <= c && c <= 'F':
		return uint64(c-'A') + 10, true
	}
	return 0, false
}

func isHex(c byte) bool { _, ok := digitVal(c); return ok }
