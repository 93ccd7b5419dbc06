package secretscan

import (
	"strings"
	"testing"
)

// Loose detectors (the audit redaction's) also match shorter and older
// spellings; the strict ones (decisions) do not.
func TestLoose(t *testing.T) {
	loose, err := New(Options{Loose: true})
	if err != nil {
		t.Fatal(err)
	}
	strict := MustDefault()
	for _, tc := range []struct {
		text string
		kind Kind
	}{
		{"ghs_" + "abcdefghij0123456789", KindGitHubToken},
		{"id AIDA" + "IOSFODNN7EXAMPLE", KindAWSKeyID},
		{"sk-" + "abcdefghij0123456789xyz", KindOpenAIKey},
		{"xoxb-" + "abcdefghijkl", KindSlackToken},
		{"eyJ" + "hbGciOiJ.eyJzdWIiOiJ.abcdefgh", KindJWT},
	} {
		if fs := strict.Scan(tc.text); len(fs) != 0 {
			t.Errorf("strict Scan(%q) = %+v, want nothing", tc.text, fs)
		}
		fs := loose.Scan(tc.text)
		if len(fs) != 1 || fs[0].Kind != tc.kind {
			t.Errorf("loose Scan(%q) = %+v, want %s", tc.text, fs, tc.kind)
		}
	}
}

// A match that reaches the end of its scan window is matched again on the
// rest of the text, so that a long value is covered to its end.
func TestLongValueCoveredToItsEnd(t *testing.T) {
	tok := "eyJ" + strings.Repeat("a", 40) + ".eyJ" + strings.Repeat("b", 12000) + "." + strings.Repeat("c", 9000)
	text := "x " + tok + " y"
	fs := MustDefault().Scan(text)
	if len(fs) != 1 || text[fs[0].Start:fs[0].End] != tok {
		t.Fatalf("Scan = %+v (len %d), want the whole token (len %d)", fs, len(fs), len(tok))
	}
}
