package policycli

import (
	"bytes"
	"context"
	"encoding/json"
	"os"
	"path/filepath"
	"strings"
	"testing"
)

func fixtureDir(t *testing.T) string {
	t.Helper()
	abs, err := filepath.Abs(filepath.Join("..", "..", "..", "policy", "testdata", "fixtures", "base"))
	if err != nil {
		t.Fatal(err)
	}
	return abs
}

func run(t *testing.T, stdin string, home string, args ...string) (int, string, string) {
	t.Helper()
	var out, errb bytes.Buffer
	env := Env{
		Getenv: func(k string) string {
			if k == "HOME" {
				return home
			}
			return ""
		},
		Stdin: strings.NewReader(stdin), Stdout: &out, Stderr: &errb,
	}
	code := Run(context.Background(), args, env)
	return code, out.String(), errb.String()
}

func TestCheck(t *testing.T) {
	broken := t.TempDir()
	if err := os.WriteFile(filepath.Join(broken, "compiled-policy.json"), []byte(`{"rules": [{"name": "a", "if": {"roles": ["nope"]}, "then": "allow"}]}`), 0o644); err != nil {
		t.Fatal(err)
	}
	cfgDir := t.TempDir()
	cfg := filepath.Join(cfgDir, "gateway.yaml")
	if err := os.WriteFile(cfg, []byte("policy_dir: "+fixtureDir(t)+"\nsandbox: /tmp\nservers:\n  fetch:\n    allowed_domains: [\"*\"]\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	badCfg := filepath.Join(cfgDir, "bad.yaml")
	if err := os.WriteFile(badCfg, []byte("servers:\n  git:\n    allowed_domains: [\"*.\"]\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	tests := []struct {
		name       string
		args       []string
		wantCode   int
		wantOut    string
		wantStderr string
	}{
		{name: "fixture", args: []string{"check", "--policy-dir", fixtureDir(t)}, wantCode: 0, wantOut: "policy: ok (", wantStderr: "@no-such-list"},
		{name: "policy dir from config", args: []string{"check", "--config", cfg}, wantCode: 0, wantOut: "policy: ok ("},
		{name: "broken policy", args: []string{"check", "--policy-dir", broken}, wantCode: 1, wantStderr: `compiled-policy.json: rules[0].if.roles: unknown role "nope"`},
		{name: "broken config", args: []string{"check", "--policy-dir", fixtureDir(t), "--config", badCfg}, wantCode: 1, wantStderr: "bad.yaml: servers.git.allowed_domains[0]"},
		{name: "missing dir", args: []string{"check", "--policy-dir", filepath.Join(broken, "nope")}, wantCode: 1, wantStderr: "no such file"},
		{name: "no dir", args: []string{"check"}, wantCode: 1, wantStderr: "--policy-dir is required"},
		{name: "stray argument", args: []string{"check", "x"}, wantCode: 2},
		{name: "unknown subcommand", args: []string{"lint"}, wantCode: 2},
		{name: "help", args: []string{"help"}, wantCode: 0, wantOut: "usage:"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			code, out, errOut := run(t, "", "/home/u", tt.args...)
			if code != tt.wantCode {
				t.Fatalf("exit %d, want %d\nstdout: %s\nstderr: %s", code, tt.wantCode, out, errOut)
			}
			if !strings.Contains(out, tt.wantOut) || !strings.Contains(errOut, tt.wantStderr) {
				t.Fatalf("stdout %q (want %q), stderr %q (want %q)", out, tt.wantOut, errOut, tt.wantStderr)
			}
		})
	}
}

// TestConfigServeRefuses: a gateway.yaml that serve refuses (here
// servers.fetch.allowed_domains: [], which would let every domain through the
// engine's structural domain check) is refused by every policy subcommand
// that reads it, with the field named and no decision printed.
func TestConfigServeRefuses(t *testing.T) {
	dir := t.TempDir()
	cfg := filepath.Join(dir, "gateway.yaml")
	body := "policy_dir: " + fixtureDir(t) + "\nsandbox: /tmp\nservers:\n  fetch:\n    allowed_domains: []\n"
	if err := os.WriteFile(cfg, []byte(body), 0o644); err != nil {
		t.Fatal(err)
	}
	for _, args := range [][]string{
		{"eval", "--config", cfg, "--tool", "fetch__http_fetch", "--args", `{"url":"https://attacker.example/"}`},
		{"eval", "--config", cfg, "--policy-dir", fixtureDir(t), "--batch"},
		{"check", "--config", cfg},
	} {
		t.Run(args[0], func(t *testing.T) {
			code, out, errOut := run(t, `{"tool":"fetch__http_fetch","args":{"url":"https://attacker.example/"}}`+"\n", "/home/u", args...)
			if code != exitInvalid {
				t.Fatalf("exit %d, want %d\nstdout: %s\nstderr: %s", code, exitInvalid, out, errOut)
			}
			if out != "" {
				t.Fatalf("printed a result for a config serve refuses: %q", out)
			}
			if !strings.Contains(errOut, "gateway.yaml: servers.fetch.allowed_domains: must list") {
				t.Fatalf("stderr %q does not name servers.fetch.allowed_domains", errOut)
			}
		})
	}
}

func TestEval(t *testing.T) {
	home := t.TempDir()
	sandbox := t.TempDir()
	tests := []struct {
		name     string
		args     []string
		stdin    string
		wantCode int
		want     []map[string]string // decoded output lines (subset of keys)
	}{
		{name: "allow", args: []string{"--tool", "fetch__web_search", "--args", `{"query":"x"}`}, want: []map[string]string{{"decision": "allow", "rule": "allow-web-search"}}},
		{name: "relative path in the sandbox", args: []string{"--tool", "filesystem__read_text_file", "--args", `{"path":"a.txt"}`}, want: []map[string]string{{"decision": "allow", "rule": "structural-sandbox-allow"}}},
		{name: "tilde from HOME", args: []string{"--tool", "filesystem__read_text_file", "--args", `{"path":"~/Downloads/x"}`}, want: []map[string]string{{"decision": "allow", "rule": "allow-read-downloads"}}},
		{name: "escalate", args: []string{"--tool", "fetch__http_fetch", "--args", `{"url":"https://example.org/"}`}, want: []map[string]string{{"decision": "escalate"}}},
		{name: "deny", args: []string{"--tool", "shell__exec", "--args", `{}`}, want: []map[string]string{{"decision": "deny", "rule": "structural-unknown-tool"}}},
		{name: "bad args", args: []string{"--tool", "fetch__web_search", "--args", `[1]`}, wantCode: 2},
		{name: "trailing args", args: []string{"--tool", "fetch__web_search", "--args", `{} {}`}, wantCode: 2},
		{name: "bad tool", args: []string{"--tool", "web_search"}, wantCode: 2},
		{name: "tool and batch", args: []string{"--tool", "fetch__web_search", "--batch"}, wantCode: 2},
		{
			name:  "batch",
			args:  []string{"--batch"},
			stdin: `{"tool":"fetch__web_search","args":{"query":"x"}}` + "\n\n" + `{"tool":"github__pr_merge","args":{}}` + "\n",
			want:  []map[string]string{{"decision": "allow"}, {"decision": "deny", "rule": "structural-pr-merge"}},
		},
		{
			name:     "batch with a bad line",
			args:     []string{"--batch"},
			stdin:    `{"tool":"fetch__web_search","args":{}}` + "\nnot json\n" + `{"tool":"x"}` + "\n",
			wantCode: 1,
			want:     []map[string]string{{"decision": "allow"}, {"decision": "deny", "rule": "invalid-request"}, {"decision": "deny", "rule": "invalid-request"}},
		},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			args := append([]string{"eval", "--policy-dir", fixtureDir(t), "--sandbox", sandbox}, tt.args...)
			code, out, errOut := run(t, tt.stdin, home, args...)
			if code != tt.wantCode {
				t.Fatalf("exit %d, want %d\nstdout: %s\nstderr: %s", code, tt.wantCode, out, errOut)
			}
			lines := strings.Split(strings.TrimSpace(out), "\n")
			if len(tt.want) == 0 {
				return
			}
			if len(lines) != len(tt.want) {
				t.Fatalf("got %d lines, want %d:\n%s", len(lines), len(tt.want), out)
			}
			for i, l := range lines {
				var got map[string]any
				if err := json.Unmarshal([]byte(l), &got); err != nil {
					t.Fatalf("line %d is not JSON: %q", i, l)
				}
				for _, k := range []string{"decision", "rule", "reason"} {
					if _, ok := got[k]; !ok {
						t.Fatalf("line %d lacks %q: %s", i, k, l)
					}
				}
				for k, v := range tt.want[i] {
					if got[k] != v {
						t.Fatalf("line %d: %s = %v, want %v (%s)", i, k, got[k], v, l)
					}
				}
			}
		})
	}
}

// TestCheckAnnotationsFile: annotations_file is loaded next to the policy
// directory's tool-annotations.json (it used to be ignored without a word,
// so the external server's tools stayed unknown while check said ok); a
// tool annotated in both is reported naming both files.
func TestCheckAnnotationsFile(t *testing.T) {
	dir := t.TempDir()
	ext := filepath.Join(dir, "external.json")
	write := func(name, body string) string {
		p := filepath.Join(dir, name)
		if err := os.WriteFile(p, []byte(body), 0o644); err != nil {
			t.Fatal(err)
		}
		return p
	}
	cfgFor := func(name, annotations string) string {
		write(filepath.Base(ext), annotations)
		return write(name, "policy_dir: "+fixtureDir(t)+"\nsandbox: /tmp\nannotations_file: "+ext+"\nservers:\n  fetch:\n    allowed_domains: [\"*\"]\n")
	}
	cfg := cfgFor("gateway.yaml", `{"servers": {"notes": {"tools": [{"toolName": "search", "args": {"q": ["none"]}}]}}}`)
	code, out, errOut := run(t, "", "/home/u", "check", "--config", cfg)
	if code != exitOK || !strings.Contains(out, "annotations: "+ext) || !strings.Contains(out, "annotations: "+filepath.Join(fixtureDir(t), "tool-annotations.json")) {
		t.Fatalf("exit %d\nstdout: %s\nstderr: %s", code, out, errOut)
	}
	code, out, errOut = run(t, "", "/home/u", "eval", "--config", cfg, "--tool", "notes__search", "--args", `{"q":"x"}`)
	if code != exitOK || strings.Contains(out, "structural-unknown-tool") {
		t.Fatalf("notes__search is unknown: exit %d\nstdout: %s\nstderr: %s", code, out, errOut)
	}

	cfgFor("gateway.yaml", `{"servers": {"fetch": {"tools": [{"toolName": "http_fetch", "args": {"url": ["none"]}}]}}}`)
	code, out, errOut = run(t, "", "/home/u", "check", "--config", cfg)
	want := "tool fetch__http_fetch is also annotated in " + filepath.Join(fixtureDir(t), "tool-annotations.json")
	if code != exitInvalid || !strings.Contains(errOut, ext+": servers.fetch.tools[0]: ") || !strings.Contains(errOut, want) {
		t.Fatalf("conflict: exit %d, stdout %q, stderr %q (want %q)", code, out, errOut, want)
	}
}
