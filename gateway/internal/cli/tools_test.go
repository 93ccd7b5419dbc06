package cli

import (
	"bytes"
	"encoding/json"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"ironcurtain.dev/gateway/internal/servers/builtin"
)

func TestCLI(t *testing.T) {
	dir := t.TempDir()
	out := filepath.Join(dir, "tool-annotations.json")
	want, err := builtin.File()
	if err != nil {
		t.Fatal(err)
	}
	stale := filepath.Join(dir, "stale.json")
	if err := os.WriteFile(stale, []byte("{}\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	tests := []struct {
		name     string
		args     []string
		code     int
		stdout   string // substring
		stderr   string // substring
		fileWant []byte
	}{
		{name: "usage", args: nil, code: 2, stderr: "usage: ironcurtain tools"},
		{name: "help", args: []string{"--help"}, code: 0, stdout: "annotations"},
		{name: "unknown", args: []string{"frob"}, code: 2, stderr: `unknown command "frob"`},
		{name: "list", args: []string{"list"}, code: 0, stdout: "fetch__http_fetch"},
		{name: "list shows roles", args: []string{"list"}, code: 0, stdout: "owner=github-owner"},
		{name: "annotations to stdout", args: []string{"annotations"}, code: 0, stdout: `"toolName": "pr_create"`},
		{name: "annotations to a file", args: []string{"annotations", "-o", out}, code: 0, fileWant: want},
		{name: "check up to date", args: []string{"annotations", "--check", out}, code: 0, stdout: "is up to date"},
		{name: "check stale", args: []string{"annotations", "--check", stale}, code: 1, stderr: "differs"},
		{name: "extra argument", args: []string{"annotations", "x"}, code: 2, stderr: "unexpected argument"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			var o, e bytes.Buffer
			if code := toolsCmd(tt.args, &o, &e); code != tt.code {
				t.Fatalf("exit %d, want %d (stderr %s)", code, tt.code, e.String())
			}
			if !strings.Contains(o.String(), tt.stdout) || !strings.Contains(e.String(), tt.stderr) {
				t.Fatalf("stdout %q, stderr %q", o.String(), e.String())
			}
			if tt.fileWant != nil {
				got, err := os.ReadFile(out)
				if err != nil || !bytes.Equal(got, tt.fileWant) {
					t.Fatalf("file differs (err %v)", err)
				}
			}
		})
	}
}

func TestListJSON(t *testing.T) {
	var o, e bytes.Buffer
	if code := toolsCmd([]string{"list", "--json"}, &o, &e); code != 0 {
		t.Fatal(e.String())
	}
	var entries []struct {
		Name string         `json:"name"`
		Args map[string]any `json:"args"`
	}
	if err := json.Unmarshal(o.Bytes(), &entries); err != nil {
		t.Fatal(err)
	}
	names := map[string]bool{}
	for _, en := range entries {
		names[en.Name] = true
	}
	for _, n := range []string{"filesystem__read_text_file", "git__push", "github__pr_create", "fetch__http_fetch"} {
		if !names[n] {
			t.Errorf("%s not listed", n)
		}
	}
	if names["github__pr_merge"] {
		t.Error("a merge tool is listed")
	}
}
