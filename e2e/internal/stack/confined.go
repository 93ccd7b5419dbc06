package stack

import (
	"archive/tar"
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"sort"
	"strconv"
	"strings"
	"time"

	"github.com/moby/moby/api/types/build"
	"github.com/moby/moby/api/types/container"
	"github.com/moby/moby/api/types/mount"
	"github.com/moby/moby/client"
	"github.com/testcontainers/testcontainers-go"
	"github.com/testcontainers/testcontainers-go/network"
	"github.com/testcontainers/testcontainers-go/wait"

	"ironcurtain.dev/e2e/internal/mcpfixture"
)

// Confined asks for the third-party server topology (issue 26): the
// launcher in its own container holding the Docker socket, the evil
// server in image: mode on a server network of its own, and a remote
// streamable-HTTP server on the internet container in url: mode. The
// default topology has none of it.
//
//	srv_net (internal, no host address)  gateway (alias gateway-srv: :3128 proxy) ── evil server container(s)
//	no network                           launcher: Docker socket, unix socket on a volume shared with the gateway
type Confined struct {
	// EvilBinary is a static build of e2e/cmd/evilserver; ServerBaseImage
	// the image it is built on (IC_BASE_IMAGE).
	EvilBinary      string
	ServerBaseImage string
	// PolicyDir is gateway/policies/base: the suite's policy directory is
	// it plus one allow rule per test server.
	PolicyDir string
	// EvilEnv are extra variables of the evil server (the paths and
	// addresses it tries; mcpfixture.Env*), given by the test.
	EvilEnv map[string]string
	// Pids and MemoryMB are the evil server's limits.
	Pids, MemoryMB int
	// Runtimes are more servers in image: mode, by name: images of
	// images/servers (the Node and Python echo servers), run by the launcher
	// on the server network with RuntimePids and RuntimeMemoryMB, their
	// calls allowed by the suite's policy. The images must exist.
	Runtimes                     map[string]string
	RuntimePids, RuntimeMemoryMB int
}

// Names of the confined servers and paths of the confined topology.
const (
	EvilServer   = "evil"
	RemoteServer = "remote"
	HostMCP      = "mcp.internet.test" // the remote MCP server (url: mode)
	// HostGatewaySrv is the gateway's name on the server network.
	HostGatewaySrv = "gateway-srv"
	// SecretsDir holds the launcher token, the remote server's bearer
	// token and the launcher's configuration, in the gateway and the
	// launcher.
	SecretsDir       = "/run/ironcurtain/e2e-secrets"
	LauncherSockDir  = "/run/ironcurtain-launcher"
	LauncherSocket   = LauncherSockDir + "/launcher.sock"
	confinedPolicy   = "/etc/ironcurtain/e2e/policy"
	confinedAnnots   = "/etc/ironcurtain/e2e/annotations.json"
	launcherConfPath = SecretsDir + "/launcher.yaml"
	gatewayUID       = "10001"
)

// confinedState is what the confined topology adds to a Stack.
type confinedState struct {
	srvNet       string // name
	srvNetID     string
	secretsVol   string
	sockVol      string
	Launcher     *testcontainers.DockerContainer
	EvilImage    string
	LauncherTok  string
	RemoteToken  string
	evilImageTag string
}

// LauncherToken is the token shared by the gateway and the launcher.
func (s *Stack) LauncherToken() string { return s.confined.LauncherTok }

// RemoteToken is the remote MCP server's bearer token (the gateway's
// secret file).
func (s *Stack) RemoteToken() string { return s.confined.RemoteToken }

// EvilImage is the evil server's image reference.
func (s *Stack) EvilImage() string { return s.confined.EvilImage }

// LauncherLogs returns the launcher container's logs (the servers'
// stderr is logged there).
func (s *Stack) LauncherLogs(ctx context.Context) string {
	return containerLogs(ctx, s.confined.Launcher)
}

// ServerNetwork is the name of the evil server's network.
func (s *Stack) ServerNetwork() string { return s.confined.srvNet }

// CopyToGateway copies a file into the gateway container.
func (s *Stack) CopyToGateway(ctx context.Context, data []byte, path string, mode int64) error {
	return s.Gateway.CopyToContainer(ctx, data, path, mode)
}

// ExecGatewayStdin runs a command in the gateway container as the image's
// user with stdin.
func (s *Stack) ExecGatewayStdin(ctx context.Context, stdin []byte, cmd ...string) (ExecResult, error) {
	return execIn(ctx, s.cli, s.Gateway.ID, cmd, nil, stdin)
}

// DockerClient is the suite's Docker client (to inspect what the launcher
// started).
func (s *Stack) DockerClient() *client.Client { return s.cli }

// createServerNetwork creates the evil server's network: internal, and
// without a host address on its bridge (the launcher refuses any other).
func (s *Stack) createServerNetwork(ctx context.Context) error {
	n, err := s.createNetwork(ctx, "srv", true, map[string]string{inhibitIPv4: "true"})
	if err != nil {
		return err
	}
	s.confined.srvNet, s.confined.srvNetID = n.Name, n.ID
	return nil
}

// buildEvilImage builds the evil server's image on the offline base with
// the classic builder (no registry).
func (s *Stack) buildEvilImage(ctx context.Context) error {
	c := s.opts.Confined
	bin, err := os.ReadFile(c.EvilBinary)
	if err != nil {
		return fmt.Errorf("reading the evil server binary: %w", err)
	}
	var buf bytes.Buffer
	tw := tar.NewWriter(&buf)
	dockerfile := "FROM " + c.ServerBaseImage + "\nCOPY ic-e2e-evilserver /usr/local/bin/ic-e2e-evilserver\n" +
		"USER 65534:65534\nENTRYPOINT [\"/usr/local/bin/ic-e2e-evilserver\"]\n"
	for _, f := range []struct {
		name string
		mode int64
		data []byte
	}{{"Dockerfile", 0o644, []byte(dockerfile)}, {"ic-e2e-evilserver", 0o755, bin}} {
		if err := tw.WriteHeader(&tar.Header{Name: f.name, Mode: f.mode, Size: int64(len(f.data))}); err != nil {
			return err
		}
		if _, err := tw.Write(f.data); err != nil {
			return err
		}
	}
	if err := tw.Close(); err != nil {
		return err
	}
	tag := "ironcurtain/e2e-evil:" + s.RunID
	res, err := s.cli.ImageBuild(ctx, &buf, client.ImageBuildOptions{Tags: []string{tag}, Labels: s.labels,
		Version: build.BuilderV1, Remove: true, ForceRemove: true})
	if err != nil {
		return fmt.Errorf("building the evil server image: %w", err)
	}
	out, err := io.ReadAll(res.Body)
	res.Body.Close()
	if err != nil || bytes.Contains(out, []byte(`"errorDetail"`)) {
		return fmt.Errorf("building the evil server image: %v\n%s", err, out)
	}
	s.confined.evilImageTag = tag
	s.confined.EvilImage = tag
	return nil
}

// launcherConfig is the launcher's own configuration: the runtime servers
// and the evil server, on the server network, with the test's limits.
func (s *Stack) launcherConfig() []byte {
	c := s.opts.Confined
	q := strconv.Quote
	var b strings.Builder
	fmt.Fprintf(&b, "socket: %s\nsocket_gid: %s\ntoken_file: %s\nproxy: %s\nservers:\n",
		q(LauncherSocket), gatewayUID, q(SecretsDir+"/launcher-token"), q(HostGatewaySrv+":3128"))
	for _, name := range sortedKeys(c.Runtimes) {
		fmt.Fprintf(&b, "  %s:\n    image: %s\n    network: %s\n    user: \"65534:65534\"\n    memory_mb: %d\n    pids: %d\n    cpus: 0.5\n",
			name, q(c.Runtimes[name]), q(s.confined.srvNet), c.RuntimeMemoryMB, c.RuntimePids)
	}
	fmt.Fprintf(&b, "  %s:\n    image: %s\n    network: %s\n    user: \"65534:65534\"\n    memory_mb: %d\n    pids: %d\n    cpus: 0.5\n    env:\n",
		EvilServer, q(s.confined.EvilImage), q(s.confined.srvNet), c.MemoryMB, c.Pids)
	env := map[string]string{}
	for k, v := range c.EvilEnv {
		env[k] = v
	}
	// The internet container by address (its names do not resolve on the
	// server network).
	direct := s.InternetIP.String() + ":443," + s.InternetIP.String() + ":80"
	if env[mcpfixture.EnvTCP] != "" {
		direct += "," + env[mcpfixture.EnvTCP]
	}
	env[mcpfixture.EnvTCP] = direct
	for _, k := range sortedKeys(env) {
		fmt.Fprintf(&b, "      %s: %s\n", k, q(env[k]))
	}
	return []byte(b.String())
}

// createSecrets fills the secrets volume: the launcher token (root, group
// of the gateway, 0640), the remote bearer token (the gateway's, 0600) and
// launcher.yaml; and creates the launcher's socket volume.
func (s *Stack) createSecrets(ctx context.Context) error {
	mk := func(role string) (string, error) {
		v, err := s.cli.VolumeCreate(ctx, client.VolumeCreateOptions{Name: s.name(role), Labels: s.labels})
		if err != nil {
			return "", fmt.Errorf("creating the %s volume: %w", role, err)
		}
		s.extraVolumes = append(s.extraVolumes, v.Volume.Name)
		return v.Volume.Name, nil
	}
	var err error
	if s.confined.secretsVol, err = mk("secrets"); err != nil {
		return err
	}
	if s.confined.sockVol, err = mk("launcher-sock"); err != nil {
		return err
	}
	script := "set -e; cd /in; " +
		"install -o 0 -g " + gatewayUID + " -m 0640 launcher-token /s/launcher-token; " +
		"install -o " + gatewayUID + " -g " + gatewayUID + " -m 0600 remote-token /s/remote-token; " +
		"install -o 0 -g 0 -m 0644 launcher.yaml /s/launcher.yaml; chmod 0755 /s"
	_, err = s.oneShot(ctx, s.opts.BaseImage, "secrets-init", []string{"-c", script},
		testcontainers.WithEntrypoint("sh"),
		testcontainers.WithMounts(testcontainers.VolumeMount(s.confined.secretsVol, "/s")),
		testcontainers.WithConfigModifier(func(c *container.Config) { c.User = "0"; c.Healthcheck = noHealthcheck }),
		testcontainers.WithFiles(
			testcontainers.ContainerFile{Reader: bytesReader([]byte(s.confined.LauncherTok + "\n")), ContainerFilePath: "/in/launcher-token", FileMode: 0o600},
			testcontainers.ContainerFile{Reader: bytesReader([]byte(s.confined.RemoteToken + "\n")), ContainerFilePath: "/in/remote-token", FileMode: 0o600},
			testcontainers.ContainerFile{Reader: bytesReader(s.launcherConfig()), ContainerFilePath: "/in/launcher.yaml", FileMode: 0o644},
		),
		s.dbNet.on(nil))
	return err
}

// startLauncher runs `ironcurtain launcher` from the gateway image as
// compose/docker-compose.servers.yml does: root (the Docker socket is
// root's), no network, read-only root, every capability dropped but
// CHOWN (the socket's group).
func (s *Stack) startLauncher(ctx context.Context) error {
	c, err := testcontainers.Run(ctx, s.opts.GatewayImage,
		testcontainers.WithName(s.name("launcher")),
		testcontainers.WithLabels(s.labels),
		testcontainers.WithEntrypoint("ironcurtain"),
		testcontainers.WithCmd("launcher", "--config", launcherConfPath),
		testcontainers.WithConfigModifier(func(c *container.Config) { c.User = "0:0"; c.Healthcheck = noHealthcheck }),
		testcontainers.WithHostConfigModifier(func(hc *container.HostConfig) {
			hc.NetworkMode = "none"
			hc.ReadonlyRootfs = true
			hc.CapDrop = []string{"ALL"}
			hc.CapAdd = []string{"CHOWN"}
			hc.SecurityOpt = []string{"no-new-privileges:true"}
			hc.Mounts = append(hc.Mounts,
				mount.Mount{Type: mount.TypeBind, Source: "/var/run/docker.sock", Target: "/var/run/docker.sock"},
				mount.Mount{Type: mount.TypeVolume, Source: s.confined.sockVol, Target: LauncherSockDir},
				mount.Mount{Type: mount.TypeVolume, Source: s.confined.secretsVol, Target: SecretsDir, ReadOnly: true})
		}),
		testcontainers.WithWaitStrategy(wait.ForLog("launcher: listening").WithStartupTimeout(time.Minute)),
	)
	s.confined.Launcher = c
	if err != nil {
		return fmt.Errorf("starting the launcher: %w", err)
	}
	return nil
}

// confinedGateway returns what the confined topology adds to a gateway
// container: the server network, the two volumes, the policy directory
// and annotations.
func (s *Stack) confinedGateway() ([]testcontainers.ContainerCustomizer, error) {
	if s.opts.Confined == nil {
		return nil, nil
	}
	files, err := s.confinedPolicyFiles()
	if err != nil {
		return nil, err
	}
	return []testcontainers.ContainerCustomizer{
		network.WithNetworkName([]string{HostGatewaySrv}, s.confined.srvNet),
		testcontainers.WithHostConfigModifier(func(hc *container.HostConfig) {
			hc.Mounts = append(hc.Mounts,
				mount.Mount{Type: mount.TypeVolume, Source: s.confined.sockVol, Target: LauncherSockDir},
				mount.Mount{Type: mount.TypeVolume, Source: s.confined.secretsVol, Target: SecretsDir, ReadOnly: true})
		}),
		testcontainers.WithFiles(files...),
	}, nil
}

// confinedPolicyFiles are the suite's policy directory (the base policy
// with an allow rule for each test server before its final deny) and the
// test servers' annotations, pinned to the definitions they list.
func (s *Stack) confinedPolicyFiles() ([]testcontainers.ContainerFile, error) {
	dir := s.opts.Confined.PolicyDir
	var files []testcontainers.ContainerFile
	for _, name := range []string{"tool-annotations.json", "dynamic-lists.json"} {
		b, err := os.ReadFile(filepath.Join(dir, name))
		if err != nil {
			return nil, fmt.Errorf("reading the base policy: %w", err)
		}
		files = append(files, testcontainers.ContainerFile{Reader: bytesReader(b), ContainerFilePath: confinedPolicy + "/" + name, FileMode: 0o644})
	}
	compiled, err := confinedCompiledPolicy(filepath.Join(dir, "compiled-policy.json"), sortedKeys(s.opts.Confined.Runtimes))
	if err != nil {
		return nil, err
	}
	evil, err := mcpfixture.Annotations(EvilServer, []mcpfixture.Tool{mcpfixture.EvilTool})
	if err != nil {
		return nil, err
	}
	remote, err := mcpfixture.Annotations(RemoteServer, mcpfixture.RemoteTools)
	if err != nil {
		return nil, err
	}
	servers := map[string]any{EvilServer: evil, RemoteServer: remote}
	for name := range s.opts.Confined.Runtimes {
		if servers[name], err = mcpfixture.Annotations(name, []mcpfixture.Tool{mcpfixture.RuntimeEchoTool}); err != nil {
			return nil, err
		}
	}
	annots, err := json.MarshalIndent(map[string]any{"servers": servers}, "", "  ")
	if err != nil {
		return nil, err
	}
	return append(files,
		testcontainers.ContainerFile{Reader: bytesReader(compiled), ContainerFilePath: confinedPolicy + "/compiled-policy.json", FileMode: 0o644},
		testcontainers.ContainerFile{Reader: bytesReader(annots), ContainerFilePath: confinedAnnots, FileMode: 0o644},
	), nil
}

// confinedCompiledPolicy is the base compiled policy with "allow every
// call to the evil, remote and runtime servers" before its last rule (the
// final deny): what the servers do is the point of the test, not the
// policy.
func confinedCompiledPolicy(path string, runtimes []string) ([]byte, error) {
	b, err := os.ReadFile(path)
	if err != nil {
		return nil, fmt.Errorf("reading the base policy: %w", err)
	}
	var doc map[string]json.RawMessage
	if err := json.Unmarshal(b, &doc); err != nil {
		return nil, fmt.Errorf("reading %s: %w", path, err)
	}
	var rules []json.RawMessage
	if err := json.Unmarshal(doc["rules"], &rules); err != nil || len(rules) == 0 {
		return nil, fmt.Errorf("reading the rules of %s: %v", path, err)
	}
	var extra []json.RawMessage
	for _, srv := range append([]string{EvilServer, RemoteServer}, runtimes...) {
		r, err := json.Marshal(map[string]any{
			"name":        "allow-e2e-" + srv,
			"description": "TEST ONLY (e2e confined topology): every call to the suite's " + srv + " server is allowed.",
			"principle":   "The e2e suite's own test servers may be called.",
			"if":          map[string]any{"server": []string{srv}},
			"then":        "allow",
			"reason":      "The e2e suite calls its " + srv + " test server.",
		})
		if err != nil {
			return nil, err
		}
		extra = append(extra, r)
	}
	last := len(rules) - 1
	rules = append(append(rules[:last:last], extra...), rules[last])
	if doc["rules"], err = json.Marshal(rules); err != nil {
		return nil, err
	}
	return json.MarshalIndent(doc, "", "  ")
}

// confinedConfig is what the confined topology adds to gateway.yaml: the
// servers (under servers:) and the top-level sections.
func (s *Stack) confinedConfig() (servers, top string) {
	if s.opts.Confined == nil {
		return "", ""
	}
	q := strconv.Quote
	for _, name := range sortedKeys(s.opts.Confined.Runtimes) {
		servers += fmt.Sprintf("  # A runtime server image (images/servers) in image: mode: no egress at all.\n  %s:\n    image: %s\n",
			name, q(s.opts.Confined.Runtimes[name]))
	}
	servers += fmt.Sprintf(`  # The confined topology (issue 26): a hostile server in its own container
  # (image: mode, started by the launcher) and a remote one (url: mode).
  %s:
    image: %s
    egress:
      allowed_hosts: [%s]
  %s:
    url: %s
    bearer_token_file: %s
`, EvilServer, q(s.confined.EvilImage), q(HostAllowed), RemoteServer, q("https://"+HostMCP+"/mcp"), q(SecretsDir+"/remote-token"))
	top = fmt.Sprintf(`
# The confined topology: its own policy directory (the base policy plus an
# allow rule per test server) and the test servers' pinned annotations.
annotations_file: %s

launcher:
  socket: %s
  token_file: %s
`, q(confinedAnnots), q(LauncherSocket), q(SecretsDir+"/launcher-token"))
	return servers, top
}

// removeConfined removes the evil image and any server container the
// launcher left.
func (s *Stack) removeConfined(ctx context.Context) {
	if s.opts.Confined == nil {
		return
	}
	for _, name := range append([]string{EvilServer}, sortedKeys(s.opts.Confined.Runtimes)...) {
		_, _ = s.cli.ContainerRemove(ctx, "ironcurtain-srv-"+name, client.ContainerRemoveOptions{Force: true})
	}
	if s.confined.srvNetID != "" {
		_, _ = s.cli.NetworkRemove(ctx, s.confined.srvNetID, client.NetworkRemoveOptions{})
	}
	if s.confined.evilImageTag != "" {
		_, _ = s.cli.ImageRemove(ctx, s.confined.evilImageTag, client.ImageRemoveOptions{Force: true, PruneChildren: true})
	}
}

func sortedKeys[V any](m map[string]V) []string {
	out := make([]string, 0, len(m))
	for k := range m {
		out = append(out, k)
	}
	sort.Strings(out)
	return out
}
