// Command ironcurtain is the gateway and its operator tools: `serve` runs the
// gateway; `policy`, `migrate`, `audit` and `escalations` are the operator CLI.
package main

import (
	"context"
	"fmt"
	"io"
	"os"
	"os/signal"
	"sort"
	"syscall"
)

// env is what a command may read from its environment.
type env struct {
	args   []string
	getenv func(string) string
	stdin  io.Reader
	stdout io.Writer
	stderr io.Writer
}

// command is one subcommand. run returns the process exit code.
type command struct {
	summary string
	run     func(ctx context.Context, e env) int
}

// commands is filled by the init functions of the files in this package,
// one file per subcommand.
var commands = map[string]command{}

func main() {
	ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt, syscall.SIGTERM)
	code := run(ctx, env{args: os.Args[1:], getenv: os.Getenv, stdin: os.Stdin, stdout: os.Stdout, stderr: os.Stderr})
	stop()
	os.Exit(code)
}

func run(ctx context.Context, e env) int {
	if len(e.args) == 0 || e.args[0] == "help" || e.args[0] == "-h" || e.args[0] == "--help" {
		usage(e.stdout)
		if len(e.args) == 0 {
			return 2
		}
		return 0
	}
	c, ok := commands[e.args[0]]
	if !ok {
		fmt.Fprintf(e.stderr, "ironcurtain: unknown command %q\n", e.args[0])
		usage(e.stderr)
		return 2
	}
	sub := e
	sub.args = e.args[1:]
	return c.run(ctx, sub)
}

func usage(w io.Writer) {
	fmt.Fprintln(w, "usage: ironcurtain <command> [flags]")
	fmt.Fprintln(w, "\ncommands:")
	names := make([]string, 0, len(commands))
	for n := range commands {
		names = append(names, n)
	}
	sort.Strings(names)
	for _, n := range names {
		fmt.Fprintf(w, "  %-12s %s\n", n, commands[n].summary)
	}
}
