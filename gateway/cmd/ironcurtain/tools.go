package main

import (
	"context"

	"ironcurtain.dev/gateway/internal/servers/builtin"
)

func init() {
	commands["tools"] = command{summary: "list the built-in tools, write tool-annotations.json, or pin external tools", run: runTools}
}

func runTools(ctx context.Context, e env) int {
	if len(e.args) > 0 && e.args[0] == "pin" {
		e.args = e.args[1:]
		return runToolsPin(ctx, e) // tools_pin.go
	}
	return builtin.Run(e.args, e.stdout, e.stderr)
}
