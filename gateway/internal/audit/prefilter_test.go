package audit

import (
	"strings"
	"testing"
	"unicode/utf8"
)

// prefilterCases hold the patterns' hints in every case, bytes of a hint
// without the hint, and secrets the context and assignment patterns mask.
var prefilterCases = []string{
	"", "allow", "filesystem__read_text_file", "Authorization: Bearer abc.def",
	"AUTHORIZATION=xyz", "bearer  tok", "BASIC dXNlcjpwYXNzd29yZA==", "api_key=hunter22",
	"PASSWORD: s3cret", "my_Token=abc", "yek ssap terces nekot", "-----BEGIN RSA PRIVATE KEY-----\nMIIE",
	"private  key", "Proxy-Authorization: Basic Zm9vOmJhcmJheg==", strings.Repeat("x", prefilterMax+1) + " token=abc",
}

// TestPrefilterChangesNothing: applyPatterns masks exactly what
// applyAllPatterns does, for both pattern lists.
func TestPrefilterChangesNothing(t *testing.T) {
	for _, s := range prefilterCases {
		for _, ps := range [][]secretPattern{contextPatterns, assignmentPatterns} {
			if got, want := applyPatterns(s, ps), applyAllPatterns(s, ps); got != want {
				t.Errorf("%q: with prefilter %q, without %q", s, got, want)
			}
		}
	}
	if got := RedactString("Authorization: Bearer abc.def"); strings.Contains(got, "abc.def") {
		t.Errorf("RedactString left the bearer token: %q", got)
	}
}

// FuzzPrefilter: on any text the prefilter changes nothing.
func FuzzPrefilter(f *testing.F) {
	for _, s := range prefilterCases {
		f.Add(s)
	}
	f.Fuzz(func(t *testing.T, s string) {
		for _, ps := range [][]secretPattern{contextPatterns, assignmentPatterns} {
			if got, want := applyPatterns(s, ps), applyAllPatterns(s, ps); got != want {
				t.Fatalf("%q: with prefilter %q, without %q", s, got, want)
			}
		}
	})
}

// sensitiveKeyReference is sensitiveKey as it was before the ASCII fast
// path: the fast path must agree with it on every key.
func sensitiveKeyReference(key string) bool {
	var b strings.Builder
	for _, r := range key {
		switch {
		case r == '-' || r == '_' || r == '.' || r == ' ':
		case r >= 'A' && r <= 'Z':
			b.WriteRune(r + ('a' - 'A'))
		default:
			b.WriteRune(r)
		}
	}
	k := b.String()
	if sensitiveKeysExact[k] {
		return true
	}
	for _, p := range sensitiveKeyParts {
		if strings.Contains(k, p) {
			return true
		}
	}
	return false
}

var sensitiveKeyCases = []struct {
	key  string
	want bool
}{
	{"path", false}, {"X-Api-Key", true}, {"api_key", true}, {"apiKey", true}, {"PWD", true},
	{"pwd2", false}, {"Pass", true}, {"passenger", false}, {"Auth", true}, {"author", false},
	{"clé_token", true}, {"clé", false}, {strings.Repeat("a", 64) + "token", true},
	{strings.Repeat("a", 60) + "Token", true}, {"to-ken", true}, {"\xffsecret", true}, {"", false},
}

// TestSensitiveKey checks the table and agreement with the reference.
func TestSensitiveKey(t *testing.T) {
	for _, tt := range sensitiveKeyCases {
		if got := sensitiveKey(tt.key); got != tt.want || got != sensitiveKeyReference(tt.key) {
			t.Errorf("sensitiveKey(%q) = %v, want %v", tt.key, got, tt.want)
		}
	}
}

// FuzzSensitiveKey: the fast path agrees with the reference on any key.
func FuzzSensitiveKey(f *testing.F) {
	for _, tt := range sensitiveKeyCases {
		f.Add(tt.key)
	}
	f.Fuzz(func(t *testing.T, key string) {
		if got, want := sensitiveKey(key), sensitiveKeyReference(key); got != want {
			t.Fatalf("sensitiveKey(%q) = %v, reference %v", key, got, want)
		}
	})
}

// redactStringReference is RedactString without its prefilters.
func redactStringReference(s string) string {
	if !utf8.ValidString(s) {
		s = strings.ToValidUTF8(s, "\uFFFD")
	}
	s = strings.ReplaceAll(s, "\x00", "\uFFFD")
	s = applyAllPatterns(s, contextPatterns)
	s = maskFormats(s)
	return applyAllPatterns(s, assignmentPatterns)
}

// redactStringCases add the secret formats, in and out of case, to the
// pattern cases.
var redactStringCases = append([]string{
	"ghp_" + strings.Repeat("aB3dE5fG7h", 4), "GHP_" + strings.Repeat("AB3DE5FG7H", 4), "AKIAIOSFODNN7EXAMPLE",
	"akiaiosfodnn7example", "xoxb-123-456-abcdefghij", "https://u:p4ssw0rd-long@example.com/", "sk-ant-" + strings.Repeat("a", 40),
	"eyJhbGciOiJIUzI1NiJ9.eyJzdWIiOiIxIn0.c2lnbmF0dXJlc2lnbmF0dXJl", "filesystem", "sandbox-read", "inside the sandbox",
	"\xffghp_" + strings.Repeat("x", 36), "a\x00b",
}, prefilterCases...)

// TestRedactStringPrefilter: RedactString masks exactly what it does
// without its prefilters.
func TestRedactStringPrefilter(t *testing.T) {
	for _, s := range redactStringCases {
		if got, want := RedactString(s), redactStringReference(s); got != want {
			t.Errorf("RedactString(%q) = %q, without prefilters %q", s, got, want)
		}
	}
	if mayNeedRedaction("allow") || mayNeedRedaction("filesystem") {
		t.Error("a plain word is not let through by the prefilter")
	}
}

// FuzzRedactStringPrefilter: on any text RedactString masks exactly what it
// does without its prefilters.
func FuzzRedactStringPrefilter(f *testing.F) {
	for _, s := range redactStringCases {
		f.Add(s)
	}
	f.Fuzz(func(t *testing.T, s string) {
		if got, want := RedactString(s), redactStringReference(s); got != want {
			t.Fatalf("RedactString(%q) = %q, without prefilters %q", s, got, want)
		}
	})
}
