package clikit

import (
	"context"
	"io"
	"strings"
	"testing"

	"github.com/spf13/cobra"
)

func TestWantsHelp(t *testing.T) {
	for args, want := range map[string]bool{
		"-h": true, "--help": true, "-help": true, "--h": true,
		"x -h": true, "": false, "-- -h": false, "-hx": false,
	} {
		if got := WantsHelp(strings.Fields(args)); got != want {
			t.Errorf("WantsHelp(%q) = %v, want %v", args, got, want)
		}
	}
}

// A leaf's exit code passes through Execute; its help is what help prints,
// on stdout; an unknown command or help topic is bad usage on stderr.
func TestExecuteLeafAndRoot(t *testing.T) {
	root := func(stdout, stderr io.Writer) *cobra.Command {
		r := &cobra.Command{Use: "tool", Args: cobra.NoArgs, RunE: func(*cobra.Command, []string) error { return nil }}
		r.AddCommand(Leaf("fail", "exits 3",
			func(_ context.Context, args []string) int { return 3 + len(args) },
			func(_ context.Context, out io.Writer) { io.WriteString(out, "usage of fail\n") }))
		r.SetOut(stdout)
		r.SetErr(stderr)
		Finish(r)
		return r
	}
	run := func(args ...string) (int, string, string) {
		var out, errOut strings.Builder
		return Execute(context.Background(), root(&out, &errOut), args, &errOut), out.String(), errOut.String()
	}
	if code, _, _ := run("fail", "a"); code != 4 {
		t.Errorf("fail a: exit %d, want 4", code)
	}
	for _, args := range [][]string{{"fail", "--help"}, {"help", "fail"}} {
		if code, out, errOut := run(args...); code != ExitOK || out != "usage of fail\n" || errOut != "" {
			t.Errorf("%v: exit %d, stdout %q, stderr %q", args, code, out, errOut)
		}
	}
	for _, args := range [][]string{{"nosuch"}, {"help", "nosuch"}, {"version", "extra"}} {
		if code, out, errOut := run(args...); code != ExitUsage || out != "" || !strings.Contains(errOut, "Usage") {
			t.Errorf("%v: exit %d, stdout %q, stderr %q", args, code, out, errOut)
		}
	}
	if code, out, _ := run("version"); code != ExitOK || !strings.HasPrefix(out, "tool ") {
		t.Errorf("version: exit %d, %q", code, out)
	}
}
