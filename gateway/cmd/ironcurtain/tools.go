package main

import (
	"context"

	"ironcurtain.dev/gateway/internal/mcphub/builtin"
)

func init() {
	commands["tools"] = command{summary: "list the built-in tools or write tool-annotations.json", run: runTools}
}

func runTools(_ context.Context, e env) int {
	return builtin.Run(e.args, e.stdout, e.stderr)
}
