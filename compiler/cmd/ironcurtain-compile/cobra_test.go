package main

import (
	"strings"
	"testing"

	"github.com/spf13/cobra"
)

// Every command: --help and -h print usage on stdout and exit 0, `help
// <command>` prints the same, and an unknown flag prints the error and
// usage on stderr and exits 2.
func TestEveryCommandHelpAndUsage(t *testing.T) {
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
	walk(newRoot(env{stdout: &strings.Builder{}, stderr: &strings.Builder{}}), nil)
	if len(paths) < 12 {
		t.Fatalf("%d commands, want the whole tree", len(paths))
	}
	for _, path := range paths {
		t.Run(strings.Join(append([]string{"ironcurtain-compile"}, path...), " "), func(t *testing.T) {
			with := func(extra ...string) []string { return append(append([]string{}, path...), extra...) }
			code, out, errOut := invoke(t, nil, with("--help")...)
			if code != 0 || !strings.Contains(strings.ToLower(out), "usage") || errOut != "" {
				t.Fatalf("--help: exit %d\nstdout:\n%s\nstderr:\n%s", code, out, errOut)
			}
			if code, out2, errOut := invoke(t, nil, with("-h")...); code != 0 || out2 != out || errOut != "" {
				t.Fatalf("-h: exit %d, stdout differs from --help: %v\nstderr:\n%s", code, out2 != out, errOut)
			}
			if code, out2, errOut := invoke(t, nil, append([]string{"help"}, path...)...); code != 0 || out2 != out || errOut != "" {
				t.Fatalf("help: exit %d, stdout differs from --help: %v\nstderr:\n%s", code, out2 != out, errOut)
			}
			code, out, errOut = invoke(t, nil, with("--no-such-flag")...)
			if code != 2 || !strings.Contains(strings.ToLower(errOut), "usage") || out != "" {
				t.Fatalf("unknown flag: exit %d\nstdout:\n%s\nstderr:\n%s", code, out, errOut)
			}
		})
	}
}

func TestVersion(t *testing.T) {
	code, out, errOut := invoke(t, nil, "version")
	if code != 0 || !strings.HasPrefix(out, "ironcurtain-compile ") || !strings.Contains(out, " go1.") || errOut != "" {
		t.Fatalf("version: exit %d, stdout %q, stderr %q", code, out, errOut)
	}
	if code, out2, _ := invoke(t, nil, "--version"); code != 0 || out2 != out {
		t.Fatalf("--version: exit %d, %q; want %q", code, out2, out)
	}
	if code, out, _ := invoke(t, nil, "version", "--json"); code != 0 || !strings.Contains(out, `"go": "go1.`) {
		t.Fatalf("version --json: exit %d, %q", code, out)
	}
	if code, out, _ := invoke(t, nil, "help", "nosuch"); code != 2 || out != "" {
		t.Fatalf("help nosuch: exit %d, %q", code, out)
	}
}
