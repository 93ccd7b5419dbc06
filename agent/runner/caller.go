package runner

import (
	"context"

	"ironcurtain.dev/agent/mcpclient"
	"ironcurtain.dev/agent/sandbox"
)

// MCPCaller makes the sandbox's tool calls through the gateway MCP client.
type MCPCaller struct {
	Client *mcpclient.Client
}

var _ sandbox.Caller = MCPCaller{}

// CallTool implements sandbox.Caller.
func (m MCPCaller) CallTool(ctx context.Context, call sandbox.Call) (sandbox.Reply, error) {
	res, err := m.Client.Call(ctx, call.Tool, call.Args)
	if err != nil {
		return sandbox.Reply{}, err
	}
	reply := sandbox.Reply{Text: res.Text, Structured: res.Structured, IsError: res.IsError}
	if e := res.Escalation; e != nil {
		reply.Escalation = &sandbox.Escalation{ID: e.ID, Status: e.Status, Reason: e.Reason}
	}
	return reply, nil
}
