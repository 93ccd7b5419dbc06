// Command ironcurtain-compile turns a constitution into verified policy
// artifacts for the IronCurtain gateway.
//
//	ironcurtain-compile annotate-tools   classify external MCP servers' tool arguments
//	ironcurtain-compile compile-policy   constitution -> rules, lists, scenarios, verification
//	ironcurtain-compile resolve-lists    (re)resolve dynamic lists, keeping manual edits
//	ironcurtain-compile verify           run scenarios through the engine (no model)
//	ironcurtain-compile policy-diff      rules and decisions that differ between two policies
//
// Exit codes: 0 success (compile-policy: verified; policy-diff: no
// difference), 1 not verified / differences found / scenarios fail, 2 usage
// or configuration error, 3 runtime failure (model unreachable, I/O).
package main

import (
	"context"
	"fmt"
	"io"
	"os"
	"os/signal"
	"sort"
	"syscall"
	"time"
)

// Exit codes.
const (
	exitOK      = 0
	exitFailed  = 1
	exitUsage   = 2
	exitRuntime = 3
)

// env is everything a command may touch of the process.
type env struct {
	args   []string
	getenv func(string) string
	stdout io.Writer
	stderr io.Writer
	now    func() time.Time
}

type command struct {
	summary string
	run     func(ctx context.Context, e env) int
}

var commands = map[string]command{}

func main() {
	ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt, syscall.SIGTERM)
	code := run(ctx, env{args: os.Args[1:], getenv: os.Getenv, stdout: os.Stdout, stderr: os.Stderr, now: time.Now})
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
	name := e.args[0]
	if name == "diff" {
		name = "policy-diff"
	}
	c, ok := commands[name]
	if !ok {
		fmt.Fprintf(e.stderr, "ironcurtain-compile: unknown command %q\n\n", e.args[0])
		usage(e.stderr)
		return exitUsage
	}
	e.args = e.args[1:]
	return c.run(ctx, e)
}

func usage(w io.Writer) {
	fmt.Fprintln(w, "usage: ironcurtain-compile <command> [flags]   (<command> -h for its flags)")
	fmt.Fprintln(w, "\ncommands:")
	names := make([]string, 0, len(commands))
	for n := range commands {
		names = append(names, n)
	}
	sort.Strings(names)
	for _, n := range names {
		fmt.Fprintf(w, "  %-15s %s\n", n, commands[n].summary)
	}
	fmt.Fprintln(w, "\nexit codes: 0 ok/verified, 1 not verified or differences, 2 usage or configuration error, 3 runtime failure")
}
