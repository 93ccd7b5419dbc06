package main

import (
	"bytes"
	"context"
	"encoding/json"
	"net"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"ironcurtain.dev/compiler/artifact"
	"ironcurtain.dev/compiler/internal/fakemodel"
	"ironcurtain.dev/compiler/internal/testenv"
)

// invoke runs the command line args with the environment vars and returns
// the exit code, stdout and stderr.
func invoke(t *testing.T, vars map[string]string, args ...string) (int, string, string) {
	t.Helper()
	var out, errb bytes.Buffer
	code := run(context.Background(), env{
		args:   args,
		getenv: func(k string) string { return vars[k] },
		stdout: &out,
		stderr: &errb,
		now:    testenv.Now,
	})
	return code, out.String(), errb.String()
}

func keyEnv() map[string]string {
	return map[string]string{"ANTHROPIC_API_KEY": "test-key", "OPENAI_API_KEY": "test-key", "PATH": os.Getenv("PATH")}
}

// fixtureDir copies the fixture annotations into a fresh policy directory.
func fixtureDir(t *testing.T) string {
	t.Helper()
	dir := t.TempDir()
	b, err := os.ReadFile(filepath.Join(testenv.Dir(), "fixture", "tool-annotations.json"))
	if err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(filepath.Join(dir, artifact.AnnotationsFile), b, 0o644); err != nil {
		t.Fatal(err)
	}
	return dir
}

func compileArgs(dir, baseURL, cacheDir string) []string {
	return []string{"compile-policy",
		"--out", dir,
		"--constitution", filepath.Join(testenv.Dir(), "fixture", "constitution.md"),
		"--no-user",
		"--sandbox", "/workspace", "--home", "/home/agent",
		"--allow-domain", "git=github.com", "--allow-domain", "git=*.github.com",
		"--model", "anthropic:fake-model", "--base-url", baseURL,
		"--cache-dir", cacheDir,
	}
}

func TestUsage(t *testing.T) {
	tests := []struct {
		name string
		args []string
		code int
		want string
	}{
		{name: "no command", args: nil, code: exitUsage, want: "missing command"},
		{name: "diff alias", args: []string{"diff", "a"}, code: exitUsage, want: "OLD NEW"},
		{name: "help", args: []string{"help"}, code: exitOK, want: "compile-policy"},
		{name: "unknown command", args: []string{"frobnicate"}, code: exitUsage, want: `unknown command "frobnicate"`},
		{name: "compile without --out", args: []string{"compile-policy"}, code: exitUsage, want: "--out is required"},
		{name: "bad flag", args: []string{"compile-policy", "--no-such-flag"}, code: exitUsage, want: "flag provided but not defined"},
		{name: "flag help", args: []string{"verify", "-h"}, code: exitOK, want: "-dir"},
		{name: "diff needs two policies", args: []string{"policy-diff", "a"}, code: exitUsage, want: "OLD NEW"},
		{name: "bad allow-domain", args: []string{"verify", "--dir", "x", "--allow-domain", "github.com"}, code: exitUsage, want: "server=pattern"},
		{name: "root sandbox", args: []string{"verify", "--dir", "x", "--sandbox", "/"}, code: exitUsage, want: "--sandbox"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			code, out, errs := invoke(t, keyEnv(), tt.args...)
			if code != tt.code {
				t.Errorf("exit %d, want %d\nstdout: %s\nstderr: %s", code, tt.code, out, errs)
			}
			if !strings.Contains(out+errs, tt.want) {
				t.Errorf("output lacks %q:\n%s%s", tt.want, out, errs)
			}
		})
	}
}

func TestCompileModelErrors(t *testing.T) {
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	dead := "http://" + l.Addr().String()
	l.Close()
	tests := []struct {
		name  string
		vars  map[string]string
		extra []string
		code  int
		want  []string
	}{
		{name: "missing anthropic key", vars: map[string]string{}, code: exitUsage, want: []string{"ANTHROPIC_API_KEY"}},
		{name: "missing openai key", vars: map[string]string{"ANTHROPIC_API_KEY": "k"}, extra: []string{"--model", "openai:gpt-x"}, code: exitUsage, want: []string{"OPENAI_API_KEY"}},
		{name: "unreachable endpoint", vars: keyEnv(), code: exitRuntime, want: []string{"unreachable", dead}},
		{name: "rejected key", vars: map[string]string{"ANTHROPIC_API_KEY": fakemodel.RejectedKey}, code: exitRuntime, want: []string{"ANTHROPIC_API_KEY", "rejected"}},
	}
	srv := fakemodel.New(func(fakemodel.Request) fakemodel.Answer { return fakemodel.Answer{Text: "{}"} })
	defer srv.Close()
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			base := dead
			if tt.name == "rejected key" {
				base = srv.AnthropicURL()
			}
			args := append(compileArgs(fixtureDir(t), base, t.TempDir()), "--retries", "0")
			args = append(args, tt.extra...)
			code, out, errs := invoke(t, tt.vars, args...)
			if code != tt.code {
				t.Fatalf("exit %d, want %d\n%s%s", code, tt.code, out, errs)
			}
			for _, w := range tt.want {
				if !strings.Contains(errs, w) {
					t.Errorf("stderr lacks %q:\n%s", w, errs)
				}
			}
			if strings.Contains(errs, "test-key") {
				t.Errorf("stderr leaks the API key:\n%s", errs)
			}
		})
	}
}

// TestCompilePolicyCommand runs the recorded compile through the command:
// it must print VERIFIED, exit 0, write the golden artifacts and the
// interaction log, and a second run must be answered from the cache.
func TestCompilePolicyCommand(t *testing.T) {
	script, err := fakemodel.LoadScript(filepath.Join(testenv.Dir(), "golden", "script.json"))
	if err != nil {
		t.Fatal(err)
	}
	srv := fakemodel.New(script.Respond)
	defer srv.Close()
	dir, cacheDir := fixtureDir(t), t.TempDir()
	code, out, errs := invoke(t, keyEnv(), compileArgs(dir, srv.AnthropicURL(), cacheDir)...)
	if code != exitOK {
		t.Fatalf("exit %d\nstdout: %s\nstderr: %s", code, out, errs)
	}
	if !strings.Contains(out, "policy VERIFIED") || !strings.Contains(out, "12 calls") {
		t.Errorf("summary:\n%s", out)
	}
	for _, name := range []string{artifact.CompiledPolicyFile, artifact.DynamicListsFile, artifact.ScenariosFile} {
		got, err := os.ReadFile(filepath.Join(dir, name))
		if err != nil {
			t.Fatal(err)
		}
		want, err := os.ReadFile(filepath.Join(testenv.Dir(), "golden", "want", name))
		if err != nil {
			t.Fatal(err)
		}
		if !bytes.Equal(got, want) {
			t.Errorf("%s differs from the golden file", name)
		}
	}
	log, err := os.ReadFile(filepath.Join(dir, logFileName))
	if err != nil {
		t.Fatal(err)
	}
	if lines := strings.Count(string(log), "\n"); lines != 12 {
		t.Errorf("interaction log has %d lines, want 12", lines)
	}
	for _, line := range strings.Split(strings.TrimSpace(string(log)), "\n") {
		var e map[string]any
		if err := json.Unmarshal([]byte(line), &e); err != nil {
			t.Fatalf("log line is not JSON: %v", err)
		}
		if e["step"] == "" || e["reply"] == nil {
			t.Errorf("log entry lacks step or reply: %s", line)
		}
	}

	refuse := fakemodel.New(func(fakemodel.Request) fakemodel.Answer { return fakemodel.Answer{Status: 599} })
	defer refuse.Close()
	code, out, errs = invoke(t, keyEnv(), compileArgs(dir, refuse.AnthropicURL(), cacheDir)...)
	if code != exitOK || refuse.Calls() != 0 || !strings.Contains(out, "0 calls") {
		t.Fatalf("second run: exit %d, %d calls\n%s%s", code, refuse.Calls(), out, errs)
	}
}

// TestCompileUnverifiedIsNotInstalled: a policy that fails verification is
// written to <out>/unverified, never over the live files, unless
// --unsafe-write-unverified.
func TestCompileUnverifiedIsNotInstalled(t *testing.T) {
	allowAll := `{"rules":[{"name":"filesystem-allow-writes","description":"d","principle":"p","if":{"server":["filesystem"],"tool":["write_file"]},"then":"allow","reason":"r"}]}`
	srv := fakemodel.New(func(r fakemodel.Request) fakemodel.Answer {
		switch {
		case strings.Contains(r.System, "You translate") && strings.Contains(r.Last(), "Compile the constitution"):
			return fakemodel.Answer{Text: allowAll}
		case strings.Contains(r.System, "You translate"):
			return fakemodel.Answer{Text: `{"reasoning":"fine","operations":[]}`}
		case strings.Contains(r.System, "You write test scenarios"):
			return fakemodel.Answer{Text: `{"scenarios":[{"description":"d","request":{"serverName":"filesystem","toolName":"read_file","arguments":{"path":"/etc/hosts"}},"expectedDecision":"deny","reasoning":"r"}]}`}
		}
		return fakemodel.Answer{Status: 599}
	})
	defer srv.Close()
	for _, unsafe := range []bool{false, true} {
		dir := fixtureDir(t)
		args := append(compileArgs(dir, srv.AnthropicURL(), t.TempDir()), "--server", "filesystem", "--repairs", "0")
		if unsafe {
			args = append(args, "--unsafe-write-unverified")
		}
		code, out, errs := invoke(t, keyEnv(), args...)
		if code != exitFailed || !strings.Contains(out, "NOT VERIFIED") {
			t.Fatalf("unsafe=%v: exit %d\n%s%s", unsafe, code, out, errs)
		}
		_, liveErr := os.Stat(filepath.Join(dir, artifact.CompiledPolicyFile))
		_, quarantineErr := os.Stat(filepath.Join(dir, UnverifiedDir, artifact.CompiledPolicyFile))
		if unsafe != (liveErr == nil) || unsafe == (quarantineErr == nil) {
			t.Errorf("unsafe=%v: live written %v, quarantined %v", unsafe, liveErr == nil, quarantineErr == nil)
		}
	}
}
