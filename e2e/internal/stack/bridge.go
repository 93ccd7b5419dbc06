package stack

import (
	"context"
	"fmt"
	"net/netip"

	"github.com/moby/moby/client"
)

// Bridge is the host's side of one of the run's networks, as Docker
// reports it.
type Bridge struct {
	// NoHostAddress: the network was created with the bridge driver's
	// inhibit_ipv4 option (as compose/docker-compose.yml creates agent_net).
	NoHostAddress bool
	// Gateway is the network's IPAM gateway: the bridge's address on the
	// host when it has one.
	Gateway netip.Addr
	// Interface is the bridge's interface on the Docker host.
	Interface string
}

// AgentBridge returns the agent network's bridge.
func (s *Stack) AgentBridge(ctx context.Context) (Bridge, error) {
	ins, err := s.cli.NetworkInspect(ctx, s.agentNet.ID, client.NetworkInspectOptions{})
	if err != nil {
		return Bridge{}, fmt.Errorf("inspecting the agent network: %w", err)
	}
	b := Bridge{NoHostAddress: ins.Network.Options[inhibitIPv4] == "true", Interface: "br-" + ins.Network.ID[:12]}
	if name := ins.Network.Options["com.docker.network.bridge.name"]; name != "" {
		b.Interface = name
	}
	for _, c := range ins.Network.IPAM.Config {
		if c.Gateway.IsValid() && c.Gateway.Is4() {
			b.Gateway = c.Gateway
		}
	}
	if !b.Gateway.IsValid() {
		return b, fmt.Errorf("the agent network %s has no IPv4 gateway address", s.agentNet.Name)
	}
	return b, nil
}
