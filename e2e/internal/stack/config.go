package stack

import (
	"fmt"
	"net/netip"
	"sort"
	"strconv"
	"strings"
)

// Paths inside the gateway container.
const (
	gatewayConfigPath = "/etc/ironcurtain/e2e/gateway.yaml"
	agentTokenDir     = "/run/ironcurtain/agent-tokens"
	caBundlePath      = "/etc/ssl/certs/ca-certificates.crt"
	workspace         = "/workspace"
)

// configParams are the per-run values of the e2e gateway.yaml.
type configParams struct {
	Sessions     []string     // sessions with a token file (besides "agent" from the environment)
	EgressSubnet netip.Prefix // the suite's egress network
	OpsHost      string       // the gateway's name on the ops network (default hostGatewayOps)
	// SessionWorkspaces is session_workspaces.root ("" for none).
	SessionWorkspaces string
	// PolicyDir replaces the image's policy directory ("" keeps it).
	PolicyDir string
	// ExtraServers is YAML added under servers: (indented), Extra YAML
	// added at the end (the confined topology, confined.go).
	ExtraServers, Extra string
}

// gatewayConfig renders the gateway.yaml the suite mounts into the real
// gateway image. Every key is a real gateway.yaml key (the gateway parses
// the file strictly and refuses to start on an unknown one).
func gatewayConfig(p configParams) []byte {
	q := strconv.Quote
	opsHost := p.OpsHost
	if opsHost == "" {
		opsHost = hostGatewayOps
	}
	var b strings.Builder
	b.WriteString(`# gateway.yaml of the IronCurtain end-to-end suite, generated per run by
# e2e/internal/stack. It is the shipped policy plus what the suite's private
# networks need; the one test-only setting is marked below.
sandbox: /workspace
`)
	policyDir := p.PolicyDir
	if policyDir == "" {
		policyDir = "/etc/ironcurtain/policy"
	}
	fmt.Fprintf(&b, "policy_dir: %s\n", policyDir)
	b.WriteString(`protected_branches: [main, master]

agent:
  listen: ":8080"
  # One session per scenario, so each scenario's audit trail stands alone.
  # Session "agent" takes its token from IRONCURTAIN_AGENT_TOKEN.
  token_files:
`)
	sessions := append([]string(nil), p.Sessions...)
	sort.Strings(sessions)
	for _, s := range sessions {
		fmt.Fprintf(&b, "    %s: %s\n", s, q(agentTokenDir+"/"+s))
	}
	fmt.Fprintf(&b, `
servers:
  fetch:
    # The fetch tool's own allowlist (the gateway refuses to start without one).
    allowed_domains: [%s]
  git:
    # The hosts the git door serves (and the git tools reach).
    allowed_domains: [%s]
%s
ops:
  # The ops network's address only: the agent's network cannot reach the
  # ops API at all (DESIGN §2), not even to try a token.
  listen: "%s:8081"

egress:
  listen: ":3128"
  allowed_hosts: [%s]
  allowed_ports: [443, 80]
  # TEST ONLY. The suite's "internet" is a container with a private address
  # on the suite's own egress network; the proxy refuses private addresses
  # unless they are listed here. A deployment never sets this.
  unsafe_allow_addresses: [%s]

escalation:
  timeout: 300s
  poll_interval: 1s
  sweep_interval: 5s
  # A rule escalation is shown to the auto-approver's model first: the
  # internet container's deliberately naive fake (approver.go there), which
  # approves only when agent text leaked out of the data block.
  auto_approver:
    enabled: true
    provider: openai
    model: gpt-4o-mini

relay:
  anthropic:
    base_url: %s
    api_key_env: ANTHROPIC_API_KEY
  openai:
    # The auto-approver's model. The suite's fake checks the run's model key.
    base_url: %s
    api_key_env: ANTHROPIC_API_KEY

github:
  # The suite's fake GitHub API (REST and GraphQL) in the internet container.
  api_url: %s
  token_env: GITHUB_TOKEN

git:
  token_env: GITHUB_TOKEN
  token_hosts: [%s]
  author_name: IronCurtain e2e
  author_email: e2e@ironcurtain.test
  network_timeout: 60s

mcp:
  progress_every: 5s

# The durability scenarios drive one session with several agents that write
# as fast as they can and repeat the same create_directory every round: far
# beyond any real agent, so the loop breaker's limits are raised here (its
# own tests are in gateway/internal/loopguard and mcphub).
loop_breaker:
  calls_per_minute: 1000000
  identical_calls: 100000
`, q(HostAllowed), q(HostGit), p.ExtraServers, opsHost, q(HostAllowed), q(p.EgressSubnet.String()), q("https://"+HostModel), q("https://"+HostApprover+"/v1"), q("https://"+HostGitHub+"/"), q(HostGit))
	b.WriteString(p.Extra)
	if p.SessionWorkspaces != "" {
		fmt.Fprintf(&b, "\nsession_workspaces:\n  root: %s\n  keep: true\n", q(p.SessionWorkspaces))
	}
	return []byte(b.String())
}
