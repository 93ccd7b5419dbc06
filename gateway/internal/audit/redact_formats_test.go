package audit

import (
	"strings"
	"testing"
)

// The redaction masks every value of every format secretscan knows, however
// many there are and however long one is.
func TestRedactFormatsFromSecretscan(t *testing.T) {
	// A real JWT's header is short; its payload may be long (many claims).
	long := "eyJ" + strings.Repeat("a", 30) + ".eyJ" + strings.Repeat("b", 6000) + "." + strings.Repeat("c", 3000)
	tests := []struct {
		name    string
		in      string
		mustNot []string
	}{
		{name: "many tokens", in: strings.Repeat("x "+ghToken+" y "+awsKeyID+"\n", 100), mustNot: []string{ghToken, awsKeyID}},
		{name: "long jwt payload past the scan window", in: "t=" + long, mustNot: []string{"aaaa", "bbbb", "cccc"}},
		{name: "iam unique id", in: "principal AIDA" + "IOSFODNN7EXAMPLE", mustNot: []string{"IOSFODNN7EXAMPLE"}},
		{name: "short github token", in: "ghs_" + "abcdefghij0123456789", mustNot: []string{"abcdefghij0123456789"}},
		{name: "generic sk key", in: "key sk-" + "abcdefghij0123456789xyz", mustNot: []string{"abcdefghij0123456789xyz"}},
		{name: "url password without host character", in: "https://u:" + "p4ssw0rd@/x", mustNot: []string{"p4ssw0rd"}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			got := RedactString(tt.in)
			for _, s := range tt.mustNot {
				if strings.Contains(got, s) {
					t.Errorf("RedactString kept %q: %.200q", s, got)
				}
			}
			if again := RedactString(got); again != got {
				t.Errorf("not idempotent")
			}
		})
	}
}
