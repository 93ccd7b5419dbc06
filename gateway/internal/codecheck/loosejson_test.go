package codecheck

import (
	"os"
	"path/filepath"
	"strings"
	"testing"
)

func TestLooseJSON(t *testing.T) {
	tests := []struct {
		name    string
		src     string
		allowed map[string]bool
		want    []string // substrings, one finding each
	}{
		{name: "clean", src: "package p\nimport \"encoding/json\"\nfunc f() { _, _ = json.Marshal(1) }\n"},
		{name: "unmarshal", src: "package p\nimport \"encoding/json\"\nfunc f(b []byte) { _ = json.Unmarshal(b, nil) }\n",
			want: []string{"f calls encoding/json's Unmarshal"}},
		{name: "renamed import", src: "package p\nimport js \"encoding/json\"\nfunc g() { _ = js.NewDecoder(nil) }\n",
			want: []string{"g calls encoding/json's NewDecoder"}},
		{name: "allowed function", src: "package p\nimport \"encoding/json\"\nfunc ok(b []byte) { _ = json.Unmarshal(b, nil) }\n",
			allowed: map[string]bool{"ok": true}},
		{name: "query", src: "package p\nimport \"net/http\"\nfunc h(r *http.Request) { _ = r.URL.Query() }\n",
			want: []string{"h reads URL.Query()"}},
		{name: "another package named json", src: "package p\nimport json \"example.com/strict\"\nfunc f(b []byte) { _ = json.Unmarshal(b, nil) }\n"},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			dir := t.TempDir()
			if err := os.WriteFile(filepath.Join(dir, "p.go"), []byte(tc.src), 0o600); err != nil {
				t.Fatal(err)
			}
			// A test file is never read.
			if err := os.WriteFile(filepath.Join(dir, "p_test.go"), []byte("package p\nimport \"encoding/json\"\nfunc t(b []byte) { _ = json.Unmarshal(b, nil) }\n"), 0o600); err != nil {
				t.Fatal(err)
			}
			got, err := LooseJSON(dir, tc.allowed)
			if err != nil {
				t.Fatal(err)
			}
			if len(got) != len(tc.want) {
				t.Fatalf("got %q, want %d findings %q", got, len(tc.want), tc.want)
			}
			for i, w := range tc.want {
				if !strings.Contains(got[i], w) {
					t.Errorf("finding %d = %q, want it to contain %q", i, got[i], w)
				}
			}
		})
	}
}

func TestLooseJSONUnreadable(t *testing.T) {
	dir := t.TempDir()
	if err := os.WriteFile(filepath.Join(dir, "bad.go"), []byte("package"), 0o600); err != nil {
		t.Fatal(err)
	}
	if _, err := LooseJSON(dir, nil); err == nil {
		t.Fatal("a file that does not parse gave no error")
	}
}
