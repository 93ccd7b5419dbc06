package deploy

import (
	"context"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"reflect"
	"regexp"
	"sort"
	"strings"
	"testing"
	"time"

	"go.yaml.in/yaml/v3"

	"ironcurtain.dev/e2e/internal/testenv"
)

const (
	composeFile    = "compose/docker-compose.yml"
	composeGateway = "compose/gateway.yaml"
	composeEnv     = "compose/.env.example"
	// composeProject is the project name the Makefile (compose/stack.sh) uses.
	composeProject = "ironcurtain"
)

// The compose model: only what the invariants need. Fields Compose accepts
// in two syntaxes (list or map) are decoded by hand.
type composeSpec struct {
	Services map[string]composeService `yaml:"services"`
	Networks map[string]composeNetwork `yaml:"networks"`
}

type composeService struct {
	Image       string    `yaml:"image"`
	PullPolicy  string    `yaml:"pull_policy"`
	Command     yaml.Node `yaml:"command"`
	Entrypoint  yaml.Node `yaml:"entrypoint"`
	Environment yaml.Node `yaml:"environment"`
	EnvFile     yaml.Node `yaml:"env_file"`
	Secrets     yaml.Node `yaml:"secrets"`
	Networks    yaml.Node `yaml:"networks"`
	Ports       []any     `yaml:"ports"`
	Expose      []any     `yaml:"expose"`
	Volumes     []any     `yaml:"volumes"`
	NetworkMode string    `yaml:"network_mode"`
	Pid         string    `yaml:"pid"`
	Ipc         string    `yaml:"ipc"`
	Privileged  bool      `yaml:"privileged"`
	CapAdd      []string  `yaml:"cap_add"`
	ReadOnly    bool      `yaml:"read_only"`
	Profiles    []string  `yaml:"profiles"`
}

type composeNetwork struct {
	Name       string            `yaml:"name"`
	Internal   bool              `yaml:"internal"`
	External   bool              `yaml:"external"`
	DriverOpts map[string]string `yaml:"driver_opts"`
}

// dockerName is the network's name in Docker.
func (n composeNetwork) dockerName(key string) string {
	if n.Name != "" {
		return n.Name
	}
	return composeProject + "_" + key
}

// attachment is a service's membership of one network.
type attachment struct {
	Aliases []string `yaml:"aliases"`
}

func (s composeService) networks(t *testing.T) map[string]attachment {
	t.Helper()
	out := map[string]attachment{}
	switch s.Networks.Kind {
	case 0:
		out["default"] = attachment{}
	case yaml.SequenceNode:
		var names []string
		if err := s.Networks.Decode(&names); err != nil {
			t.Fatalf("networks: %v", err)
		}
		for _, n := range names {
			out[n] = attachment{}
		}
	case yaml.MappingNode:
		var m map[string]*attachment
		if err := s.Networks.Decode(&m); err != nil {
			t.Fatalf("networks: %v", err)
		}
		for k, v := range m {
			if v == nil {
				v = &attachment{}
			}
			out[k] = *v
		}
	}
	return out
}

func (s composeService) environment(t *testing.T) map[string]string {
	t.Helper()
	out := map[string]string{}
	switch s.Environment.Kind {
	case 0:
	case yaml.SequenceNode:
		var kvs []string
		if err := s.Environment.Decode(&kvs); err != nil {
			t.Fatalf("environment: %v", err)
		}
		for _, kv := range kvs {
			k, v, _ := strings.Cut(kv, "=")
			out[k] = v
		}
	case yaml.MappingNode:
		var m map[string]*string
		if err := s.Environment.Decode(&m); err != nil {
			t.Fatalf("environment: %v", err)
		}
		for k, v := range m {
			if v != nil {
				out[k] = *v
			} else {
				out[k] = "" // taken from the host environment
			}
		}
	}
	return out
}

// secretNames lists the Compose secrets a service mounts (short or long
// syntax), sorted.
func (s composeService) secretNames(t *testing.T) []string {
	t.Helper()
	if s.Secrets.Kind == 0 {
		return nil
	}
	var items []yaml.Node
	if err := s.Secrets.Decode(&items); err != nil {
		t.Fatalf("secrets: %v", err)
	}
	var out []string
	for _, it := range items {
		var name string
		if it.Kind == yaml.ScalarNode {
			name = it.Value
		} else {
			var long struct {
				Source string `yaml:"source"`
			}
			if err := it.Decode(&long); err != nil {
				t.Fatalf("secrets: %v", err)
			}
			name = long.Source
		}
		out = append(out, name)
	}
	sort.Strings(out)
	return out
}

// nodeText renders a node back to YAML (for scanning references).
func nodeText(n yaml.Node) string {
	if n.Kind == 0 {
		return ""
	}
	b, _ := yaml.Marshal(&n)
	return string(b)
}

// agentServices are the services an agent runs in: the runner and the
// agent shell (profile agent-shell, docs/agents.md). Both get the same
// isolation: agent_net only, the agent token and no other secret.
var agentServices = []string{"agent", "agent-shell"}

func loadCompose(t *testing.T) composeSpec {
	t.Helper()
	var c composeSpec
	decodeYAML(t, composeFile, &c)
	for _, name := range []string{"postgres", "migrate", "gateway", "agent", "agent-shell"} {
		if _, ok := c.Services[name]; !ok {
			t.Fatalf("%s: service %q is missing", composeFile, name)
		}
	}
	return c
}

func TestComposeNetworkIsolation(t *testing.T) {
	c := loadCompose(t)
	nets := func(svc string) []string {
		var out []string
		for n := range c.Services[svc].networks(t) {
			out = append(out, n)
		}
		sort.Strings(out)
		return out
	}
	internal := func(n string) bool { return c.Networks[n].Internal }

	tests := []struct {
		name  string
		check func() error
	}{
		{name: "agent_net's bridge has no host address", check: func() error {
			// An internal bridge's host address reaches every host service
			// listening on 0.0.0.0 (seen with the launcher's Docker test).
			if v := c.Networks["agent_net"].DriverOpts["com.docker.network.bridge.inhibit_ipv4"]; v != "true" {
				return fmt.Errorf("agent_net's com.docker.network.bridge.inhibit_ipv4 = %q, want \"true\"", v)
			}
			return nil
		}},
		{name: "the agent is on agent_net only", check: func() error {
			if got := nets("agent"); len(got) != 1 || got[0] != "agent_net" {
				return fmt.Errorf("agent networks %v, want [agent_net]", got)
			}
			return nil
		}},
		{name: "agent_net has no route out", check: func() error {
			if !internal("agent_net") {
				return fmt.Errorf("networks.agent_net.internal is not true")
			}
			return nil
		}},
		{name: "the agent shell is on agent_net only", check: func() error {
			if got := nets("agent-shell"); len(got) != 1 || got[0] != "agent_net" {
				return fmt.Errorf("agent-shell networks %v, want [agent_net]", got)
			}
			return nil
		}},
		{name: "only the agents and the gateway are on agent_net", check: func() error {
			for svc := range c.Services {
				if !contains(agentServices, svc) && svc != "gateway" && contains(nets(svc), "agent_net") {
					return fmt.Errorf("service %s is on agent_net", svc)
				}
			}
			return nil
		}},
		{name: "Postgres shares no network with the agents", check: func() error {
			for _, n := range nets("postgres") {
				for _, a := range agentServices {
					if contains(nets(a), n) {
						return fmt.Errorf("postgres and %s share %s", a, n)
					}
				}
				if !internal(n) {
					return fmt.Errorf("postgres is on %s, which is not internal", n)
				}
			}
			return nil
		}},
		{name: "migrate is on the database network only", check: func() error {
			if got := nets("migrate"); len(got) != 1 || got[0] != "db_net" {
				return fmt.Errorf("migrate networks %v, want [db_net]", got)
			}
			return nil
		}},
		{name: "the gateway joins all four networks", check: func() error {
			if got := nets("gateway"); strings.Join(got, ",") != "agent_net,db_net,egress_net,ops_net" {
				return fmt.Errorf("gateway networks %v", got)
			}
			return nil
		}},
		{name: "no service shares the host's namespaces or is privileged", check: func() error {
			for name, s := range c.Services {
				if s.NetworkMode != "" || s.Pid != "" || s.Ipc != "" || s.Privileged || len(s.CapAdd) > 0 {
					return fmt.Errorf("service %s sets network_mode/pid/ipc/privileged/cap_add", name)
				}
			}
			return nil
		}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			if err := tt.check(); err != nil {
				t.Error(err)
			}
		})
	}
}

func TestComposeOnlyOpsPortOnLoopback(t *testing.T) {
	c := loadCompose(t)
	_, _, ops := loadListeners(t, composeGateway)
	for name, s := range c.Services {
		if name != "gateway" && (len(s.Ports) > 0 || len(s.Expose) > 0) {
			t.Errorf("service %s publishes or exposes ports %v %v", name, s.Ports, s.Expose)
		}
	}
	ports := c.Services["gateway"].Ports
	if len(ports) != 1 {
		t.Fatalf("gateway publishes %d ports, want exactly one (the ops API)", len(ports))
	}
	short, ok := ports[0].(string)
	if !ok {
		t.Fatalf("gateway port %v: use the short syntax HOST_IP:HOST_PORT:CONTAINER_PORT", ports[0])
	}
	// HOST_IP:HOST_PORT:CONTAINER_PORT; the host port may be a ${VAR:-default}.
	m := regexp.MustCompile(`^(\d+\.\d+\.\d+\.\d+):(\$\{[^}]*\}|\d+):(\d+)(/tcp)?$`).FindStringSubmatch(short)
	if m == nil {
		t.Fatalf("gateway port %q does not name a host IP", short)
	}
	if m[1] != "127.0.0.1" {
		t.Errorf("the ops port is published on %s, want 127.0.0.1 only", m[1])
	}
	if m[3] != fmt.Sprint(ops.Port) {
		t.Errorf("the published container port %s is not the ops port %d of %s", m[3], ops.Port, composeGateway)
	}
}

// TestComposePublishedPortLandsOnOpsNet: Docker publishes a container's
// ports (and routes its traffic) through one network, the first
// non-internal one by name. The ops API listens only on the ops_net
// address, so ops_net must be that network or the published port leads
// nowhere.
func TestComposePublishedPortLandsOnOpsNet(t *testing.T) {
	c := loadCompose(t)
	type named struct{ key, docker string }
	var candidates []named
	for key := range c.Services["gateway"].networks(t) {
		n, ok := c.Networks[key]
		if !ok {
			t.Fatalf("the gateway's network %s is not declared", key)
		}
		if !n.Internal {
			candidates = append(candidates, named{key, n.dockerName(key)})
		}
	}
	sort.Slice(candidates, func(i, j int) bool { return candidates[i].docker < candidates[j].docker })
	if len(candidates) == 0 || candidates[0].key != "ops_net" {
		t.Errorf("the gateway's first non-internal network by Docker name is %v, want ops_net (names: %v)", candidates[0], candidates)
	}
	for key, n := range c.Networks {
		if n.External {
			t.Errorf("network %s is external: the stack must create its own networks", key)
		}
	}
}

// TestComposeListenersBoundPerNetwork: each gateway listener is bound to an
// alias the gateway has on exactly one network, so the agent's network
// cannot even connect to the ops port.
func TestComposeListenersBoundPerNetwork(t *testing.T) {
	c := loadCompose(t)
	gwNets := c.Services["gateway"].networks(t)
	agent, egress, ops := loadListeners(t, composeGateway)
	tests := []struct {
		name     string
		listener hostPort
		network  string
	}{
		{name: "agent API on agent_net", listener: agent, network: "agent_net"},
		{name: "egress proxy on agent_net", listener: egress, network: "agent_net"},
		{name: "ops API on ops_net", listener: ops, network: "ops_net"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			if isWildcard(tt.listener.Host) || tt.listener.Host == "gateway" {
				t.Fatalf("listener %s:%d is reachable from every network of the gateway", tt.listener.Host, tt.listener.Port)
			}
			var on []string
			for n, a := range gwNets {
				if contains(a.Aliases, tt.listener.Host) {
					on = append(on, n)
				}
			}
			if len(on) != 1 || on[0] != tt.network {
				t.Errorf("alias %q is on %v, want only %s", tt.listener.Host, on, tt.network)
			}
			for svc, s := range c.Services {
				if svc == "gateway" {
					continue
				}
				for n, a := range s.networks(t) {
					if contains(a.Aliases, tt.listener.Host) {
						t.Errorf("service %s also has the alias %q (on %s)", svc, tt.listener.Host, n)
					}
				}
			}
		})
	}
}

func TestComposeAgentHoldsNoSecrets(t *testing.T) {
	c := loadCompose(t)
	a := c.Services["agent"]
	if a.EnvFile.Kind != 0 {
		t.Errorf("the agent has an env_file: it would receive every variable of that file")
	}
	if got := a.secretNames(t); !reflect.DeepEqual(got, []string{"agent_token"}) {
		t.Errorf("the agent mounts the Compose secrets %v, want its token only [agent_token]", got)
	}
	allowedVars := []string{"IRONCURTAIN_MODEL", "IRONCURTAIN_TASK"}
	allowedKeys := []string{"IRONCURTAIN_AGENT_TOKEN_FILE", "IRONCURTAIN_MODEL", "IRONCURTAIN_MCP_URL",
		"IRONCURTAIN_MODEL_BASE_URL", "HTTPS_PROXY", "HTTP_PROXY", "NO_PROXY",
		"IRONCURTAIN_MAX_STEPS", "IRONCURTAIN_MAX_WALL", "IRONCURTAIN_MAX_TOKENS"}
	for k, v := range a.environment(t) {
		if !contains(allowedKeys, k) {
			t.Errorf("agent environment %s is not one the runner needs", k)
		}
		if credentialNames.MatchString(k) {
			t.Errorf("agent environment %s looks like a credential", k)
		}
		for _, ref := range varRefs(v) {
			if !contains(allowedVars, ref) {
				t.Errorf("agent environment %s interpolates ${%s}", k, ref)
			}
		}
	}
	for _, part := range []string{nodeText(a.Command), nodeText(a.Entrypoint)} {
		for _, ref := range varRefs(part) {
			if !contains(allowedVars, ref) {
				t.Errorf("the agent's command interpolates ${%s}", ref)
			}
		}
	}
	for _, v := range a.Volumes {
		s, ok := v.(string)
		if !ok {
			t.Errorf("agent volume %v: use the short syntax", v)
			continue
		}
		parts := strings.Split(s, ":")
		if len(parts) != 3 || parts[0] != "workspace" || parts[1] != "/workspace" || parts[2] != "ro" {
			t.Errorf("agent volume %q: only workspace:/workspace:ro is allowed (it acts through the gateway)", s)
		}
	}
	if !a.ReadOnly {
		t.Errorf("the agent's root filesystem is not read_only")
	}
}

// TestComposeAgentShellHoldsNoSecrets: the agent shell gets what the
// runner gets (the agent token and the gateway's URLs), only with its
// profile, and volumes of its own: never the gateway's workspace, state or
// database, never a host path.
func TestComposeAgentShellHoldsNoSecrets(t *testing.T) {
	c := loadCompose(t)
	a := c.Services["agent-shell"]
	if len(a.Profiles) != 1 || a.Profiles[0] != "agent-shell" {
		t.Errorf("agent-shell profiles %v, want [agent-shell] (plain `up` must start the runner only)", a.Profiles)
	}
	if a.EnvFile.Kind != 0 {
		t.Errorf("the agent shell has an env_file: it would receive every variable of that file")
	}
	if got := a.secretNames(t); !reflect.DeepEqual(got, []string{"agent_token"}) {
		t.Errorf("the agent shell mounts the Compose secrets %v, want its token only [agent_token]", got)
	}
	allowedVars := []string{"IC_AGENT_SHELL_IMAGE"}
	allowedKeys := []string{"IRONCURTAIN_AGENT_TOKEN_FILE", "IRONCURTAIN_GATEWAY_URL", "IRONCURTAIN_MCP_URL",
		"IRONCURTAIN_MODEL_BASE_URL", "HTTPS_PROXY", "HTTP_PROXY", "NO_PROXY"}
	env := a.environment(t)
	if env["IRONCURTAIN_AGENT_TOKEN_FILE"] != "/run/secrets/agent_token" {
		t.Errorf("agent-shell IRONCURTAIN_AGENT_TOKEN_FILE = %q, want /run/secrets/agent_token", env["IRONCURTAIN_AGENT_TOKEN_FILE"])
	}
	for k, v := range env {
		if !contains(allowedKeys, k) {
			t.Errorf("agent-shell environment %s is not one the shell needs", k)
		}
		if credentialNames.MatchString(k) {
			t.Errorf("agent-shell environment %s looks like a credential", k)
		}
		for _, ref := range varRefs(v) {
			if !contains(allowedVars, ref) {
				t.Errorf("agent-shell environment %s interpolates ${%s}", k, ref)
			}
		}
	}
	for _, part := range []string{nodeText(a.Command), nodeText(a.Entrypoint)} {
		for _, ref := range varRefs(part) {
			t.Errorf("the agent shell's command interpolates ${%s}", ref)
		}
	}
	// Volumes any other service mounts are the gateway's (or Postgres').
	others := map[string]string{}
	for name, s := range c.Services {
		if name == "agent-shell" {
			continue
		}
		for _, v := range s.Volumes {
			if str, ok := v.(string); ok {
				others[strings.Split(str, ":")[0]] = name
			}
		}
	}
	if len(a.Volumes) == 0 {
		t.Errorf("the agent shell has no volumes: the check below would prove nothing")
	}
	for _, v := range a.Volumes {
		s, ok := v.(string)
		if !ok {
			t.Errorf("agent-shell volume %v: use the short syntax", v)
			continue
		}
		src := strings.Split(s, ":")[0]
		if strings.ContainsAny(src, "/.~$") {
			t.Errorf("agent-shell volume %q mounts a host path", s)
		}
		if owner, shared := others[src]; shared {
			t.Errorf("agent-shell volume %q is also mounted by %s", s, owner)
		}
	}
	if !a.ReadOnly {
		t.Errorf("the agent shell's root filesystem is not read_only")
	}
}

// gatewayURL is an environment variable that must point at the gateway: at
// port, and at path unless it is empty.
type gatewayURL struct {
	key, path string
	port      int
}

// agentGatewayURLs are the variables that point an agent at the gateway's
// agent API (MCP and model relay) and egress proxy.
func agentGatewayURLs(agentAPI, egress hostPort) []gatewayURL {
	return []gatewayURL{
		{key: "IRONCURTAIN_MCP_URL", path: "/mcp", port: agentAPI.Port},
		{key: "IRONCURTAIN_MODEL_BASE_URL", path: "/llm", port: agentAPI.Port},
		{key: "HTTPS_PROXY", port: egress.Port},
		{key: "HTTP_PROXY", port: egress.Port},
	}
}

// checkGatewayURLs checks, in a subtest each, that env (who's environment)
// sets every one of urls to a host isGateway accepts ("want" describes it in
// the errors), at the expected port and path.
func checkGatewayURLs(t *testing.T, who string, env map[string]string, urls []gatewayURL, isGateway func(host string) bool, want string) {
	t.Helper()
	for _, tt := range urls {
		t.Run(tt.key, func(t *testing.T) {
			v, ok := env[tt.key]
			if !ok {
				t.Fatalf("%s has no %s", who, tt.key)
			}
			hp, path := urlHostPort(t, tt.key, v)
			if !isGateway(hp.Host) || hp.Port != tt.port {
				t.Errorf("%s = %q: want %s:%d", tt.key, v, want, tt.port)
			}
			if tt.path != "" && path != tt.path {
				t.Errorf("%s path %q, want %q", tt.key, path, tt.path)
			}
		})
	}
}

func TestComposeAgentShellReachesTheGateway(t *testing.T) {
	c := loadCompose(t)
	env := c.Services["agent-shell"].environment(t)
	agentAPI, egress, _ := loadListeners(t, composeGateway)
	tests := append([]gatewayURL{{key: "IRONCURTAIN_GATEWAY_URL", path: "", port: agentAPI.Port}}, agentGatewayURLs(agentAPI, egress)...)
	checkGatewayURLs(t, "the agent shell", env, tests, func(host string) bool { return host == "gateway" }, "gateway")
	// The gateway is reached directly, never through the proxy.
	if np := env["NO_PROXY"]; !contains(strings.Split(np, ","), "gateway") {
		t.Errorf("agent-shell NO_PROXY %q does not name gateway", np)
	}
}

func TestComposeAgentReachesTheGateway(t *testing.T) {
	c := loadCompose(t)
	env := c.Services["agent"].environment(t)
	agentAPI, egress, _ := loadListeners(t, composeGateway)
	// "gateway" is the gateway's service name, which resolves on agent_net
	// (the agent's only network) to the address the listeners are bound to.
	checkGatewayURLs(t, "the agent", env, agentGatewayURLs(agentAPI, egress), func(host string) bool { return host == "gateway" }, "gateway")
}

func TestComposeAppImagesAreNeverPulled(t *testing.T) {
	c := loadCompose(t)
	for _, name := range []string{"migrate", "gateway", "agent", "agent-shell"} {
		if p := c.Services[name].PullPolicy; p != "never" {
			t.Errorf("service %s: pull_policy %q, want never (the image is built by make images; a registry copy could be anyone's)", name, p)
		}
	}
}

// TestComposeEnvExampleDocumentsEveryVariable: every ${VAR} of the Compose
// file is in .env.example, with a comment above it.
func TestComposeEnvExampleDocumentsEveryVariable(t *testing.T) {
	example := lines(readFile(t, composeEnv))
	defined := map[string]bool{}
	documented := map[string]bool{}
	assign := regexp.MustCompile(`^#?\s?([A-Z_][A-Z0-9_]*)=`)
	for i, l := range example {
		m := assign.FindStringSubmatch(l)
		if m == nil {
			continue
		}
		defined[m[1]] = true
		// A comment above it, or above the block of assignments it is in.
		j := i - 1
		for j >= 0 && assign.MatchString(example[j]) && !strings.HasPrefix(example[j], "#") {
			j--
		}
		if j >= 0 && strings.HasPrefix(example[j], "#") {
			documented[m[1]] = true
		}
	}
	refs := varRefs(string(readFile(t, composeFile)))
	if len(refs) == 0 {
		t.Fatal("no ${VAR} in the Compose file: the check would prove nothing")
	}
	for _, v := range refs {
		if !defined[v] {
			t.Errorf("%s uses ${%s}, which %s does not list", composeFile, v, composeEnv)
		} else if !documented[v] {
			t.Errorf("%s: %s has no comment", composeEnv, v)
		}
	}
	// Secrets are files (compose/secrets/, make up writes them): the example
	// (and so compose/.env) holds none, not even empty.
	for _, l := range example {
		for _, secret := range []string{"POSTGRES_PASSWORD", "IRONCURTAIN_AGENT_TOKEN", "IRONCURTAIN_OPERATOR_TOKEN", "IRONCURTAIN_METRICS_TOKEN", "ANTHROPIC_API_KEY", "OPENAI_API_KEY", "GITHUB_TOKEN", "GRAFANA_ADMIN_PASSWORD"} {
			if strings.HasPrefix(strings.TrimLeft(l, "# "), secret+"=") {
				t.Errorf("%s lists %s: secrets are files under compose/secrets/", composeEnv, secret)
			}
		}
	}
}

// TestComposeConfigAccepted runs `config` of the Compose tool this machine
// has (docker compose v2 or docker-compose v1), so that both accept the file.
func TestComposeConfigAccepted(t *testing.T) {
	var tool []string
	if exec.Command("docker", "compose", "version").Run() == nil {
		tool = []string{"docker", "compose"}
	} else if p, err := exec.LookPath("docker-compose"); err == nil {
		tool = []string{p}
	} else {
		testenv.Missing(t, "neither docker compose nor docker-compose is installed (make up needs one)")
	}
	env := filepath.Join(t.TempDir(), "env")
	if err := os.WriteFile(env, []byte("IRONCURTAIN_OPS_PORT=8081\n"), 0o600); err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	overrides, err := filepath.Glob(repoPath("compose/agents/*.yml"))
	if err != nil {
		t.Fatal(err)
	}
	// The stack alone, with the agent shell, with each agent override, and
	// with the servers override (the launcher, docs/tools.md).
	runs := []string{"", "agent-shell", "+" + repoPath(composeServers)}
	for _, o := range overrides {
		runs = append(runs, "agent-shell+"+o)
	}
	for _, run := range runs {
		profile, override, _ := strings.Cut(run, "+")
		args := append([]string{}, tool[1:]...)
		args = append(args, "-p", composeProject, "--env-file", env, "-f", repoPath(composeFile))
		if override != "" {
			args = append(args, "-f", override)
		}
		if profile != "" {
			args = append(args, "--profile", profile)
		}
		args = append(args, "config", "-q")
		out, err := exec.CommandContext(ctx, tool[0], args...).CombinedOutput()
		if err != nil {
			t.Fatalf("%s config (profile %q, override %q): %v\n%s", strings.Join(tool, " "), profile, override, err, out)
		}
	}
}

// TestComposeAgentOverrides: each compose/agents/*.yml (docs/agents.md)
// changes the agent shell only, adds no network, port, volume, env_file or
// secret, interpolates no variable but the agent token and the shell's
// image, points every URL it sets at the gateway, and is accepted by the
// Compose tool together with the main file.
func TestComposeAgentOverrides(t *testing.T) {
	matches, err := filepath.Glob(repoPath("compose/agents/*.yml"))
	if err != nil {
		t.Fatal(err)
	}
	if len(matches) < 4 {
		t.Fatalf("compose/agents holds %d overrides, want one per agent of docs/agents.md (4)", len(matches))
	}
	agentAPI, _, _ := loadListeners(t, composeGateway)
	for _, m := range matches {
		rel := "compose/agents/" + filepath.Base(m)
		t.Run(filepath.Base(m), func(t *testing.T) {
			var o struct {
				Services map[string]struct {
					composeService `yaml:",inline"`
					Build          yaml.Node `yaml:"build"`
				} `yaml:"services"`
				Networks map[string]any `yaml:"networks"`
				Volumes  map[string]any `yaml:"volumes"`
				Secrets  map[string]any `yaml:"secrets"`
			}
			decodeYAML(t, rel, &o)
			if len(o.Networks)+len(o.Volumes)+len(o.Secrets) > 0 {
				t.Errorf("%s declares networks, volumes or secrets", rel)
			}
			if len(o.Services) != 1 {
				t.Fatalf("%s changes %d services, want agent-shell only", rel, len(o.Services))
			}
			s, ok := o.Services["agent-shell"]
			if !ok {
				t.Fatalf("%s does not change agent-shell", rel)
			}
			if s.Networks.Kind != 0 || len(s.Ports) > 0 || len(s.Expose) > 0 || len(s.Volumes) > 0 ||
				s.EnvFile.Kind != 0 || s.Secrets.Kind != 0 || s.NetworkMode != "" || s.Pid != "" || s.Ipc != "" ||
				s.Privileged || len(s.CapAdd) > 0 || len(s.Profiles) > 0 {
				t.Errorf("%s changes more of agent-shell than its image, build and environment", rel)
			}
			for _, ref := range varRefs(string(readFile(t, rel))) {
				if ref != "IC_AGENT_SHELL_IMAGE" {
					t.Errorf("%s interpolates ${%s} (the agent token comes from its file: IRONCURTAIN_AGENT_TOKEN_VARS)", rel, ref)
				}
			}
			env := s.environment(t)
			if names := strings.Fields(env["IRONCURTAIN_AGENT_TOKEN_VARS"]); len(names) == 0 {
				t.Errorf("%s names no model key variable in IRONCURTAIN_AGENT_TOKEN_VARS", rel)
			} else {
				for _, n := range names {
					if !regexp.MustCompile(`^[A-Z_][A-Z0-9_]*$`).MatchString(n) {
						t.Errorf("%s: IRONCURTAIN_AGENT_TOKEN_VARS names %q", rel, n)
					}
				}
			}
			for k, v := range env {
				if !strings.Contains(v, "://") {
					continue
				}
				hp, _ := urlHostPort(t, k, v)
				if hp.Host != "gateway" || hp.Port != agentAPI.Port {
					t.Errorf("%s: %s = %q does not point at the gateway's agent port", rel, k, v)
				}
			}
		})
	}
}
