package deploy

import (
	"path/filepath"
	"slices"
	"strings"
	"testing"

	"go.yaml.in/yaml/v3"
)

const composeServers = "compose/docker-compose.servers.yml"

// TestComposeServersOverride: the servers override
// (compose/docker-compose.servers.yml, docs/tools.md "image: mode") adds
// the launcher and changes the gateway and agent_net only. The launcher is
// the only service of any Compose file that mounts the Docker socket, and
// it is confined: never pulled, no network, read-only root, every
// capability dropped but CHOWN, no-new-privileges, no port. The gateway
// gets the launcher's socket volume and the servers configuration, never
// the Docker socket. agent_net stays internal and loses its host address
// (the launcher refuses a server network with one). `make up` never reads
// the override (compose/stack.sh names only docker-compose.yml), so a
// stack without third-party servers is unchanged.
func TestComposeServersOverride(t *testing.T) {
	type service struct {
		composeService `yaml:",inline"`
		CapDrop        []string `yaml:"cap_drop"`
		SecurityOpt    []string `yaml:"security_opt"`
		User           string   `yaml:"user"`
		Build          any      `yaml:"build"`
	}
	var o struct {
		Services map[string]service        `yaml:"services"`
		Networks map[string]composeNetwork `yaml:"networks"`
		Volumes  map[string]any            `yaml:"volumes"`
		Secrets  map[string]any            `yaml:"secrets"`
	}
	decodeYAML(t, composeServers, &o)

	var names []string
	for n := range o.Services {
		names = append(names, n)
	}
	slices.Sort(names)
	if strings.Join(names, ",") != "gateway,launcher" {
		t.Fatalf("%s changes services %v, want the launcher and the gateway only", composeServers, names)
	}

	l := o.Services["launcher"]
	switch {
	case l.Image != "${IC_GATEWAY_IMAGE:-ironcurtain/gateway:dev}" || l.PullPolicy != "never" || l.Build != nil:
		t.Errorf("launcher: image %q, pull_policy %q, build %v: want the gateway image, never pulled or built", l.Image, l.PullPolicy, l.Build)
	case l.NetworkMode != "none" || l.Networks.Kind != 0 || len(l.Ports) > 0 || len(l.Expose) > 0:
		t.Errorf("launcher: network_mode %q, networks %v, ports %v, expose %v: want no network at all", l.NetworkMode, l.Networks.Kind, l.Ports, l.Expose)
	case !l.ReadOnly || l.Privileged || l.Pid != "" || l.Ipc != "":
		t.Errorf("launcher: read_only %v, privileged %v, pid %q, ipc %q", l.ReadOnly, l.Privileged, l.Pid, l.Ipc)
	case !slices.Equal(l.CapDrop, []string{"ALL"}) || !slices.Equal(l.CapAdd, []string{"CHOWN"}):
		t.Errorf("launcher: cap_drop %v, cap_add %v: want ALL dropped, CHOWN alone added (the socket's group)", l.CapDrop, l.CapAdd)
	case !slices.Contains(l.SecurityOpt, "no-new-privileges:true"):
		t.Errorf("launcher: security_opt %v lacks no-new-privileges:true", l.SecurityOpt)
	case l.EnvFile.Kind != 0 || l.Secrets.Kind != 0 || len(l.environment(t)) > 0:
		t.Errorf("launcher: it takes no environment, env_file or Compose secret (its token is a file it mounts)")
	}
	cmd := strings.Join(stringsOf(t, l.Command), " ")
	if cmd != "launcher --config /etc/ironcurtain/launcher.yaml" {
		t.Errorf("launcher: command %q", cmd)
	}
	if !mountsDockerSocket(l.Volumes) {
		t.Error("launcher: does not mount the Docker socket (it starts the servers)")
	}

	g := o.Services["gateway"]
	if mountsDockerSocket(g.Volumes) {
		t.Error("the override gives the gateway the Docker socket")
	}
	for _, want := range []string{"./gateway.servers.yaml:/etc/ironcurtain/gateway.yaml:ro", "launcher_sock:/run/ironcurtain-launcher"} {
		if !slices.Contains(volumeStrings(g.Volumes), want) {
			t.Errorf("gateway: volumes %v lack %q", g.Volumes, want)
		}
	}
	if g.Image != "" || g.Networks.Kind != 0 || len(g.Ports) > 0 || g.Privileged || len(g.CapAdd) > 0 || g.NetworkMode != "" || g.Environment.Kind != 0 {
		t.Error("the override changes more of the gateway than its volumes and start order")
	}
	if len(o.Secrets) > 0 {
		t.Errorf("the override declares Compose secrets %v", o.Secrets)
	}
	if _, ok := o.Volumes["launcher_sock"]; !ok || len(o.Volumes) != 1 {
		t.Errorf("the override declares volumes %v, want launcher_sock only", o.Volumes)
	}

	n, ok := o.Networks["agent_net"]
	if len(o.Networks) != 1 || !ok {
		t.Fatalf("the override changes networks %v, want agent_net only", o.Networks)
	}
	var main composeSpec
	decodeYAML(t, composeFile, &main)
	if !n.Internal || n.Name != main.Networks["agent_net"].dockerName("agent_net") || n.DriverOpts["com.docker.network.bridge.inhibit_ipv4"] != "true" {
		t.Errorf("agent_net in the override: %+v; want internal, named as in %s (%q), without a host address", n, composeFile, main.Networks["agent_net"].dockerName("agent_net"))
	}

	// The Docker socket: the launcher alone, in every Compose file.
	files := []string{composeFile, obsCompose}
	agents, err := filepath.Glob(repoPath("compose/agents/*.yml"))
	if err != nil {
		t.Fatal(err)
	}
	for _, a := range agents {
		files = append(files, "compose/agents/"+filepath.Base(a))
	}
	for _, f := range files {
		var spec composeSpec
		decodeYAML(t, f, &spec)
		for name, s := range spec.Services {
			if name == "launcher" || mountsDockerSocket(s.Volumes) {
				t.Errorf("%s: service %s is a launcher or mounts the Docker socket; only the servers override may", f, name)
			}
		}
	}

	// make up: compose/stack.sh starts docker-compose.yml alone.
	stack := string(readFile(t, "compose/stack.sh"))
	if strings.Contains(stack, "docker-compose.servers.yml") || strings.Contains(stack, "launcher") {
		t.Error("compose/stack.sh (make up) names the servers override or the launcher: a stack without servers would change")
	}
	if !strings.Contains(stack, `-f "$here/docker-compose.yml"`) {
		t.Error("compose/stack.sh no longer names docker-compose.yml as its file: update this test")
	}
}

// stringsOf decodes a Compose command (a list, or one string split on
// spaces as Compose does for the simple case).
func stringsOf(t *testing.T, n yaml.Node) []string {
	t.Helper()
	var list []string
	if err := n.Decode(&list); err == nil {
		return list
	}
	var one string
	if err := n.Decode(&one); err != nil {
		t.Fatalf("command: %v", err)
	}
	return strings.Fields(one)
}

// volumeStrings are a service's short-syntax volumes.
func volumeStrings(vols []any) []string {
	var out []string
	for _, v := range vols {
		if s, ok := v.(string); ok {
			out = append(out, s)
		}
	}
	return out
}

// mountsDockerSocket reports whether a service's volumes (short or long
// syntax) mount the Docker socket.
func mountsDockerSocket(vols []any) bool {
	for _, v := range vols {
		var src string
		switch v := v.(type) {
		case string:
			src, _, _ = strings.Cut(v, ":")
		case map[string]any:
			src, _ = v["source"].(string)
		}
		if strings.HasSuffix(src, "docker.sock") {
			return true
		}
	}
	return false
}
