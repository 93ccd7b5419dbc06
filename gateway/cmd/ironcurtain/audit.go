package main

import (
	"context"

	"ironcurtain.dev/gateway/internal/opsapi/opscli"
)

func init() {
	commands["audit"] = command{summary: "verify the audit hash chain, query or tail tool calls", run: runAudit}
}

func runAudit(ctx context.Context, e env) int {
	return opscli.Audit(ctx, e.args, opscli.Env{Getenv: e.getenv, Stdout: e.stdout, Stderr: e.stderr})
}
