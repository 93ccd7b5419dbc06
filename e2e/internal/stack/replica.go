package stack

import (
	"context"
	"errors"
	"fmt"
	"time"

	"github.com/moby/moby/client"
	"github.com/testcontainers/testcontainers-go"
)

// StartReplica starts one more gateway container from the same image and
// gateway.yaml on the same Postgres, networks and workspace (DESIGN §17:
// replicas share the database only; escalations wake waiters with
// LISTEN/NOTIFY and audit chains lock their heads). Its name on the agent
// network is "gateway-<name>" and its ops API, published on 127.0.0.1 like
// the first gateway's, listens on "gateway-<name>-ops".
//
// It returns a view of the stack whose Gateway is the replica: every
// helper (OpsURL, Decide, ExecGateway, WaitGatewayReady, RunTranscript,
// MCPURL, AgentEnv) then talks to the replica, with the rest of the stack
// shared. Remove the replica with its view's RemoveReplica; the stack's
// Close removes it too. Never Close a view.
func (s *Stack) StartReplica(ctx context.Context, name string) (*Stack, error) {
	if name == "" {
		return nil, errors.New("a replica needs a name")
	}
	host := hostGateway + "-" + name
	c, err := s.runGateway(ctx, "gateway-"+name, host, host+"-ops")
	if c != nil {
		*s.replicas = append(*s.replicas, c)
	}
	if err != nil {
		return nil, err
	}
	v := *s
	v.Gateway, v.agentHost, v.opsHost = c, host, host+"-ops"
	if err := v.WaitGatewayReady(ctx, 2*time.Minute); err != nil {
		return nil, err
	}
	return &v, nil
}

// MCPURL is the gateway's MCP endpoint as the agent container reaches it.
func (s *Stack) MCPURL() string { return "http://" + s.agentHost + ":8080/mcp" }

// KillGateway kills this view's gateway container at once (SIGKILL, as
// `docker kill`): calls in flight break, nothing shuts down cleanly.
func (s *Stack) KillGateway(ctx context.Context) error {
	if _, err := s.cli.ContainerKill(ctx, s.Gateway.ID, client.ContainerKillOptions{Signal: "KILL"}); err != nil {
		return fmt.Errorf("killing the gateway %s: %w", s.agentHost, err)
	}
	return nil
}

// RemoveReplica removes a replica started by StartReplica (called on its
// view).
func (s *Stack) RemoveReplica(ctx context.Context) error {
	if s.agentHost == hostGateway {
		return errors.New("RemoveReplica called on the stack itself, not on a replica's view")
	}
	for i, c := range *s.replicas {
		if c == s.Gateway {
			*s.replicas = append((*s.replicas)[:i], (*s.replicas)[i+1:]...)
			break
		}
	}
	if err := s.Gateway.Terminate(ctx, testcontainers.StopTimeout(time.Second)); err != nil {
		return fmt.Errorf("removing the replica %s: %w", s.agentHost, err)
	}
	return nil
}
