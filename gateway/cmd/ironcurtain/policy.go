package main

import (
	"context"

	"ironcurtain.dev/gateway/internal/cli/policycli"
)

func init() {
	commands["policy"] = command{summary: "check policy artifacts or evaluate a tool call", run: runPolicy}
}

func runPolicy(ctx context.Context, e env) int {
	return policycli.Run(ctx, e.args, policycli.Env{Getenv: e.getenv, Stdin: e.stdin, Stdout: e.stdout, Stderr: e.stderr})
}
