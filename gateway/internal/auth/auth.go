// Package auth parses the credentials a client presents in an
// Authorization or Proxy-Authorization header (RFC 9110 §11.4, RFC 6750
// §2.1, RFC 7617). It is the one parser every door uses: the scheme is
// matched case-insensitively, one or more spaces separate it from a token68
// credential, nothing may follow the token, and a header sent more than once
// is refused because readers differ on which copy counts. It is a leaf: it
// imports only the standard library and knows nothing of tokens' meaning.
package auth

import (
	"encoding/base64"
	"errors"
	"net/http"
	"strings"
)

// Header names the doors read credentials from.
const (
	Authorization      = "Authorization"
	ProxyAuthorization = "Proxy-Authorization"
)

// Schemes the doors accept. Comparison is case-insensitive.
const (
	SchemeBearer = "Bearer"
	SchemeBasic  = "Basic"
	SchemeToken  = "token" // what gh sends to the GitHub API
)

// Errors of Parse, FromHeader and Token; test with errors.Is.
var (
	ErrMissing   = errors.New("no credentials")
	ErrRepeated  = errors.New("credentials header given more than once")
	ErrMalformed = errors.New("malformed credentials")
	ErrScheme    = errors.New("credentials scheme not accepted")
)

// Credentials are a parsed header value: a scheme and its token68.
type Credentials struct {
	Scheme string // as sent; compare with Is
	Token  string // the token68, never empty
}

// Is reports whether c's scheme is scheme, ignoring case (RFC 9110 §11.1).
func (c Credentials) Is(scheme string) bool { return strings.EqualFold(c.Scheme, scheme) }

// Password is the password of Basic credentials (RFC 7617): the part of the
// decoded token after the first colon. The user name is ignored. An empty
// password, a token that is not standard base64 or one without a colon is
// ErrMalformed.
func (c Credentials) Password() (string, error) {
	dec, err := base64.StdEncoding.DecodeString(c.Token)
	if err != nil {
		return "", ErrMalformed
	}
	_, pass, ok := strings.Cut(string(dec), ":")
	if !ok || pass == "" {
		return "", ErrMalformed
	}
	return pass, nil
}

// Parse reads one header value, `auth-scheme 1*SP token68`. Optional
// whitespace around the value (which HTTP servers strip anyway) is ignored;
// an empty value is ErrMissing; a scheme alone, a tab or any other space
// than SP between scheme and token, characters outside the token68 set, or
// anything after the token is ErrMalformed.
func Parse(v string) (Credentials, error) {
	v = strings.Trim(v, " \t")
	if v == "" {
		return Credentials{}, ErrMissing
	}
	scheme, rest, ok := strings.Cut(v, " ")
	if !ok || !isToken(scheme) {
		return Credentials{}, ErrMalformed
	}
	tok := strings.TrimLeft(rest, " ")
	if !isToken68(tok) {
		return Credentials{}, ErrMalformed
	}
	return Credentials{Scheme: scheme, Token: tok}, nil
}

// FromHeader parses the one name header of h (Authorization or
// Proxy-Authorization). None is ErrMissing, more than one ErrRepeated.
func FromHeader(h http.Header, name string) (Credentials, error) {
	vs := h.Values(name)
	switch len(vs) {
	case 0:
		return Credentials{}, ErrMissing
	case 1:
		return Parse(vs[0])
	default:
		return Credentials{}, ErrRepeated
	}
}

// Token returns the secret of the one name header of h when its scheme is
// one of accept: the token itself, or for SchemeBasic the password. A
// scheme not in accept is ErrScheme; see FromHeader and Parse for the rest.
func Token(h http.Header, name string, accept ...string) (string, error) {
	c, err := FromHeader(h, name)
	if err != nil {
		return "", err
	}
	for _, s := range accept {
		if !c.Is(s) {
			continue
		}
		if strings.EqualFold(s, SchemeBasic) {
			return c.Password()
		}
		return c.Token, nil
	}
	return "", ErrScheme
}

// Bearer returns the token of the one "Authorization: Bearer <token>"
// header of h.
func Bearer(h http.Header) (string, error) {
	return Token(h, Authorization, SchemeBearer)
}

// isToken reports whether s is an RFC 9110 token (the auth-scheme).
func isToken(s string) bool {
	if s == "" {
		return false
	}
	for i := 0; i < len(s); i++ {
		if !isTchar(s[i]) {
			return false
		}
	}
	return true
}

func isTchar(c byte) bool {
	switch {
	case 'a' <= c && c <= 'z', 'A' <= c && c <= 'Z', '0' <= c && c <= '9':
		return true
	}
	return strings.IndexByte("!#$%&'*+-.^_`|~", c) >= 0
}

// isToken68 reports whether s is `1*( ALPHA / DIGIT / "-" / "." / "_" /
// "~" / "+" / "/" ) *"="` (RFC 9110 §11.2).
func isToken68(s string) bool {
	body := strings.TrimRight(s, "=")
	if body == "" {
		return false
	}
	for i := 0; i < len(body); i++ {
		c := body[i]
		switch {
		case 'a' <= c && c <= 'z', 'A' <= c && c <= 'Z', '0' <= c && c <= '9':
		case c == '-' || c == '.' || c == '_' || c == '~' || c == '+' || c == '/':
		default:
			return false
		}
	}
	return true
}
