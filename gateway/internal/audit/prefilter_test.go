package audit

import (
	"strings"
	"testing"
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
