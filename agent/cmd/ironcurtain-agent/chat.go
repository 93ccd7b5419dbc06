package main

import (
	"bufio"
	"context"
	"fmt"
	"strings"
)

// chat reads user messages from stdin; the conversation and the budgets
// span the whole session.
func chat(ctx context.Context, e env) int {
	s, _, err := parseSettings("chat", e.args, e.getenv, e.stderr)
	if err != nil {
		return reportConfigError(e, err)
	}
	a, code, err := openSession(ctx, s, e.stderr)
	if err != nil {
		fmt.Fprintf(e.stderr, "ironcurtain-agent chat: %v\n", err)
		return code
	}
	defer a.close()
	fmt.Fprintln(e.stdout, "type a task, or /help")
	in := bufio.NewScanner(e.stdin)
	in.Buffer(make([]byte, 64<<10), 1<<20)
	last := exitOK
	for {
		fmt.Fprint(e.stdout, "> ")
		if !in.Scan() {
			fmt.Fprintln(e.stdout)
			return last
		}
		line := strings.TrimSpace(in.Text())
		switch {
		case line == "":
			continue
		case line == "/quit" || line == "/exit":
			return last
		case line == "/help":
			fmt.Fprintln(e.stdout, "/tools    list the gateway tools as the sandbox sees them")
			fmt.Fprintln(e.stdout, "/budget   steps, tokens and time used so far")
			fmt.Fprintln(e.stdout, "/pending  escalations waiting for a human")
			fmt.Fprintln(e.stdout, "/quit     end the session")
			continue
		case line == "/tools":
			for _, f := range a.session.Functions() {
				fmt.Fprintf(e.stdout, "%s  (%s)\n", f.Qualified(), f.Tool)
			}
			continue
		case line == "/budget":
			fmt.Fprintln(e.stdout, a.session.Budget())
			continue
		case line == "/pending":
			pending := a.printer.pendingLines()
			if len(pending) == 0 {
				fmt.Fprintln(e.stdout, "no escalation is waiting")
			}
			for _, p := range pending {
				fmt.Fprintln(e.stdout, "waiting for approval of "+p)
			}
			continue
		case strings.HasPrefix(line, "/"):
			fmt.Fprintf(e.stdout, "unknown command %s (/help)\n", line)
			continue
		}
		out := a.session.Send(ctx, line)
		if out.Answer != "" {
			fmt.Fprintln(e.stdout, out.Answer)
		}
		last = exitCode(out)
		if last != exitOK {
			fmt.Fprintln(e.stdout, describeStop(out))
			if ctx.Err() != nil {
				return last
			}
		}
	}
}
