package main

import (
	"context"
	"io"

	"github.com/spf13/cobra"

	"ironcurtain.dev/gateway/clikit"
)

// The cobra plumbing is the gateway's (gateway/clikit): -h/--help and
// `help <command>` print usage to stdout (exit 0); bad usage prints the
// error and usage to stderr (exit 2); the commands parse their own flags
// (Go's flag package) and keep their exit codes.

// leaf returns a command that parses its own flags (clikit.Leaf); a help
// flag before any "--" prints the usage its flag set prints for -h, on
// stdout.
func leaf(e env, use, short string, run func(context.Context, env) int, aliases ...string) *cobra.Command {
	c := clikit.Leaf(use, short, func(ctx context.Context, args []string) int {
		sub := e
		sub.args = args
		return run(ctx, sub)
	}, func(_ context.Context, out io.Writer) {
		h := e
		h.args = []string{"-h"}
		h.stdout, h.stderr = out, out
		run(context.Background(), h)
	})
	c.Aliases = aliases
	return c
}
