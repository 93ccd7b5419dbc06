package cli

import (
	"context"
	"fmt"
	"strings"

	"github.com/spf13/cobra"
)

// leaf returns a command that parses its own flags: cobra hands it every
// argument untouched, except that a help flag (-h, -help, --help before any
// "--") prints the command's own usage to stdout and exits 0. The usage is
// what run prints for --help, so `help <command>` shows the same text.
func leaf(e Env, use, short string, run RunFunc) *cobra.Command {
	c := &cobra.Command{
		Use:                use,
		Short:              short,
		DisableFlagParsing: true,
		Args:               cobra.ArbitraryArgs,
		RunE: func(cmd *cobra.Command, args []string) error {
			if wantsHelp(args) {
				return cmd.Help()
			}
			sub := e
			sub.Args = args
			return exit(run(cmd.Context(), sub))
		},
	}
	c.SetHelpFunc(func(cmd *cobra.Command, _ []string) {
		ctx := cmd.Context()
		if ctx == nil {
			ctx = context.Background()
		}
		// The leaf's flag set prints its usage for --help (to stderr, as
		// its errors); here it is the answer, so both go to stdout.
		out := cmd.OutOrStdout()
		run(ctx, Env{Args: []string{"--help"}, Getenv: e.Getenv, Stdin: strings.NewReader(""), Stdout: out, Stderr: out})
	})
	return c
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

// wantsHelp reports whether args ask for help the way Go's flag package
// understands it: -h, -help, --h or --help before a "--".
func wantsHelp(args []string) bool {
	for _, a := range args {
		switch a {
		case "--":
			return false
		case "-h", "-help", "--h", "--help":
			return true
		}
	}
	return false
}
