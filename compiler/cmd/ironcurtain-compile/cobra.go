package main

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"strings"

	"github.com/spf13/cobra"

	"ironcurtain.dev/gateway/buildinfo"
)

// The cobra plumbing, as in the gateway's internal/cli: -h/--help and
// `help <command>` print usage to stdout (exit 0); bad usage prints the
// error and usage to stderr (exit 2); the commands parse their own flags
// (Go's flag package) and keep their exit codes.

// exitCode is the status of a command that has already reported on its
// outcome.
type exitCode int

func (c exitCode) Error() string { return fmt.Sprintf("exit status %d", int(c)) }

// execute runs root with e.args and returns the exit code. Every RunE
// reports its own failures and returns an exitCode, so any other error is
// cobra's or the root's: bad usage.
func execute(ctx context.Context, root *cobra.Command, e env) int {
	root.SetArgs(e.args)
	root.SilenceErrors = true
	root.SilenceUsage = true
	cmd, err := root.ExecuteContextC(ctx)
	var code exitCode
	switch {
	case err == nil:
		return exitOK
	case errors.As(err, &code):
		return int(code)
	}
	fmt.Fprintf(e.stderr, "%s: %v\n", cmd.CommandPath(), err)
	fmt.Fprint(e.stderr, cmd.UsageString())
	return exitUsage
}

// leaf returns a command that parses its own flags; a help flag before any
// "--" prints the usage its flag set prints for -h, on stdout.
func leaf(e env, use, short string, run func(context.Context, env) int, aliases ...string) *cobra.Command {
	c := &cobra.Command{
		Use:                use,
		Short:              short,
		Aliases:            aliases,
		DisableFlagParsing: true,
		Args:               cobra.ArbitraryArgs,
		RunE: func(cmd *cobra.Command, args []string) error {
			if wantsHelp(args) {
				return cmd.Help()
			}
			sub := e
			sub.args = args
			if code := run(cmd.Context(), sub); code != exitOK {
				return exitCode(code)
			}
			return nil
		},
	}
	c.SetHelpFunc(func(cmd *cobra.Command, _ []string) {
		h := e
		h.args = []string{"-h"}
		h.stdout, h.stderr = cmd.OutOrStdout(), cmd.OutOrStdout()
		run(context.Background(), h)
	})
	return c
}

// wantsHelp reports whether args ask for help as Go's flag package reads
// them: -h, -help, --h or --help before a "--".
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

// versionCmd prints the same line as --version, or JSON.
func versionCmd() *cobra.Command {
	var asJSON bool
	c := &cobra.Command{
		Use:   "version",
		Short: "print the build: version, VCS revision, Go version",
		Args:  cobra.NoArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			return printVersion(cmd.OutOrStdout(), cmd.Root().Name(), asJSON)
		},
	}
	c.Flags().BoolVar(&asJSON, "json", false, "print JSON: version, revision, modified, go")
	return c
}

func printVersion(w io.Writer, name string, asJSON bool) error {
	info := buildinfo.Get()
	if !asJSON {
		fmt.Fprintf(w, "%s %s\n", name, info)
		return nil
	}
	b, err := json.MarshalIndent(info, "", "  ")
	if err != nil {
		return exitCode(exitFailed)
	}
	fmt.Fprintf(w, "%s\n", b)
	return nil
}

// helpCmd replaces cobra's help command, which answers an unknown topic
// with exit 0.
func helpCmd() *cobra.Command {
	return &cobra.Command{
		Use:   "help [command]",
		Short: "Help about any command",
		Args:  cobra.ArbitraryArgs,
		RunE: func(c *cobra.Command, args []string) error {
			cmd, rest, err := c.Root().Find(args)
			if err != nil || cmd == nil || len(rest) > 0 {
				return fmt.Errorf("unknown help topic %q", strings.Join(args, " "))
			}
			cmd.InitDefaultHelpFlag()
			cmd.InitDefaultVersionFlag()
			return cmd.Help()
		},
	}
}
