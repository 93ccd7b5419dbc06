package console

import (
	"os"
	"path/filepath"
	"strings"
	"testing"
)

// TestNoTrustedTemplateTypes: nothing in the console marks a string as safe
// HTML, JavaScript, URL, CSS or attribute: html/template escapes every value
// in its context. A trusted type would be the one way agent text could reach
// the page as markup.
func TestNoTrustedTemplateTypes(t *testing.T) {
	files, err := filepath.Glob("*.go")
	if err != nil {
		t.Fatal(err)
	}
	for _, f := range files {
		if strings.HasSuffix(f, "_test.go") {
			continue
		}
		b, err := os.ReadFile(f)
		if err != nil {
			t.Fatal(err)
		}
		for _, typ := range []string{"template.HTML", "template.JS", "template.URL", "template.CSS", "template.HTMLAttr", "template.Srcset"} {
			if strings.Contains(string(b), typ+"(") || strings.Contains(string(b), typ+"{") || strings.Contains(string(b), " "+typ+"\n") {
				t.Errorf("%s uses %s", f, typ)
			}
		}
	}
	tmpls, _ := filepath.Glob("templates/*.html")
	for _, f := range tmpls {
		b, _ := os.ReadFile(f)
		for _, bad := range []string{"<script>", "style=", "javascript:"} {
			if strings.Contains(string(b), bad) {
				t.Errorf("%s contains %q (inline script or style is refused by the CSP)", f, bad)
			}
		}
	}
}
