// Package clikit is the cobra plumbing the ironcurtain and
// ironcurtain-compile command lines share, so that both follow the same
// conventions:
//
//   - -h/--help (or `<binary> help <command>`) prints usage to stdout, exit 0;
//   - bad usage (unknown flag or command, missing argument) prints the error
//     and usage to stderr, exit 2;
//   - a command that parses its own flags (Go's flag package) keeps its
//     flags, output and exit codes: it reports its own failures and its exit
//     code passes through unchanged;
//   - `version` and --version print the build (gateway/buildinfo).
package clikit

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

// Exit codes shared by every command.
const (
	ExitOK     = 0
	ExitFailed = 1
	ExitUsage  = 2
)

// ExitCode is the status of a command that has already reported on its
// outcome; Execute exits with it and prints nothing more.
type ExitCode int

func (c ExitCode) Error() string { return fmt.Sprintf("exit status %d", int(c)) }

// Exit turns a command's exit code into the error RunE returns.
func Exit(code int) error {
	if code == ExitOK {
		return nil
	}
	return ExitCode(code)
}

// Execute runs root with args and returns the exit code. Every RunE reports
// operation failures itself and returns an ExitCode, so any other error
// comes from cobra or a command group (an unknown flag or command, a wrong
// number of arguments): bad usage, reported on stderr with the usage.
func Execute(ctx context.Context, root *cobra.Command, args []string, stderr io.Writer) int {
	root.SetArgs(args)
	root.SilenceErrors = true
	root.SilenceUsage = true
	cmd, err := root.ExecuteContextC(ctx)
	var code ExitCode
	switch {
	case err == nil:
		return ExitOK
	case errors.As(err, &code):
		return int(code)
	}
	if cmd == nil {
		fmt.Fprintf(stderr, "%s: %v\n", root.Name(), err)
		return ExitUsage
	}
	fmt.Fprintf(stderr, "%s: %v\n", cmd.CommandPath(), err)
	fmt.Fprint(stderr, cmd.UsageString())
	return ExitUsage
}

// Leaf returns a command that parses its own flags: cobra hands run every
// argument untouched, except that a help flag (-h, -help, --help before any
// "--") prints the command's own usage to stdout and exits 0. help prints
// that usage to out (the leaf's flag set prints it for --help), so
// `help <command>` shows the same text.
func Leaf(use, short string, run func(ctx context.Context, args []string) int, help func(ctx context.Context, out io.Writer)) *cobra.Command {
	c := &cobra.Command{
		Use:                use,
		Short:              short,
		DisableFlagParsing: true,
		Args:               cobra.ArbitraryArgs,
		RunE: func(cmd *cobra.Command, args []string) error {
			if WantsHelp(args) {
				return cmd.Help()
			}
			return Exit(run(cmd.Context(), args))
		},
	}
	c.SetHelpFunc(func(cmd *cobra.Command, _ []string) {
		ctx := cmd.Context()
		if ctx == nil {
			ctx = context.Background()
		}
		help(ctx, cmd.OutOrStdout())
	})
	return c
}

// WantsHelp reports whether args ask for help the way Go's flag package
// understands it: -h, -help, --h or --help before a "--".
func WantsHelp(args []string) bool {
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

// Finish completes a root command whose subcommands are added and whose
// output writers are set (the completion command keeps the writer it is
// built with): it adds the version command, --version, the strict help
// command and the completion command.
func Finish(root *cobra.Command) {
	root.AddCommand(versionCmd())
	root.Version = buildinfo.Get().String()
	root.SetVersionTemplate("{{.Name}} {{.Version}}\n")
	root.SetHelpCommand(helpCmd())
	root.InitDefaultHelpCmd()
	root.InitDefaultCompletionCmd()
}

// versionCmd is `<binary> version`: the same line as --version, or the
// build information as JSON.
func versionCmd() *cobra.Command {
	var asJSON bool
	c := &cobra.Command{
		Use:   "version",
		Short: "print the build: version, VCS revision, Go version",
		Args:  cobra.NoArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			info := buildinfo.Get()
			if asJSON {
				b, err := json.MarshalIndent(info, "", "  ")
				if err != nil {
					return Exit(ExitFailed)
				}
				fmt.Fprintf(cmd.OutOrStdout(), "%s\n", b)
				return nil
			}
			fmt.Fprintf(cmd.OutOrStdout(), "%s %s\n", cmd.Root().Name(), info)
			return nil
		},
	}
	c.Flags().BoolVar(&asJSON, "json", false, "print JSON: version, revision, modified, go")
	return c
}

// helpCmd replaces cobra's help command, which answers an unknown topic
// with exit 0: here that is bad usage like any unknown command.
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
			cmd.InitDefaultHelpFlag() // as cobra's own help command does
			cmd.InitDefaultVersionFlag()
			return cmd.Help()
		},
	}
}
