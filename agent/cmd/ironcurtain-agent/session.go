package main

import (
	"context"
	"errors"
	"fmt"
	"io"

	"ironcurtain.dev/agent/budget"
	"ironcurtain.dev/agent/mcpclient"
	"ironcurtain.dev/agent/model"
	"ironcurtain.dev/agent/runner"
)

// agentSession is what run and chat share: the gateway connection, the
// model and the runner session.
type agentSession struct {
	client  *mcpclient.Client
	printer *printer
	session *runner.Session
}

// openSession connects to the gateway, lists its tools and prepares the
// model. The returned exit code is meaningful when err is not nil.
func openSession(ctx context.Context, s settings, progress io.Writer) (*agentSession, int, error) {
	m, err := model.New(s.modelID, model.Config{BaseURL: s.modelBaseURL, Token: s.token})
	if err != nil {
		if errors.Is(err, model.ErrUsage) {
			return nil, exitUsage, err
		}
		return nil, exitFailed, err
	}
	p := newPrinter(progress, s.verbose)
	client, err := mcpclient.Connect(ctx, mcpclient.Config{
		URL:          s.mcpURL,
		Token:        s.token,
		OnEscalation: p.escalation,
		OnProgress:   p.progress,
	})
	if err != nil {
		return nil, exitFailed, err
	}
	tools, err := client.Tools(ctx)
	if err != nil {
		_ = client.Close()
		return nil, exitFailed, err
	}
	sess, err := runner.NewSession(runner.Config{
		Model:          m,
		Tools:          tools,
		Caller:         runner.MCPCaller{Client: client},
		Sandbox:        s.sandbox,
		Budget:         s.budget,
		MaxReplyTokens: s.maxReplyTokens,
		Observer:       p,
	})
	if err != nil {
		_ = client.Close()
		return nil, exitFailed, err
	}
	fmt.Fprintf(progress, "connected to %s (%d tools), model %s\n", orUnknown(client.ServerName()), len(tools), m.Name())
	return &agentSession{client: client, printer: p, session: sess}, exitOK, nil
}

func (a *agentSession) close() {
	a.printer.close()
	_ = a.client.Close()
}

// exitCode maps an outcome to the process exit code.
func exitCode(o runner.Outcome) int {
	switch o.Status {
	case runner.Finished:
		return exitOK
	case runner.BudgetExhausted:
		return exitBudget
	default:
		return exitFailed
	}
}

// describeStop is the line printed when a run does not finish.
func describeStop(o runner.Outcome) string {
	var ex *budget.Exhausted
	if errors.As(o.Err, &ex) {
		return "stopped: " + ex.Error()
	}
	return "failed: " + o.Reason
}

func orUnknown(s string) string {
	if s == "" {
		return "the gateway"
	}
	return s
}
