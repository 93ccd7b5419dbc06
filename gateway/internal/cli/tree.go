package cli

import (
	"context"
	"fmt"
	"io"
	"strings"

	"github.com/spf13/cobra"

	"ironcurtain.dev/gateway/clikit"
)

// leaf returns a command that parses its own flags (clikit.Leaf) with run.
func leaf(e Env, use, short string, run RunFunc) *cobra.Command {
	return clikit.Leaf(use, short, func(ctx context.Context, args []string) int {
		sub := e
		sub.Args = args
		return run(ctx, sub)
	}, func(ctx context.Context, out io.Writer) {
		// The leaf's flag set prints its usage for --help (to stderr, as
		// its errors); here it is the answer, so both go to stdout.
		run(ctx, Env{Args: []string{"--help"}, Getenv: e.Getenv, Stdin: strings.NewReader(""), Stdout: out, Stderr: out})
	})
}

// group returns a command that only holds subcommands: without one, or with
// an unknown one, it is bad usage (exit 2, usage on stderr).
func group(use, short string, subs ...*cobra.Command) *cobra.Command {
	c := &cobra.Command{
		Use:   use,
		Short: short,
		Args:  cobra.ArbitraryArgs,
		RunE: func(cmd *cobra.Command, args []string) error {
			if len(args) == 0 {
				return fmt.Errorf("missing subcommand")
			}
			if args[0] == "help" {
				return cmd.Help()
			}
			msg := fmt.Sprintf("unknown subcommand %q", args[0])
			if s := cmd.SuggestionsFor(args[0]); len(s) > 0 {
				msg += fmt.Sprintf(" (did you mean %s?)", strings.Join(s, ", "))
			}
			return fmt.Errorf("%s", msg)
		},
	}
	c.AddCommand(subs...)
	return c
}

// sub adapts a command implementation that dispatches on its first
// argument (opscli, policycli, the tools and servers commands) to one of
// its subcommands: the leaf's arguments follow the subcommand name.
func sub(name string, run RunFunc) RunFunc {
	return func(ctx context.Context, e Env) int {
		e.Args = append([]string{name}, e.Args...)
		return run(ctx, e)
	}
}
