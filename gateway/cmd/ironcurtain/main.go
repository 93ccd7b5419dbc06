// Command ironcurtain is the gateway and its operator tools: `serve` runs the
// gateway; the other commands are the operator CLI. The command table is
// ironcurtain.dev/gateway/internal/cli (commands.go); the serve wiring is
// this package.
package main

import (
	"context"
	"io"
	"os"
	"os/signal"
	"syscall"

	"ironcurtain.dev/gateway/internal/cli"
)

// env is what the serve command may read from its environment.
type env struct {
	args   []string
	getenv func(string) string
	stdin  io.Reader
	stdout io.Writer
	stderr io.Writer
}

func main() {
	ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt, syscall.SIGTERM)
	code := run(ctx, env{args: os.Args[1:], getenv: os.Getenv, stdin: os.Stdin, stdout: os.Stdout, stderr: os.Stderr})
	stop()
	os.Exit(code)
}

func run(ctx context.Context, e env) int {
	return cli.Main(ctx, cli.Env{Args: e.args, Getenv: e.getenv, Stdin: e.stdin, Stdout: e.stdout, Stderr: e.stderr}, wiring)
}

// wiring is what the command line needs from the gateway's wiring.
var wiring = cli.Wiring{
	Serve: func(ctx context.Context, e cli.Env) int {
		return runServe(ctx, env{args: e.Args, getenv: e.Getenv, stdin: e.Stdin, stdout: e.Stdout, stderr: e.Stderr})
	},
	ListExternal: listExternal, // tools_pin.go
}
