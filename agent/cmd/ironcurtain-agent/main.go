// Command ironcurtain-agent is the credential-less agent runner: it asks a
// model (through the gateway's relay) for TypeScript, runs it in the
// code-mode sandbox whose tool stubs call the gateway over MCP, and stops
// on an answer or a budget.
//
//	ironcurtain-agent run "task"   one task; the answer goes to stdout
//	ironcurtain-agent chat         interactive session
//	ironcurtain-agent doctor       checks the container's isolation
//
// Exit codes: 0 finished, 1 failed, 2 usage error, 3 a budget ended the run.
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

// Exit codes.
const (
	exitOK     = 0
	exitFailed = 1
	exitUsage  = 2
	exitBudget = 3
)

// env is everything a command may touch of the process.
type env struct {
	args    []string
	getenv  func(string) string
	environ func() []string
	stdin   io.Reader
	stdout  io.Writer
	stderr  io.Writer
}

type command struct {
	summary string
	run     func(ctx context.Context, e env) int
}

var commands = map[string]command{}

func main() {
	if err := applyTokenFile(os.Getenv, os.Setenv); err != nil {
		fmt.Fprintf(os.Stderr, "ironcurtain-agent: %v\n", err)
		os.Exit(exitUsage)
	}
	ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt, syscall.SIGTERM)
	code := run(ctx, env{
		args:    os.Args[1:],
		getenv:  os.Getenv,
		environ: os.Environ,
		stdin:   os.Stdin,
		stdout:  os.Stdout,
		stderr:  os.Stderr,
	})
	stop()
	os.Exit(code)
}

func run(ctx context.Context, e env) int {
	if len(e.args) == 0 || e.args[0] == "help" || e.args[0] == "-h" || e.args[0] == "--help" {
		usage(e.stderr)
		if len(e.args) == 0 {
			return exitUsage
		}
		return exitOK
	}
	cmd, ok := commands[e.args[0]]
	if !ok {
		fmt.Fprintf(e.stderr, "ironcurtain-agent: unknown command %q\n\n", e.args[0])
		usage(e.stderr)
		return exitUsage
	}
	e.args = e.args[1:]
	return cmd.run(ctx, e)
}

func usage(w io.Writer) {
	fmt.Fprintln(w, "usage: ironcurtain-agent <command> [flags]")
	fmt.Fprintln(w)
	names := make([]string, 0, len(commands))
	for n := range commands {
		names = append(names, n)
	}
	sort.Strings(names)
	for _, n := range names {
		fmt.Fprintf(w, "  %-8s %s\n", n, commands[n].summary)
	}
	fmt.Fprintln(w)
	fmt.Fprintln(w, "exit codes: 0 finished, 1 failed, 2 usage error, 3 a budget ended the run")
	fmt.Fprintln(w, "run `ironcurtain-agent <command> -h` for its flags; see docs/agent.md")
}
