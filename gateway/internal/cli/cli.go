// Package cli is the ironcurtain command line: the command table
// (commands.go, every command in one place), the commands that have no
// package of their own (healthcheck, launcher, run, servers, tools,
// version) and the cobra plumbing that gives every command the same
// conventions:
//
//   - -h/--help (or `ironcurtain help <command>`) prints usage to stdout, exit 0;
//   - bad usage (unknown flag or command, missing argument) prints the error
//     and usage to stderr, exit 2;
//   - a failed operation exits 1, unless a command documents its own codes
//     (policy replay, audit verify).
//
// The leaf commands keep their own flag parsing (Go's flag package, flags
// anywhere among the arguments, -flag and --flag alike), so their flags,
// output and exit codes are what they were before the cobra tree; the
// operator commands live in the subpackages opscli and policycli.
package cli

import (
	"context"
	"errors"
	"fmt"
	"io"

	"github.com/spf13/cobra"
)

// Env is what a command may use from its process. Args are the command's
// own arguments (without the command path).
type Env struct {
	Args   []string
	Getenv func(string) string
	Stdin  io.Reader
	Stdout io.Writer
	Stderr io.Writer
}

// RunFunc runs a command and returns its exit code; it reports its own
// errors on e.Stderr.
type RunFunc func(ctx context.Context, e Env) int

// Exit codes shared by every command.
const (
	ExitOK     = 0
	ExitFailed = 1
	ExitUsage  = 2
)

// Main runs the ironcurtain command line with e.Args (without the program
// name) and returns the exit code.
func Main(ctx context.Context, e Env, w Wiring) int {
	return Execute(ctx, NewRoot(e, w), e)
}

// Execute runs root with e.Args and returns the exit code. It is shared by
// the tests, which walk the tree NewRoot builds.
func Execute(ctx context.Context, root *cobra.Command, e Env) int {
	root.SetArgs(e.Args)
	root.SetIn(e.Stdin)
	root.SetOut(e.Stdout)
	root.SetErr(e.Stderr)
	root.SilenceErrors = true
	root.SilenceUsage = true
	cmd, err := root.ExecuteContextC(ctx)
	return exitStatus(cmd, err, e.Stderr)
}

// exitCode is the status of a command that has already reported on its
// outcome; Execute exits with it and prints nothing more.
type exitCode int

func (c exitCode) Error() string { return fmt.Sprintf("exit status %d", int(c)) }

// exit turns a command's exit code into the error RunE returns.
func exit(code int) error {
	if code == ExitOK {
		return nil
	}
	return exitCode(code)
}

// exitStatus maps the error of a command run to its exit code. Every RunE
// of the tree reports operation failures itself and returns an exitCode, so
// any other error comes from cobra or a command group (an unknown flag or
// command, a wrong number of arguments): bad usage.
func exitStatus(cmd *cobra.Command, err error, stderr io.Writer) int {
	var code exitCode
	switch {
	case err == nil:
		return ExitOK
	case errors.As(err, &code):
		return int(code)
	}
	if cmd == nil {
		fmt.Fprintf(stderr, "ironcurtain: %v\n", err)
		return ExitUsage
	}
	fmt.Fprintf(stderr, "%s: %v\n", cmd.CommandPath(), err)
	fmt.Fprint(stderr, cmd.UsageString())
	return ExitUsage
}
