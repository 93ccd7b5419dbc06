package main

import (
	"context"
	"runtime/debug"

	"ironcurtain.dev/gateway/internal/cli/opscli"
)

func init() {
	commands["audit"] = command{summary: "verify the audit hash chain, query or tail tool calls", run: runAudit}
}

// auditMemoryLimit is the soft heap limit of `ironcurtain audit`: verify
// walks rows one at a time, but rows stored whole by old gateways can be
// 4 MiB each, and the collector otherwise lets their garbage pile up.
const auditMemoryLimit = 64 << 20

func runAudit(ctx context.Context, e env) int {
	debug.SetMemoryLimit(auditMemoryLimit)
	return opscli.Audit(ctx, e.args, opscli.Env{Getenv: e.getenv, Stdout: e.stdout, Stderr: e.stderr})
}
