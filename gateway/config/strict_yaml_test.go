package config

import (
	"strings"
	"testing"
)

// TestYAMLReadOnce: gateway.yaml is read as exactly one document with
// exact, unique keys, so the operator who reviews the file and the gateway
// read the same settings. yaml.v3 refuses a duplicate key when decoding,
// and checkKnown refuses a key no field takes (a case variant of a known
// key included); a second document after "---" was read by nobody but a
// reviewer (yaml.Unmarshal drops it unread) and is refused now.
func TestYAMLReadOnce(t *testing.T) {
	tests := []struct {
		name, yaml, want string // want: "" accepts
	}{
		{name: "duplicate top-level key", yaml: "sandbox: /a\nsandbox: /b\n", want: `mapping key "sandbox" already defined`},
		{name: "duplicate key quoted", yaml: "\"sandbox\": /a\nsandbox: /b\n", want: "already defined"},
		{name: "duplicate list key", yaml: "protected_branches: [main]\nprotected_branches: [x]\n", want: "already defined"},
		{name: "duplicate server", yaml: "servers:\n  git:\n    allowed_domains: [a]\n  git:\n    allowed_domains: [b]\n", want: `mapping key "git" already defined`},
		{name: "duplicate nested key", yaml: "servers:\n  git:\n    allowed_domains: [a]\n    allowed_domains: [b]\n", want: "already defined"},
		{name: "case variant key", yaml: "Sandbox: /a\n", want: "Sandbox: unknown key"},
		{name: "case variant nested key", yaml: "servers:\n  git:\n    Allowed_Domains: [a]\n", want: "servers.git.Allowed_Domains: unknown key"},
		{name: "case variant beside the key", yaml: "sandbox: /a\nSANDBOX: /b\n", want: "SANDBOX: unknown key"},
		{name: "merge key", yaml: "<<: {sandbox: /a}\n", want: "<<: unknown key"},
		{name: "second document", yaml: "sandbox: /a\n---\nsandbox: /b\n", want: "more than one YAML document"},
		{name: "second document after end marker", yaml: "sandbox: /a\n...\n---\nprotected_branches: []\n", want: "more than one YAML document"},
		{name: "garbage after end marker", yaml: "sandbox: /a\n...\ngarbage: [\n", want: "more than one YAML document"},
		{name: "one document with markers", yaml: "---\nsandbox: /a\n...\n"},
		{name: "comments only", yaml: "# nothing\n"},
		{name: "empty", yaml: ""},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			_, err := Parse("/cfg/gateway.yaml", withFetch(tt.yaml))
			if tt.want == "" {
				if err != nil {
					t.Fatalf("Parse(%q) = %v", tt.yaml, err)
				}
				return
			}
			if err == nil || !strings.Contains(err.Error(), tt.want) {
				t.Fatalf("Parse(%q) = %v, want an error containing %q", tt.yaml, err, tt.want)
			}
			if !strings.HasPrefix(err.Error(), "gateway.yaml: ") {
				t.Fatalf("the error does not name the file: %v", err)
			}
		})
	}
}
