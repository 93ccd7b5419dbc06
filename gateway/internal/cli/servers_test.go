package cli

import (
	"bytes"
	"context"
	"strings"
	"testing"

	"ironcurtain.dev/gateway/config"
)

// fetchServersYAML is the servers section a test gateway.yaml needs (the
// fetch allowlist every configuration must have).
const fetchServersYAML = "servers:\n  fetch:\n    allowed_domains: [\"*\"]\n"

func TestServersCommand(t *testing.T) {
	tests := []struct {
		args     []string
		code     int
		stdout   []string
		stderrIn string
	}{
		{args: []string{"add", "github"}, code: 0, stdout: []string{"catalog: github@v1.10.1-3-g64a49f34", "command: /usr/local/bin/github-mcp-server"}},
		{args: []string{"add", "time@unpinned"}, code: 0, stdout: []string{"catalog: time@unpinned"}, stderrIn: "no pins"},
		{args: []string{"add", "nosuch"}, code: 1, stderrIn: "not in the catalog"},
		{args: []string{"list"}, code: 0, stdout: []string{"github", "memory", "time"}},
		{args: nil, code: 2, stderrIn: "usage"},
		{args: []string{"add"}, code: 2, stderrIn: "usage"},
		{args: []string{"add", "--bogus"}, code: 2, stderrIn: "usage"},
	}
	for _, tt := range tests {
		t.Run(strings.Join(tt.args, " "), func(t *testing.T) {
			var out, errb bytes.Buffer
			code := runServers(context.Background(), Env{Args: tt.args, Stdout: &out, Stderr: &errb, Getenv: func(string) string { return "" }})
			if code != tt.code {
				t.Fatalf("code %d, want %d; stderr %s", code, tt.code, errb.String())
			}
			for _, w := range tt.stdout {
				if !strings.Contains(out.String(), w) {
					t.Errorf("stdout lacks %q:\n%s", w, out.String())
				}
			}
			if !strings.Contains(errb.String(), tt.stderrIn) {
				t.Errorf("stderr lacks %q:\n%s", tt.stderrIn, errb.String())
			}
		})
	}
	// What add prints is a valid configuration.
	var out bytes.Buffer
	if code := runServers(context.Background(), Env{Args: []string{"add", "github"}, Stdout: &out, Stderr: &bytes.Buffer{}}); code != 0 {
		t.Fatal(code)
	}
	// It goes under the servers: of a gateway.yaml, which lists the fetch
	// allowlist every configuration needs.
	snippet, ok := strings.CutPrefix(out.String(), "servers:\n")
	if !ok {
		t.Fatalf("the snippet is not a servers: section:\n%s", out.String())
	}
	c, err := config.Parse("/cfg/gateway.yaml", []byte(fetchServersYAML+snippet))
	if err != nil {
		t.Fatalf("the snippet does not parse: %v\n%s", err, out.String())
	}
	if len(c.PolicySettings().CatalogAnnotations) != 44 {
		t.Fatal("the snippet's server gets no catalog annotations")
	}
}
