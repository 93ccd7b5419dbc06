package auth

import (
	"encoding/base64"
	"errors"
	"net/http"
	"strings"
	"testing"
)

const tok = "icsess_AbC-123._~+/xyz=="

func TestParse(t *testing.T) {
	long := strings.Repeat("a", 1<<20)
	tests := []struct {
		name    string
		value   string
		want    Credentials
		wantErr error
	}{
		{name: "bearer", value: "Bearer " + tok, want: Credentials{"Bearer", tok}},
		{name: "lower case scheme", value: "bearer " + tok, want: Credentials{"bearer", tok}},
		{name: "upper case scheme", value: "BEARER " + tok, want: Credentials{"BEARER", tok}},
		{name: "several spaces", value: "Bearer   " + tok, want: Credentials{"Bearer", tok}},
		{name: "surrounding whitespace", value: " \tBearer " + tok + "\t ", want: Credentials{"Bearer", tok}},
		{name: "token scheme", value: "token abc", want: Credentials{"token", "abc"}},
		{name: "padding only at the end", value: "Bearer abc==", want: Credentials{"Bearer", "abc=="}},
		{name: "very long", value: "Bearer " + long, want: Credentials{"Bearer", long}},
		{name: "empty", value: "", wantErr: ErrMissing},
		{name: "blank", value: "  \t ", wantErr: ErrMissing},
		{name: "scheme alone", value: "Bearer", wantErr: ErrMalformed},
		{name: "scheme and space", value: "Bearer ", wantErr: ErrMalformed},
		{name: "token alone", value: tok, wantErr: ErrMalformed},
		{name: "trailing junk", value: "Bearer x y", wantErr: ErrMalformed},
		{name: "two spaces and junk", value: "Bearer  x y", wantErr: ErrMalformed},
		{name: "tab separator", value: "Bearer\tx", wantErr: ErrMalformed},
		{name: "tab after space", value: "Bearer \tx", wantErr: ErrMalformed},
		{name: "NUL in token", value: "Bearer x\x00y", wantErr: ErrMalformed},
		{name: "NUL after token", value: "Bearer x\x00", wantErr: ErrMalformed},
		{name: "CR LF in token", value: "Bearer x\r\nX-Injected: y", wantErr: ErrMalformed},
		{name: "LF after token", value: "Bearer x\n", wantErr: ErrMalformed},
		{name: "no-break space separator", value: "Bearer\u00a0x", wantErr: ErrMalformed},
		{name: "em space separator", value: "Bearer\u2003x", wantErr: ErrMalformed},
		{name: "ideographic space after token", value: "Bearer x\u3000", wantErr: ErrMalformed},
		{name: "unicode token", value: "Bearer töken", wantErr: ErrMalformed},
		{name: "padding in the middle", value: "Bearer a=b", wantErr: ErrMalformed},
		{name: "padding only", value: "Bearer ==", wantErr: ErrMalformed},
		{name: "quoted token", value: `Bearer "x"`, wantErr: ErrMalformed},
		{name: "auth params", value: `Digest realm="x", nonce="y"`, wantErr: ErrMalformed},
		{name: "comma list", value: "Bearer x, Bearer y", wantErr: ErrMalformed},
		{name: "bad scheme char", value: "Bear(er x", wantErr: ErrMalformed},
		{name: "colon in scheme", value: "Authorization: Bearer x", wantErr: ErrMalformed},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			got, err := Parse(tt.value)
			if !errors.Is(err, tt.wantErr) {
				t.Fatalf("Parse(%.40q) error = %v, want %v", tt.value, err, tt.wantErr)
			}
			if got != tt.want {
				t.Fatalf("Parse(%.40q) = %+v, want %+v", tt.value, got, tt.want)
			}
		})
	}
}

func TestToken(t *testing.T) {
	basic := func(userPass string) string {
		return "Basic " + base64.StdEncoding.EncodeToString([]byte(userPass))
	}
	all := []string{SchemeBearer, SchemeToken, SchemeBasic}
	tests := []struct {
		name    string
		header  string
		values  []string
		accept  []string
		want    string
		wantErr error
	}{
		{name: "bearer", header: Authorization, values: []string{"Bearer abc"}, accept: all, want: "abc"},
		{name: "BEARER", header: Authorization, values: []string{"BEARER abc"}, accept: []string{SchemeBearer}, want: "abc"},
		{name: "gh token", header: Authorization, values: []string{"token abc"}, accept: all, want: "abc"},
		{name: "Token", header: Authorization, values: []string{"Token abc"}, accept: all, want: "abc"},
		{name: "basic password", header: ProxyAuthorization, values: []string{basic("x:p@ss word:1")}, accept: all, want: "p@ss word:1"},
		{name: "basic lower case", header: ProxyAuthorization, values: []string{strings.ToLower("BASIC") + " " + base64.StdEncoding.EncodeToString([]byte("u:abc"))}, accept: all, want: "abc"},
		{name: "basic empty password", header: Authorization, values: []string{basic("user:")}, accept: all, wantErr: ErrMalformed},
		{name: "basic no colon", header: Authorization, values: []string{basic("abc")}, accept: all, wantErr: ErrMalformed},
		{name: "basic not base64", header: Authorization, values: []string{"Basic a-b_c"}, accept: all, wantErr: ErrMalformed},
		{name: "basic not accepted", header: Authorization, values: []string{basic("u:abc")}, accept: []string{SchemeBearer}, wantErr: ErrScheme},
		{name: "token not accepted", header: Authorization, values: []string{"token abc"}, accept: []string{SchemeBearer}, wantErr: ErrScheme},
		{name: "missing", header: Authorization, accept: all, wantErr: ErrMissing},
		{name: "other header only", header: ProxyAuthorization, values: nil, accept: all, wantErr: ErrMissing},
		{name: "twice the same", header: Authorization, values: []string{"Bearer abc", "Bearer abc"}, accept: all, wantErr: ErrRepeated},
		{name: "twice different", header: ProxyAuthorization, values: []string{"Bearer abc", "Bearer def"}, accept: all, wantErr: ErrRepeated},
		{name: "twice, one empty", header: Authorization, values: []string{"Bearer abc", ""}, accept: all, wantErr: ErrRepeated},
		{name: "malformed", header: Authorization, values: []string{"Bearer a b"}, accept: all, wantErr: ErrMalformed},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			h := http.Header{}
			for _, v := range tt.values {
				h.Add(tt.header, v)
			}
			got, err := Token(h, tt.header, tt.accept...)
			if !errors.Is(err, tt.wantErr) || got != tt.want {
				t.Fatalf("Token = %q, %v; want %q, %v", got, err, tt.want, tt.wantErr)
			}
		})
	}
}

func TestBearer(t *testing.T) {
	h := http.Header{}
	h.Set(Authorization, "bearer abc")
	h.Set(ProxyAuthorization, "Bearer other")
	if got, err := Bearer(h); err != nil || got != "abc" {
		t.Fatalf("Bearer = %q, %v; want abc", got, err)
	}
	h.Set(Authorization, "Basic "+base64.StdEncoding.EncodeToString([]byte("u:abc")))
	if _, err := Bearer(h); !errors.Is(err, ErrScheme) {
		t.Fatalf("Bearer of Basic credentials: err = %v, want ErrScheme", err)
	}
}

// FuzzParse checks that whatever Parse accepts is a scheme of token
// characters and a token68 with no space, control or non-ASCII byte, that
// the token is a suffix of the value, and that the canonical form parses back
// to the same credentials.
func FuzzParse(f *testing.F) {
	for _, s := range []string{"Bearer abc", "bearer  x==", "Bearer x y", "Bearer", "Basic dTpw", "Bearer x\x00", "Bearer\u00a0x", "token a/b+c~d.e_f-g", " Bearer x ", "Bearer\tx", "Bearer a=b"} {
		f.Add(s)
	}
	f.Fuzz(func(t *testing.T, v string) {
		c, err := Parse(v)
		if err != nil {
			if c != (Credentials{}) {
				t.Fatalf("Parse(%q) returned %+v with error %v", v, c, err)
			}
			if !errors.Is(err, ErrMissing) && !errors.Is(err, ErrMalformed) {
				t.Fatalf("Parse(%q) error %v is neither ErrMissing nor ErrMalformed", v, err)
			}
			return
		}
		if c.Scheme == "" || c.Token == "" {
			t.Fatalf("Parse(%q) = %+v: empty part", v, c)
		}
		for _, s := range []string{c.Scheme, c.Token} {
			for i := 0; i < len(s); i++ {
				if b := s[i]; b <= ' ' || b >= 0x7f || b == ',' || b == '"' {
					t.Fatalf("Parse(%q) = %+v: byte %#x accepted", v, c, b)
				}
			}
		}
		if !strings.HasSuffix(strings.TrimRight(v, " \t"), c.Token) {
			t.Fatalf("Parse(%q) = %+v: token is not the end of the value", v, c)
		}
		again, err := Parse(c.Scheme + " " + c.Token)
		if err != nil || again != c {
			t.Fatalf("canonical form of %+v parses to %+v, %v", c, again, err)
		}
	})
}

// FuzzBearer: a refused header yields no token; an accepted one yields a
// token without surrounding space that is part of the header.
func FuzzBearer(f *testing.F) {
	for _, s := range []string{"Bearer abc", "bearer  abc ", "Basic abc", "Bearer", "Bearer \t", "BEARER x y", "", " Bearer\u00a0x"} {
		f.Add(s)
	}
	f.Fuzz(func(t *testing.T, header string) {
		tok, err := Bearer(http.Header{Authorization: {header}})
		if err != nil {
			if tok != "" {
				t.Fatalf("refused header returned token %q", tok)
			}
			return
		}
		if tok == "" || tok != strings.TrimSpace(tok) {
			t.Fatalf("token %q from %q", tok, header)
		}
		if !strings.Contains(header, tok) {
			t.Fatalf("token %q not in header %q", tok, header)
		}
	})
}
