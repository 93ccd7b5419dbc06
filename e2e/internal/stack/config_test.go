package stack

import (
	"net/netip"
	"strings"
	"testing"

	"go.yaml.in/yaml/v3"
)

func TestGatewayConfig(t *testing.T) {
	subnet := netip.MustParsePrefix("172.30.0.0/16")
	out := gatewayConfig(configParams{Sessions: []string{"git", "egress"}, EgressSubnet: subnet})
	var doc struct {
		Sandbox string `yaml:"sandbox"`
		Agent   struct {
			TokenFiles map[string]string `yaml:"token_files"`
		} `yaml:"agent"`
		Egress struct {
			AllowedHosts         []string `yaml:"allowed_hosts"`
			UnsafeAllowAddresses []string `yaml:"unsafe_allow_addresses"`
		} `yaml:"egress"`
		Relay struct {
			Anthropic struct {
				BaseURL   string `yaml:"base_url"`
				APIKeyEnv string `yaml:"api_key_env"`
			} `yaml:"anthropic"`
		} `yaml:"relay"`
		Git struct {
			TokenHosts []string `yaml:"token_hosts"`
		} `yaml:"git"`
		Ops struct {
			Listen string `yaml:"listen"`
		} `yaml:"ops"`
		Servers map[string]struct {
			AllowedDomains []string `yaml:"allowed_domains"`
		} `yaml:"servers"`
	}
	if err := yaml.Unmarshal(out, &doc); err != nil {
		t.Fatalf("gateway.yaml does not parse: %v\n%s", err, out)
	}
	tests := []struct {
		name string
		got  string
		want string
	}{
		{name: "sandbox", got: doc.Sandbox, want: workspace},
		{name: "token file git", got: doc.Agent.TokenFiles["git"], want: agentTokenDir + "/git"},
		{name: "token file egress", got: doc.Agent.TokenFiles["egress"], want: agentTokenDir + "/egress"},
		{name: "allowlist", got: strings.Join(doc.Egress.AllowedHosts, ","), want: HostAllowed},
		{name: "test-only address exception is the egress subnet only", got: strings.Join(doc.Egress.UnsafeAllowAddresses, ","), want: subnet.String()},
		{name: "relay upstream", got: doc.Relay.Anthropic.BaseURL, want: "https://" + HostModel},
		{name: "relay key variable", got: doc.Relay.Anthropic.APIKeyEnv, want: "ANTHROPIC_API_KEY"},
		{name: "git token host", got: strings.Join(doc.Git.TokenHosts, ","), want: HostGit},
		{name: "ops API on the ops network only", got: doc.Ops.Listen, want: hostGatewayOps + ":8081"},
		{name: "fetch allowlist", got: strings.Join(doc.Servers["fetch"].AllowedDomains, ","), want: HostAllowed},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			if tt.got != tt.want {
				t.Fatalf("%s = %q, want %q", tt.name, tt.got, tt.want)
			}
		})
	}
	if strings.Contains(string(out), "sk-") || strings.Contains(string(out), "token:") {
		t.Fatalf("gateway.yaml holds a secret:\n%s", out)
	}
}

// TestReplicaConfig: a replica's gateway.yaml differs from the first
// gateway's only in the ops API's address (its own name on the ops
// network).
func TestReplicaConfig(t *testing.T) {
	p := configParams{Sessions: []string{"git"}, EgressSubnet: netip.MustParsePrefix("172.30.0.0/16")}
	first := string(gatewayConfig(p))
	p.OpsHost = "gateway-b-ops"
	replica := string(gatewayConfig(p))
	if want := `listen: "gateway-b-ops:8081"`; !strings.Contains(replica, want) {
		t.Fatalf("replica config lacks %s:\n%s", want, replica)
	}
	if got := strings.Replace(replica, "gateway-b-ops:8081", hostGatewayOps+":8081", 1); got != first {
		t.Fatalf("replica config differs beyond the ops address:\n%s", replica)
	}
}
