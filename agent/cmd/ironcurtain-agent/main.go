// Command ironcurtain-agent is the credential-less agent runner: it asks a
// model (through the gateway's relay) for TypeScript, runs it in the
// code-mode sandbox whose tool stubs call the gateway over MCP, and stops
// on an answer or a budget.
//
//	ironcurtain-agent run "task"   one task; the answer goes to stdout
//	ironcurtain-agent chat         interactive session
//	ironcurtain-agent doctor       checks the container's isolation
//
// Exit codes: 0 finished, 1 failed, 2 usage error, 3 a budget ended the run.
package main

import (
	"context"
	"errors"
	"fmt"
	"io"
	"os"
	"os/signal"
	"syscall"

	"github.com/spf13/cobra"

	"ironcurtain.dev/agent/internal/buildinfo"
)

// Exit codes.
const (
	exitOK     = 0
	exitFailed = 1
	exitUsage  = 2
	exitBudget = 3
)

// env is everything a command may touch of the process.
type env struct {
	args    []string
	getenv  func(string) string
	environ func() []string
	stdin   io.Reader
	stdout  io.Writer
	stderr  io.Writer
}

func main() {
	if err := applyTokenFile(os.Getenv, os.Setenv); err != nil {
		fmt.Fprintf(os.Stderr, "ironcurtain-agent: %v\n", err)
		os.Exit(exitUsage)
	}
	ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt, syscall.SIGTERM)
	code := run(ctx, env{
		args:    os.Args[1:],
		getenv:  os.Getenv,
		environ: os.Environ,
		stdin:   os.Stdin,
		stdout:  os.Stdout,
		stderr:  os.Stderr,
	})
	stop()
	os.Exit(code)
}

func run(ctx context.Context, e env) int {
	return execute(ctx, newRoot(e), e)
}

// newRoot returns the command tree: every command is listed here.
func newRoot(e env) *cobra.Command {
	root := &cobra.Command{
		Use:   "ironcurtain-agent",
		Short: "the credential-less agent runner of IronCurtain",
		Long: `ironcurtain-agent is the credential-less agent runner of IronCurtain: it asks a
model (through the gateway's relay) for TypeScript and runs it in the code-mode
sandbox, whose tool stubs call the gateway over MCP.

exit codes: 0 finished, 1 failed, 2 usage error, 3 a budget ended the run
run ` + "`ironcurtain-agent <command> -h`" + ` for its flags; see docs/agent.md`,
		Args: cobra.ArbitraryArgs,
		RunE: func(cmd *cobra.Command, args []string) error {
			if len(args) == 0 {
				return errors.New("missing command")
			}
			return fmt.Errorf("unknown command %q", args[0])
		},
	}
	root.AddCommand(
		leaf(e, "run [flags] TASK", `run one task: ironcurtain-agent run [flags] "task"`, runTask),
		leaf(e, "chat", "interactive session (/help, /tools, /budget, /pending, /quit)", chat),
		leaf(e, "doctor", "check from inside the container: no direct internet, proxy and MCP answer, no credentials", runDoctor),
		versionCmd(),
	)
	root.SetIn(e.stdin)
	root.SetOut(e.stdout)
	root.SetErr(e.stderr)
	root.Version = buildinfo.Get().String()
	root.SetVersionTemplate("{{.Name}} {{.Version}}\n")
	root.SetHelpCommand(helpCmd())
	root.InitDefaultHelpCmd()
	root.InitDefaultCompletionCmd()
	return root
}
