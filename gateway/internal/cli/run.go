package cli

import (
	"context"
	"errors"
	"flag"
	"fmt"
	"os"
	"os/signal"
	"strings"
	"syscall"

	"ironcurtain.dev/gateway/internal/ops/opsapi"
	"ironcurtain.dev/gateway/internal/runcmd"
)

// runEnvFile is the stack's environment file, read for the variables the
// process does not set; runOperatorTokenFile is the stack's operator token
// (compose/stack.sh env writes both).
const (
	runEnvFile           = "compose/.env"
	runOperatorTokenFile = "compose/secrets/operator-token"
	// runWorkspacesDir is the host directory of the stack's
	// session_workspaces.root (compose/stack.sh up creates it).
	runWorkspacesDir = "compose/workspaces"
)

func runRun(ctx context.Context, e Env) int {
	getenv, err := runcmd.DotEnv(runEnvFile, e.Getenv)
	if err == nil {
		getenv, err = runcmd.SecretFile(runcmd.EnvOperatorToken, runOperatorTokenFile, getenv)
	}
	if err != nil {
		fmt.Fprintf(e.Stderr, "ironcurtain run: %v\n", err)
		return 1
	}
	getenv = runcmd.ExistingDir(runcmd.EnvWorkspacesDir, runWorkspacesDir, getenv)
	o, err := runcmd.Parse(e.Args, getenv, e.Stderr)
	if err != nil {
		return runExit(e, err)
	}
	eng, err := runcmd.NewEngine()
	if err != nil {
		return runExit(e, err)
	}
	defer eng.C.Close()
	ops, err := opsapi.NewClient(o.OpsURL, opsapi.OperatorToken(o.OperatorToken))
	if err != nil {
		return runExit(e, fmt.Errorf("%w: --ops-url: %v", runcmd.ErrUsage, err))
	}
	// Ctrl-C is the run's to handle (once: stop the agent; twice: force),
	// not a cancellation of everything.
	sig := make(chan os.Signal, 2)
	signal.Notify(sig, os.Interrupt, syscall.SIGTERM)
	defer signal.Stop(sig)
	intr := make(chan struct{}, 2)
	go func() {
		for range sig {
			select {
			case intr <- struct{}{}:
			default:
			}
		}
	}()
	err = runcmd.Run(context.WithoutCancel(ctx), o, runcmd.Deps{Docker: eng, Ops: ops,
		Verifier: runcmd.ExecVerifier{C: eng.C, Project: "ironcurtain", Service: "gateway"},
		Stdin:    e.Stdin, Stdout: e.Stdout, Stderr: e.Stderr, Interrupts: intr})
	return runExit(e, err)
}

func runExit(e Env, err error) int {
	switch {
	case err == nil, errors.Is(err, flag.ErrHelp):
		return 0
	case errors.Is(err, runcmd.ErrUsage):
		fmt.Fprintf(e.Stderr, "ironcurtain run: %s\n", strings.TrimPrefix(err.Error(), "usage: "))
		return 2
	default:
		fmt.Fprintf(e.Stderr, "ironcurtain run: %v\n", err)
		return 1
	}
}
