package main

import (
	"context"

	"ironcurtain.dev/gateway/internal/cli/opscli"
)

func init() {
	commands["escalations"] = command{summary: "list, show, approve or deny escalations (through the ops API)", run: runEscalations}
}

func runEscalations(ctx context.Context, e env) int {
	return opscli.Escalations(ctx, e.args, opscli.Env{Getenv: e.getenv, Stdout: e.stdout, Stderr: e.stderr})
}
