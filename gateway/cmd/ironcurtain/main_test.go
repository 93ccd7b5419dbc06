package main

import (
	"bytes"
	"context"
	"io"
	"strings"
	"testing"

	"github.com/spf13/cobra"

	"ironcurtain.dev/gateway/internal/cli"
)

// runArgs runs the ironcurtain command line with args.
func runArgs(args ...string) (code int, stdout, stderr string) {
	var out, errb bytes.Buffer
	code = run(context.Background(), env{args: args, getenv: func(string) string { return "" },
		stdin: strings.NewReader(""), stdout: &out, stderr: &errb})
	return code, out.String(), errb.String()
}

// commandPaths lists every command of the tree (hidden ones aside), as the
// arguments that name it: [] for the root, ["audit", "verify"], ...
func commandPaths() [][]string {
	var paths [][]string
	var walk func(c *cobra.Command, path []string)
	walk = func(c *cobra.Command, path []string) {
		paths = append(paths, path)
		for _, s := range c.Commands() {
			if !s.Hidden {
				walk(s, append(append([]string{}, path...), s.Name()))
			}
		}
	}
	walk(cli.NewRoot(cli.Env{Stdin: strings.NewReader(""), Stdout: io.Discard, Stderr: io.Discard}, wiring), nil)
	return paths
}

// Every command and subcommand: --help and -h print usage on stdout and
// exit 0, `help <command>` prints the same, and an unknown flag prints the
// error and usage on stderr and exits 2.
func TestEveryCommandHelpAndUsage(t *testing.T) {
	paths := commandPaths()
	if len(paths) < 40 {
		t.Fatalf("%d commands in the tree, want the whole tree", len(paths))
	}
	for _, path := range paths {
		t.Run(strings.Join(append([]string{"ironcurtain"}, path...), " "), func(t *testing.T) {
			with := func(extra ...string) []string { return append(append([]string{}, path...), extra...) }
			code, out, errOut := runArgs(with("--help")...)
			if code != 0 || !strings.Contains(strings.ToLower(out), "usage") || errOut != "" {
				t.Fatalf("--help: exit %d\nstdout:\n%s\nstderr:\n%s", code, out, errOut)
			}
			if code, out2, errOut := runArgs(with("-h")...); code != 0 || out2 != out || errOut != "" {
				t.Fatalf("-h: exit %d, stdout differs from --help: %v\nstderr:\n%s", code, out2 != out, errOut)
			}
			if code, out2, errOut := runArgs(append([]string{"help"}, path...)...); code != 0 || out2 != out || errOut != "" {
				t.Fatalf("help %s: exit %d, stdout differs from --help: %v\n%s\nstderr:\n%s", strings.Join(path, " "), code, out2 != out, out2, errOut)
			}
			code, out, errOut = runArgs(with("--no-such-flag")...)
			if code != 2 || !strings.Contains(strings.ToLower(errOut), "usage") || out != "" {
				t.Fatalf("unknown flag: exit %d\nstdout:\n%s\nstderr:\n%s", code, out, errOut)
			}
		})
	}
}

func TestUsageErrors(t *testing.T) {
	tests := []struct {
		args []string
		want string
	}{
		{nil, "missing subcommand"},
		{[]string{"nosuch"}, `unknown subcommand "nosuch"`},
		{[]string{"audit"}, "missing subcommand"},
		{[]string{"audit", "nosuch"}, `unknown subcommand "nosuch"`},
		{[]string{"help", "nosuch"}, `unknown help topic "nosuch"`},
		{[]string{"version", "extra"}, "unknown command"},
	}
	for _, tt := range tests {
		t.Run(strings.Join(tt.args, " "), func(t *testing.T) {
			code, out, errOut := runArgs(tt.args...)
			if code != 2 || !strings.Contains(errOut, tt.want) || out != "" {
				t.Fatalf("exit %d\nstdout:\n%s\nstderr:\n%s\nwant exit 2 and %q on stderr", code, out, errOut, tt.want)
			}
		})
	}
}

func TestVersion(t *testing.T) {
	code, out, errOut := runArgs("version")
	if code != 0 || !strings.HasPrefix(out, "ironcurtain ") || !strings.Contains(out, " go1.") || errOut != "" {
		t.Fatalf("version: exit %d, stdout %q, stderr %q", code, out, errOut)
	}
	code, out2, _ := runArgs("--version")
	if code != 0 || out2 != out {
		t.Fatalf("--version: exit %d, %q; want %q", code, out2, out)
	}
	code, out, _ = runArgs("version", "--json")
	if code != 0 || !strings.Contains(out, `"version":`) || !strings.Contains(out, `"go": "go1.`) {
		t.Fatalf("version --json: exit %d, %q", code, out)
	}
	code, out, _ = runArgs("completion", "bash")
	if code != 0 || !strings.Contains(out, "bash completion") {
		t.Fatalf("completion bash: exit %d, %.200q", code, out)
	}
}
