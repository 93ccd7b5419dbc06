package mcphub

import (
	"strings"
	"testing"
)

func FuzzBearerToken(f *testing.F) {
	for _, s := range []string{"Bearer abc", "bearer  abc ", "Basic abc", "Bearer", "Bearer \t", "BEARER x y", "", " Bearer\u00a0x"} {
		f.Add(s)
	}
	f.Fuzz(func(t *testing.T, header string) {
		tok, ok := bearerToken(header)
		if !ok {
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
