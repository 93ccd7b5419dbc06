package main

import (
	"context"
	"errors"
	"fmt"
	"strings"
)

// runTask runs one task and prints the final answer on stdout; progress,
// escalations and the reason a run stopped go to stderr.
func runTask(ctx context.Context, e env) int {
	s, rest, err := parseSettings("run", e.args, e.getenv, e.stderr)
	if err != nil {
		return reportConfigError(e, err)
	}
	task := strings.TrimSpace(strings.Join(rest, " "))
	if task == "" {
		fmt.Fprintln(e.stderr, `ironcurtain-agent run: no task given: ironcurtain-agent run [flags] "task"`)
		return exitUsage
	}
	a, code, err := openSession(ctx, s, e.stderr)
	if err != nil {
		fmt.Fprintf(e.stderr, "ironcurtain-agent run: %v\n", err)
		return code
	}
	defer a.close()
	out := a.session.Send(ctx, task)
	fmt.Fprintf(e.stderr, "%s after %d steps; %s\n", out.Status, out.Usage.Steps, a.session.Budget())
	if out.Answer != "" {
		fmt.Fprintln(e.stdout, out.Answer)
	}
	if code := exitCode(out); code != exitOK {
		fmt.Fprintln(e.stderr, describeStop(out))
		return code
	}
	return exitOK
}

func reportConfigError(e env, err error) int {
	if errors.Is(err, errUsage) && strings.Contains(err.Error(), "flag: help requested") {
		return exitOK
	}
	fmt.Fprintf(e.stderr, "ironcurtain-agent: %s\n", strings.TrimPrefix(err.Error(), "usage: "))
	return exitUsage
}
