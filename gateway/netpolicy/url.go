package netpolicy

import (
	"net/url"
	"strconv"
	"strings"
)

// maxURLInput bounds the length of a URL ParseURL accepts.
const maxURLInput = 16 << 10

// HTTPSchemes are the schemes ParseURL accepts, with their default ports.
var HTTPSchemes = map[string]int{"http": 80, "https": 443}

// URL is a parsed absolute URL with a canonical host.
type URL struct {
	Scheme   string // lower-case
	Host     Host
	Port     int    // explicit port, or the scheme's default
	Path     string // escaped path as given ("/" when empty); dot segments are NOT resolved
	RawQuery string // query without '?', as given; the fragment is dropped
}

// Authority returns "host:port" (IPv6 in brackets), always with the port.
func (u URL) Authority() string { return u.Host.HostPort(u.Port) }

// String returns the URL in canonical form; the port is omitted when it is
// the default of a scheme in HTTPSchemes.
func (u URL) String() string {
	var b strings.Builder
	b.Grow(len(u.Scheme) + 3 + len(u.Host.name) + 8 + len(u.Path) + 1 + len(u.RawQuery))
	b.WriteString(u.Scheme)
	b.WriteString("://")
	b.WriteString(u.Host.URLHost())
	if def, ok := HTTPSchemes[u.Scheme]; !ok || def != u.Port {
		b.WriteByte(':')
		b.WriteString(strconv.Itoa(u.Port))
	}
	b.WriteString(u.Path)
	if u.RawQuery != "" {
		b.WriteByte('?')
		b.WriteString(u.RawQuery)
	}
	return b.String()
}

// IsString reports whether s == u.String(), without building the string (a
// caller that holds the URL as given keeps it when it is already canonical).
func (u URL) IsString(s string) bool {
	var ok bool
	if s, ok = strings.CutPrefix(s, u.Scheme); !ok {
		return false
	}
	if s, ok = strings.CutPrefix(s, "://"); !ok {
		return false
	}
	if u.Host.addr.Is6() {
		if len(s) < len(u.Host.name)+2 || s[0] != '[' || s[1:1+len(u.Host.name)] != u.Host.name || s[1+len(u.Host.name)] != ']' {
			return false
		}
		s = s[len(u.Host.name)+2:]
	} else if s, ok = strings.CutPrefix(s, u.Host.name); !ok {
		return false
	}
	if def, ok := HTTPSchemes[u.Scheme]; !ok || def != u.Port {
		var buf [8]byte
		port := strconv.AppendInt(append(buf[:0], ':'), int64(u.Port), 10)
		if len(s) < len(port) || s[:len(port)] != string(port) {
			return false
		}
		s = s[len(port):]
	}
	if s, ok = strings.CutPrefix(s, u.Path); !ok {
		return false
	}
	if u.RawQuery == "" {
		return s == ""
	}
	return len(s) == 1+len(u.RawQuery) && s[0] == '?' && s[1:] == u.RawQuery
}

// ParseURL parses an absolute http or https URL strictly (see ParseURLScheme).
func ParseURL(raw string) (URL, error) {
	return ParseURLScheme(raw, HTTPSchemes)
}

// ParseURLScheme parses an absolute URL "scheme://authority[/path][?query][#fragment]"
// whose scheme is a key of schemes; the value is the scheme's default port
// (0: the URL must name a port). It rejects userinfo (any '@' in the
// authority), backslashes, control characters and whitespace anywhere, a
// scheme not followed by "//", a host ParseHost rejects, an invalid port, and
// any URL Go's net/url would parse to a different scheme or authority.
func ParseURLScheme(raw string, schemes map[string]int) (URL, error) {
	if len(raw) > maxURLInput {
		return URL{}, newParseError(ErrInvalidURL, raw, "too long")
	}
	if why := checkRaw(raw, false); why != "" {
		return URL{}, newParseError(ErrInvalidURL, raw, why)
	}
	colon := strings.IndexByte(raw, ':')
	if colon <= 0 || !validScheme(raw[:colon]) {
		return URL{}, newParseError(ErrInvalidURL, raw, "missing or invalid scheme")
	}
	scheme := strings.ToLower(raw[:colon])
	defPort, ok := schemes[scheme]
	if !ok {
		return URL{}, newParseError(ErrInvalidURL, raw, "scheme "+strconv.Quote(scheme)+" is not allowed")
	}
	rest := raw[colon+1:]
	if !strings.HasPrefix(rest, "//") {
		return URL{}, newParseError(ErrInvalidURL, raw, "scheme must be followed by \"//\"")
	}
	rest = rest[2:]
	end := strings.IndexAny(rest, "/?#")
	if end < 0 {
		end = len(rest)
	}
	authority := rest[:end]
	if strings.IndexByte(authority, '@') >= 0 {
		return URL{}, newParseError(ErrInvalidURL, raw, "userinfo is not allowed")
	}
	host, port, err := ParseAuthority(authority, defPort)
	if err != nil {
		return URL{}, wrapParseError(ErrInvalidURL, raw, err)
	}
	rest = rest[end:]
	if i := strings.IndexByte(rest, '#'); i >= 0 {
		rest = rest[:i]
	}
	path, query, _ := strings.Cut(rest, "?")
	if path == "" {
		path = "/"
	}
	// Cross-check with the parser http.Transport uses: it must see the same
	// scheme and authority, and accept the path and query escapes.
	if !agreesWithNetURLFast(raw, authority, path) && !agreesWithNetURL(raw, scheme, authority) {
		return URL{}, newParseError(ErrInvalidURL, raw, "ambiguous URL")
	}
	return URL{Scheme: scheme, Host: host, Port: port, Path: path, RawQuery: query}, nil
}

// agreesWithNetURL is the cross-check itself: net/url.Parse accepts raw,
// reads it as hierarchical (no opaque part) without userinfo, and sees the
// same scheme and authority.
func agreesWithNetURL(raw, scheme, authority string) bool {
	gu, err := url.Parse(raw)
	return err == nil && gu.Opaque == "" && gu.User == nil &&
		strings.EqualFold(gu.Scheme, scheme) && gu.Host == authority
}

// agreesWithNetURLFast reports, without parsing again, that
// agreesWithNetURL holds for a URL the strict parser has accepted up to the
// cross-check: raw is "scheme://authority" followed by path (before the
// query) and the rest, authority has no '@' and ParseAuthority accepted it.
// It answers true only for the plain case, false when unsure (the caller then
// asks net/url): an authority of ASCII letters, digits, '.', '-' and at most
// one ':' (no brackets, no '%': net/url keeps it as it is), and every '%' of
// the path and of the fragment starting a two-digit hex escape (net/url's
// only failure there; it does not check the query). Given the strict
// parser's checks (a valid scheme followed by "//", no control characters),
// net/url then reads the same scheme, no opaque part, no userinfo and the
// same host (FuzzNetURLFastAgrees holds it to url.Parse).
func agreesWithNetURLFast(raw, authority, path string) bool {
	colons := 0
	for i := 0; i < len(authority); i++ {
		c := authority[i]
		switch {
		case 'a' <= c && c <= 'z', 'A' <= c && c <= 'Z', '0' <= c && c <= '9', c == '.', c == '-':
		case c == ':':
			if colons++; colons > 1 {
				return false
			}
		default:
			return false
		}
	}
	if !validEscapes(path) {
		return false
	}
	if i := strings.IndexByte(raw, '#'); i >= 0 {
		return validEscapes(raw[i+1:])
	}
	return true
}

// validEscapes reports whether every '%' in s starts "%XX" with two hex
// digits.
func validEscapes(s string) bool {
	for {
		i := strings.IndexByte(s, '%')
		if i < 0 {
			return true
		}
		if i+2 >= len(s) || !isHex(s[i+1]) || !isHex(s[i+2]) {
			return false
		}
		s = s[i+3:]
	}
}

func validScheme(s string) bool {
	for i := 0; i < len(s); i++ {
		c := s[i]
		switch {
		case 'a' <= c && c <= 'z', 'A' <= c && c <= 'Z':
		case i > 0 && ('0' <= c && c <= '9' || c == '+' || c == '-' || c == '.'):
		default:
			return false
		}
	}
	return s != ""
}

// ParseAuthority parses "host[:port]" as found in a CONNECT request target, a
// Host header or a URL authority. IPv6 must be in brackets. When the port is
// absent, defaultPort is used; when defaultPort is 0 a port is required
// (ErrPortRequired). Ports are 1..65535, decimal digits only, without sign or
// leading zeros; "host:" (empty port) is rejected.
func ParseAuthority(hostport string, defaultPort int) (Host, int, error) {
	if hostport == "" {
		return Host{}, 0, newParseError(ErrInvalidHost, hostport, "empty host")
	}
	hostPart, portPart, hasPort := hostport, "", false
	if hostport[0] == '[' {
		i := strings.IndexByte(hostport, ']')
		if i < 0 {
			return Host{}, 0, newParseError(ErrInvalidHost, hostport, "unbalanced '['")
		}
		hostPart = hostport[:i+1]
		switch tail := hostport[i+1:]; {
		case tail == "":
		case tail[0] == ':':
			portPart, hasPort = tail[1:], true
		default:
			return Host{}, 0, newParseError(ErrInvalidHost, hostport, "text after ']'")
		}
	} else if i := strings.IndexByte(hostport, ':'); i >= 0 {
		if strings.IndexByte(hostport[i+1:], ':') >= 0 {
			return Host{}, 0, newParseError(ErrInvalidHost, hostport, "IPv6 address must be in brackets")
		}
		hostPart, portPart, hasPort = hostport[:i], hostport[i+1:], true
	}
	var port int
	if hasPort {
		p, ok := parsePort(portPart)
		if !ok {
			return Host{}, 0, newParseError(ErrInvalidPort, hostport, "port must be 1-65535 in plain decimal")
		}
		port = p
	} else {
		if defaultPort == 0 {
			return Host{}, 0, newParseError(ErrPortRequired, hostport, "a port is required")
		}
		if defaultPort < 1 || defaultPort > 65535 {
			return Host{}, 0, newParseError(ErrInvalidPort, hostport, "default port out of range")
		}
		port = defaultPort
	}
	h, err := ParseHost(hostPart)
	if err != nil {
		return Host{}, 0, err
	}
	return h, port, nil
}

// AuthorityHost returns the host part of "host[:port]" exactly as given, before any mapping
// or lower-casing (an IPv6 literal keeps its brackets): the text a secret scan must see, as
// the canonical Host has lost its case. It splits as ParseAuthority does and validates
// nothing; use it on an authority ParseAuthority accepted.
func AuthorityHost(hostport string) string {
	if strings.HasPrefix(hostport, "[") {
		if i := strings.IndexByte(hostport, ']'); i >= 0 {
			return hostport[:i+1]
		}
		return hostport
	}
	if i := strings.IndexByte(hostport, ':'); i >= 0 && strings.IndexByte(hostport[i+1:], ':') < 0 {
		return hostport[:i]
	}
	return hostport
}

func parsePort(s string) (int, bool) {
	if s == "" || len(s) > 5 || s[0] == '0' {
		return 0, false
	}
	n := 0
	for i := 0; i < len(s); i++ {
		if s[i] < '0' || s[i] > '9' {
			return 0, false
		}
		n = n*10 + int(s[i]-'0')
	}
	return n, n >= 1 && n <= 65535
}
