// Package cli is the ironcurtain command line: the command table
// (commands.go, every command in one place), the commands that have no
// package of their own (healthcheck, launcher, run, servers, tools) and
// the command groups; the cobra plumbing that gives every command the same
// conventions, and the version command, are gateway/clikit's (shared with
// ironcurtain-compile):
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
	"io"

	"github.com/spf13/cobra"

	"ironcurtain.dev/gateway/clikit"
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
	ExitOK     = clikit.ExitOK
	ExitFailed = clikit.ExitFailed
	ExitUsage  = clikit.ExitUsage
)

// Main runs the ironcurtain command line with e.Args (without the program
// name) and returns the exit code.
func Main(ctx context.Context, e Env, w Wiring) int {
	return Execute(ctx, NewRoot(e, w), e)
}

// Execute runs root with e.Args and returns the exit code. It is shared by
// the tests, which walk the tree NewRoot builds.
func Execute(ctx context.Context, root *cobra.Command, e Env) int {
	root.SetIn(e.Stdin)
	root.SetOut(e.Stdout)
	root.SetErr(e.Stderr)
	return clikit.Execute(ctx, root, e.Args, e.Stderr)
}
