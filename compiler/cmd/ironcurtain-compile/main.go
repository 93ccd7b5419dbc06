// Command ironcurtain-compile turns a constitution into verified policy
// artifacts for the IronCurtain gateway.
//
//	ironcurtain-compile annotate-tools   classify external MCP servers' tool arguments
//	ironcurtain-compile compile-policy   constitution -> rules, lists, scenarios, verification
//	ironcurtain-compile resolve-lists    (re)resolve dynamic lists, keeping manual edits
//	ironcurtain-compile verify           run scenarios through the engine (no model)
//	ironcurtain-compile policy-diff      rules and decisions that differ between two policies
//
// Exit codes: 0 success (compile-policy: verified; policy-diff: no
// difference), 1 not verified / differences found / scenarios fail, 2 usage
// or configuration error, 3 runtime failure (model unreachable, I/O).
package main

import (
	"context"
	"errors"
	"fmt"
	"io"
	"os"
	"os/signal"
	"strings"
	"syscall"
	"time"

	"github.com/spf13/cobra"

	"ironcurtain.dev/gateway/clikit"
)

// Exit codes.
const (
	exitOK      = 0
	exitFailed  = 1
	exitUsage   = 2
	exitRuntime = 3
)

// env is everything a command may touch of the process.
type env struct {
	args   []string
	getenv func(string) string
	stdout io.Writer
	stderr io.Writer
	now    func() time.Time
}

func main() {
	ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt, syscall.SIGTERM)
	code := run(ctx, env{args: os.Args[1:], getenv: os.Getenv, stdout: os.Stdout, stderr: os.Stderr, now: time.Now})
	stop()
	os.Exit(code)
}

func run(ctx context.Context, e env) int {
	return clikit.Execute(ctx, newRoot(e), e.args, e.stderr)
}

// newRoot returns the command tree: every command is listed here.
func newRoot(e env) *cobra.Command {
	root := &cobra.Command{
		Use:   "ironcurtain-compile",
		Short: "turn a constitution into verified policy artifacts for the IronCurtain gateway",
		Long: `ironcurtain-compile turns a constitution into verified policy artifacts for the
IronCurtain gateway (<command> -h for its flags).

exit codes: 0 ok/verified, 1 not verified or differences, 2 usage or configuration error, 3 runtime failure`,
		Args: cobra.ArbitraryArgs,
		RunE: func(cmd *cobra.Command, args []string) error {
			if len(args) == 0 {
				return errors.New("missing command")
			}
			return fmt.Errorf("unknown command %q", args[0])
		},
	}
	root.AddCommand(
		leaf(e, "annotate-tools", "classify the tool arguments of external MCP servers into roles", runAnnotate),
		leaf(e, "compile-policy", "compile the constitution into verified rules, lists and scenarios", runCompile),
		leaf(e, "resolve-lists", "resolve the policy's dynamic lists, keeping manual additions and removals", runResolveLists),
		leaf(e, "verify", "run a policy's scenarios and the invariants through the engine (no model)", runVerify),
		leaf(e, "policy-diff OLD NEW", "rules that changed and, with --scenarios, decisions that change (alias: diff)", runDiff, "diff"),
	)
	root.SetIn(strings.NewReader(""))
	root.SetOut(e.stdout)
	root.SetErr(e.stderr)
	clikit.Finish(root)
	return root
}
