package main

import (
	"context"

	"ironcurtain.dev/gateway/internal/cli/opscli"
)

func init() {
	commands["migrate"] = command{summary: "apply or revert database migrations (up, down, status, force)", run: runMigrate}
}

func runMigrate(ctx context.Context, e env) int {
	return opscli.Migrate(ctx, e.args, opscli.Env{Getenv: e.getenv, Stdout: e.stdout, Stderr: e.stderr})
}
