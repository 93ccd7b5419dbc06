package main

import (
	"context"

	"ironcurtain.dev/gateway/internal/cli/opscli"
)

func init() {
	commands["sessions"] = command{summary: "create (mint a per-run agent token), list, show or revoke agent sessions (through the ops API)", run: runSessions}
}

func runSessions(ctx context.Context, e env) int {
	return opscli.Sessions(ctx, e.args, opscli.Env{Getenv: e.getenv, Stdout: e.stdout, Stderr: e.stderr})
}
