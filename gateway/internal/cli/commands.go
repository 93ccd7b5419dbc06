package cli

import (
	"context"
	"runtime/debug"

	"github.com/spf13/cobra"

	"ironcurtain.dev/gateway/clikit"
	"ironcurtain.dev/gateway/internal/cli/opscli"
	"ironcurtain.dev/gateway/internal/cli/policycli"
)

// DefaultConfigPath is the gateway.yaml of serve, healthcheck and tools pin.
const DefaultConfigPath = "/etc/ironcurtain/gateway.yaml"

// Wiring is what the commands need from the gateway's wiring, which lives
// with the binary (gateway/cmd/ironcurtain).
type Wiring struct {
	// Serve runs `ironcurtain serve`.
	Serve RunFunc
	// ListExternal starts one external server as the gateway would and
	// lists its tools (`ironcurtain tools pin`).
	ListExternal ToolLister
}

// NewRoot returns the whole command tree of ironcurtain: every command and
// subcommand is listed here.
func NewRoot(e Env, w Wiring) *cobra.Command {
	root := group("ironcurtain", "IronCurtain: the security gateway for AI agents, and its operator tools",
		leaf(e, "serve", "run the gateway: agent API (/mcp, /llm/), egress proxy, ops API", w.Serve),
		leaf(e, "healthcheck", "probe the running gateway: agent API /healthz and ops /readyz (container HEALTHCHECK)", runHealthcheck),
		leaf(e, "launcher", "run the container launcher for image: servers (holds the Docker socket)", runLauncher),
		leaf(e, "run", "run an agent on a task in its own session: its escalations answered here, cleaned up at the end (workstation; Docker)", runRun),
		group("policy", "check policy artifacts, evaluate a tool call, reload or replay the policy",
			leaf(e, "check", "check the policy artifacts of a directory", sub("check", runPolicy)),
			leaf(e, "eval", "evaluate one call (or a batch of calls) as the gateway would", sub("eval", runPolicy)),
			leaf(e, "reload", "ask the running gateway to load, validate and swap its policy (ops API)", sub("reload", runPolicy)),
			leaf(e, "replay", "re-evaluate recorded calls under a candidate policy (Postgres)", sub("replay", runPolicy)),
		),
		group("migrate", "apply or revert database migrations (up, down, status, force)",
			leaf(e, "up", "apply the migrations this binary knows (--to N: up to N)", sub("up", ops(opscli.Migrate))),
			leaf(e, "down", "revert migrations (--steps N, default 1)", sub("down", ops(opscli.Migrate))),
			leaf(e, "status", "print the schema version", sub("status", ops(opscli.Migrate))),
			leaf(e, "force N", "set the schema version without migrating (after a failed migration)", sub("force", ops(opscli.Migrate))),
		),
		group("audit", "verify the audit hash chain, query or tail tool calls (Postgres)",
			leaf(e, "verify", "verify the audit hash chain (exit 1 when broken)", sub("verify", runAudit)),
			leaf(e, "query", "print recorded tool calls", sub("query", runAudit)),
			leaf(e, "tail", "print recorded tool calls as they come", sub("tail", runAudit)),
		),
		group("escalations", "list, show, approve or deny escalations (through the ops API)",
			leaf(e, "list", "list escalations", sub("list", ops(opscli.Escalations))),
			leaf(e, "show ID", "show one escalation", sub("show", ops(opscli.Escalations))),
			leaf(e, "approve ID", "approve an escalation (--similar: and the calls like it)", sub("approve", ops(opscli.Escalations))),
			leaf(e, "deny ID", "deny an escalation", sub("deny", ops(opscli.Escalations))),
		),
		group("sessions", "create (mint a per-run agent token), list, show or revoke agent sessions (through the ops API)",
			leaf(e, "create", "create a session and print its agent token once", sub("create", ops(opscli.Sessions))),
			leaf(e, "list", "list sessions", sub("list", ops(opscli.Sessions))),
			leaf(e, "show ID", "show one session", sub("show", ops(opscli.Sessions))),
			leaf(e, "revoke ID", "revoke a session", sub("revoke", ops(opscli.Sessions))),
		),
		group("tools", "list the built-in tools, write tool-annotations.json, or pin external tools",
			leaf(e, "list", "list the built-in tools and the roles of their arguments", sub("list", runTools)),
			leaf(e, "annotations", "write tool-annotations.json from the built-in servers' declared annotations", sub("annotations", runTools)),
			leaf(e, "pin", "review the external servers' tool definitions and pin them", func(ctx context.Context, e Env) int {
				return toolsPin(ctx, e, w.ListExternal)
			}),
		),
		group("servers", "list the catalog of well-known MCP servers, or print the config to add one",
			leaf(e, "list", "list the servers of the shipped catalog", sub("list", runServers)),
			leaf(e, "add NAME[@VERSION]", "print the gateway.yaml section that runs one catalog server", sub("add", runServers)),
		),
	)
	// Before the completion command, which keeps the writer it is built with.
	root.SetIn(e.Stdin)
	root.SetOut(e.Stdout)
	root.SetErr(e.Stderr)
	clikit.Finish(root)
	return root
}

// auditMemoryLimit is the soft heap limit of `ironcurtain audit`: verify
// walks rows one at a time, but rows stored whole by old gateways can be
// 4 MiB each, and the collector otherwise lets their garbage pile up.
const auditMemoryLimit = 64 << 20

func runAudit(ctx context.Context, e Env) int {
	debug.SetMemoryLimit(auditMemoryLimit)
	return ops(opscli.Audit)(ctx, e)
}

func runPolicy(ctx context.Context, e Env) int {
	return policycli.Run(ctx, e.Args, policycli.Env{Getenv: e.Getenv, Stdin: e.Stdin, Stdout: e.Stdout, Stderr: e.Stderr})
}

// ops adapts an opscli command.
func ops(run func(context.Context, []string, opscli.Env) int) RunFunc {
	return func(ctx context.Context, e Env) int {
		return run(ctx, e.Args, opscli.Env{Getenv: e.Getenv, Stdout: e.Stdout, Stderr: e.Stderr})
	}
}
