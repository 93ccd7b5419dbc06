// Package stack starts and drives the end-to-end topology of IronCurtain on
// private Docker networks with testcontainers-go, like the Compose file:
//
//	agent_net (internal, no host address)  agent ── gateway
//	egress_net (internal)          gateway ── internet (the suite's own: pages, git, fake model)
//	db_net (internal)              gateway ── postgres
//	ops_net                        gateway :8081 published on 127.0.0.1 only (the operator)
//
// The gateway and agent containers come from the real images; the suite
// adds only files (gateway.yaml, agent token files, the run's CA in the
// gateway's system trust store, a probe binary in the agent container) and
// overrides the agent container's main process with the idle probe, so
// that every agent command runs with docker exec in the same container.
// Nothing is pulled; every object is labelled (LabelRun, LabelPID) and
// removed by Close, or by ReapLeftovers in a later run.
package stack

import (
	"context"
	"crypto/rand"
	"encoding/hex"
	"errors"
	"fmt"
	"net/netip"
	"os"
	"strconv"
	"strings"
	"time"

	"github.com/moby/moby/api/types/container"
	"github.com/moby/moby/api/types/mount"
	mobynet "github.com/moby/moby/api/types/network"
	"github.com/moby/moby/client"
	"github.com/testcontainers/testcontainers-go"
	"github.com/testcontainers/testcontainers-go/network"
	"github.com/testcontainers/testcontainers-go/wait"

	"ironcurtain.dev/e2e/internal/pki"
	"ironcurtain.dev/e2e/internal/tcenv"
)

// Host names of the suite's internet container (network aliases on the
// egress network) and of the gateway and Postgres.
const (
	HostAllowed  = "allowed.internet.test"  // in egress.allowed_hosts
	HostBlocked  = "blocked.internet.test"  // answers, but not allowlisted
	HostGit      = "git.internet.test"      // git smart HTTP
	HostModel    = "model.internet.test"    // fake Anthropic API
	HostGitHub   = "api.internet.test"      // fake GitHub API (github.api_url)
	HostApprover = "approver.internet.test" // naive auto-approver model (OpenAI API; relay.openai)
	hostInternet = "internet"
	hostGateway  = "gateway"
	// hostGatewayOps is the gateway's name on the ops network only; the
	// ops API listens on that address alone.
	hostGatewayOps = "gateway-ops"
	hostPostgres   = "postgres"
)

// GitRepo is the bare repository the internet container serves; OwnerRepo
// is the one served under an owner (git.internet.test/acme/app.git), the
// layout the git door (/git/<host>/<owner>/<repo>.git) and the fake GitHub
// API name.
const (
	GitRepo   = "project"
	OwnerRepo = "acme/app"
)

// Paths inside the agent container.
const (
	ProbePath     = "/opt/ic-e2e/probe"
	AgentCAPath   = "/opt/ic-e2e/ca.crt"
	TranscriptDir = "/opt/ic-e2e/transcripts"
)

// Postgres credentials of the run (the password is random per run).
const (
	dbUser = "ironcurtain"
	dbName = "ironcurtain"
)

// Polling intervals.
const (
	pollShort = 50 * time.Millisecond
	pollLong  = 500 * time.Millisecond
)

// Options say which images and host-built fixtures to use.
type Options struct {
	GatewayImage  string // the real gateway image (ironcurtain/gateway:dev)
	AgentImage    string // the real agent image (ironcurtain/agent:dev)
	PostgresImage string // IC_POSTGRES_IMAGE
	BaseImage     string // the base image the fixtures run in (git, sh)
	// AgentShellImage, when set, starts the agent-shell image
	// (ironcurtain/agent-shell:dev) on the agent network as Shell, with
	// the agent token of ShellSession.
	AgentShellImage string
	ShellSession    string

	InternetBinary string // static build of e2e/cmd/internet
	ProbeBinary    string // static build of e2e/cmd/probe
	ModelScript    []byte // the fake model's conversation (JSON, see cmd/internet)

	// Sessions get an agent token file each (besides "agent").
	Sessions []string
	// SessionWorkspaces, when set, is the gateway's session_workspaces.root
	// (kept after revocation, for inspection): each minted session gets its
	// own sandbox directory there.
	SessionWorkspaces string
	// Confined, when set, adds the launcher, the evil image: server and
	// the remote url: server (confined.go).
	Confined *Confined
	// SessionWorkspacesHostDir, when set with SessionWorkspaces, is a host
	// directory bind-mounted there (writable by the gateway's uid 10001), as
	// the compose stack does: `ironcurtain run --workspaces-dir` then mounts
	// a session's directory into its agent container.
	SessionWorkspacesHostDir string
	// Logf receives progress lines (t.Logf or log.Printf).
	Logf func(format string, args ...any)
}

// Secrets are the run's credentials. Only the gateway (and the fake
// providers in the internet container that check them) ever hold them.
type Secrets struct {
	ModelKey      string // ANTHROPIC_API_KEY of the gateway
	GitToken      string // GITHUB_TOKEN of the gateway (sent to git.internet.test)
	OperatorToken string // IRONCURTAIN_OPERATOR_TOKEN
	DBPassword    string
}

// Named returns the secrets by name, for scans.
func (s Secrets) Named() map[string]string {
	return map[string]string{
		"ANTHROPIC_API_KEY": s.ModelKey, "GITHUB_TOKEN": s.GitToken,
		"IRONCURTAIN_OPERATOR_TOKEN": s.OperatorToken, "database password": s.DBPassword,
	}
}

// Stack is a running topology.
type Stack struct {
	opts   Options
	cli    *client.Client
	RunID  string
	labels map[string]string

	CA      *pki.CA
	Secrets Secrets
	// AgentTokens maps session → agent token ("agent" included).
	AgentTokens map[string]string

	EgressSubnet netip.Prefix
	InternetIP   netip.Addr

	nets      []*dockerNet
	volume    string
	opsNet    *dockerNet
	agentNet  *dockerNet
	egressNet *dockerNet
	dbNet     *dockerNet

	Postgres *testcontainers.DockerContainer
	Gateway  *testcontainers.DockerContainer
	Internet *testcontainers.DockerContainer
	Agent    *testcontainers.DockerContainer
	Shell    *testcontainers.DockerContainer // the agent-shell container (nil unless Options.AgentShellImage)
	oneShots []*testcontainers.DockerContainer

	// Replicas (replica.go): the extra gateway containers, and in a
	// replica's view its names on the agent and ops networks.
	replicas           *[]*testcontainers.DockerContainer
	agentHost, opsHost string

	// confined is the confined topology (Options.Confined); extraVolumes
	// are its volumes.
	confined     *confinedState
	extraVolumes []string
}

// Start builds the topology. On error it removes what it created.
func Start(ctx context.Context, opts Options) (_ *Stack, err error) {
	if opts.Logf == nil {
		opts.Logf = func(string, ...any) {}
	}
	// The reaper image cannot be pulled without a registry; Close and
	// ReapLeftovers clean up instead. (Test packages call this from their
	// TestMain already: testcontainers reads it with its first client.)
	tcenv.NoReaper()
	cli, err := testcontainers.NewDockerClientWithOpts(ctx)
	if err != nil {
		return nil, fmt.Errorf("connecting to Docker: %w", err)
	}
	if _, err := cli.Ping(ctx, client.PingOptions{}); err != nil {
		cli.Close()
		return nil, fmt.Errorf("connecting to Docker: %w", err)
	}
	ReapLeftovers(ctx, cli.Client)

	s := &Stack{opts: opts, cli: cli.Client, RunID: randomHex(4), AgentTokens: map[string]string{},
		replicas: new([]*testcontainers.DockerContainer), agentHost: hostGateway, opsHost: hostGatewayOps}
	s.labels = map[string]string{LabelRun: s.RunID, LabelPID: strconv.Itoa(os.Getpid())}
	defer func() {
		if err != nil {
			if s.confined != nil && s.confined.Launcher != nil {
				opts.Logf("launcher logs:\n%s", s.LauncherLogs(context.WithoutCancel(ctx)))
			}
			s.Close(context.WithoutCancel(ctx))
		}
	}()
	s.Secrets = Secrets{
		ModelKey:      "sk-ant-e2e-" + randomHex(20),
		GitToken:      "ghp_e2e" + randomHex(18),
		OperatorToken: "ic-op-e2e-" + randomHex(16),
		DBPassword:    "db-e2e-" + randomHex(12),
	}
	s.AgentTokens["agent"] = "ic-agent-e2e-" + randomHex(16)
	for _, name := range opts.Sessions {
		s.AgentTokens[name] = "ic-agent-e2e-" + randomHex(16)
	}
	if opts.Confined != nil {
		s.confined = &confinedState{LauncherTok: "ic-launcher-e2e-" + randomHex(24), RemoteToken: "ic-remote-e2e-" + randomHex(20)}
	}
	if s.CA, err = pki.NewCA("IronCurtain e2e CA " + s.RunID); err != nil {
		return nil, err
	}

	steps := []struct {
		name string
		fn   func(context.Context) error
	}{
		{"networks", s.createNetworks},
		{"workspace volume", s.createWorkspace},
		{"postgres", s.startPostgres},
		{"migrations", s.migrate},
		{"internet", s.startInternet},
	}
	if opts.Confined != nil {
		steps = append(steps, []struct {
			name string
			fn   func(context.Context) error
		}{
			{"server network", s.createServerNetwork},
			{"evil server image", s.buildEvilImage},
			{"secrets", s.createSecrets},
			{"launcher", s.startLauncher},
		}...)
	}
	steps = append(steps, []struct {
		name string
		fn   func(context.Context) error
	}{
		{"gateway", s.startGateway},
		{"agent", s.startAgent},
		{"agent shell", s.startShell},
	}...)
	for _, st := range steps {
		begin := time.Now()
		if err := st.fn(ctx); err != nil {
			return nil, fmt.Errorf("starting the e2e stack: %s: %w", st.name, err)
		}
		opts.Logf("e2e stack %s: %s ready in %s", s.RunID, st.name, time.Since(begin).Round(10*time.Millisecond))
	}
	return s, nil
}

// Close removes every container, network and volume of the run.
func (s *Stack) Close(ctx context.Context) {
	all := append([]*testcontainers.DockerContainer{s.Shell, s.Agent, s.Gateway, s.Internet, s.Postgres}, s.oneShots...)
	if s.confined != nil {
		// The launcher last but one: it removes the server containers it
		// started when the gateway's streams end.
		all = append(all, s.confined.Launcher)
	}
	if s.replicas != nil {
		all = append(all, *s.replicas...)
	}
	for _, c := range all {
		if c != nil {
			_ = c.Terminate(ctx, testcontainers.StopTimeout(time.Second))
		}
	}
	s.removeConfined(ctx)
	for _, n := range s.nets {
		_, _ = s.cli.NetworkRemove(ctx, n.ID, client.NetworkRemoveOptions{})
	}
	for _, v := range append([]string{s.volume}, s.extraVolumes...) {
		if v != "" {
			_, _ = s.cli.VolumeRemove(ctx, v, client.VolumeRemoveOptions{Force: true})
		}
	}
	s.cli.Close()
}

// AgentNetwork is the name of the agent network (where `ironcurtain run`
// starts its agent container).
func (s *Stack) AgentNetwork() string { return s.agentNet.Name }

// AgentHost is the gateway's name on the agent network.
func (s *Stack) AgentHost() string { return s.agentHost }

func (s *Stack) name(role string) string { return "ic-e2e-" + s.RunID + "-" + role }

// inhibitIPv4 is the bridge driver option that gives a network no IPv4
// address on the host, as compose/docker-compose.yml sets on agent_net: an
// internal bridge's host address would let the agent reach every host
// service listening on 0.0.0.0.
const inhibitIPv4 = "com.docker.network.bridge.inhibit_ipv4"

// dockerNet is a network of the run, created with the Docker client
// (testcontainers' network.New silently drops driver options, so
// inhibitIPv4 would never apply).
type dockerNet struct{ ID, Name string }

// on attaches a container to the network with aliases.
func (n *dockerNet) on(aliases []string) testcontainers.CustomizeRequestOption {
	return network.WithNetworkName(aliases, n.Name)
}

// createNetwork creates a bridge network of the run as the Compose file
// declares it: internal or not, with its driver options.
func (s *Stack) createNetwork(ctx context.Context, role string, internal bool, options map[string]string) (*dockerNet, error) {
	name := s.name(role)
	res, err := s.cli.NetworkCreate(ctx, name, client.NetworkCreateOptions{
		Driver: "bridge", Internal: internal, Labels: s.labels, Options: options})
	if err != nil {
		return nil, fmt.Errorf("creating the %s network: %w", role, err)
	}
	n := &dockerNet{ID: res.ID, Name: name}
	s.nets = append(s.nets, n)
	return n, nil
}

// createNetworks creates the four networks of compose/docker-compose.yml
// (agent_net internal and without a host address, db_net internal,
// ops_net with the host route); egress is internal too: in the suite the
// gateway's "internet" is our container only, nothing reaches the real
// internet.
func (s *Stack) createNetworks(ctx context.Context) error {
	var err error
	// The operator's network is the only one with a route to the host, so
	// that the ops port can be published (on 127.0.0.1). The agent is never
	// on it.
	if s.opsNet, err = s.createNetwork(ctx, "ops", false, nil); err != nil {
		return err
	}
	if s.agentNet, err = s.createNetwork(ctx, "agent", true, map[string]string{inhibitIPv4: "true"}); err != nil {
		return err
	}
	if s.egressNet, err = s.createNetwork(ctx, "egress", true, nil); err != nil {
		return err
	}
	if s.dbNet, err = s.createNetwork(ctx, "db", true, nil); err != nil {
		return err
	}
	ins, err := s.cli.NetworkInspect(ctx, s.egressNet.ID, client.NetworkInspectOptions{})
	if err != nil {
		return fmt.Errorf("inspecting the egress network: %w", err)
	}
	for _, c := range ins.Network.IPAM.Config {
		if c.Subnet.IsValid() && c.Subnet.Addr().Is4() {
			s.EgressSubnet = c.Subnet.Masked()
		}
	}
	if !s.EgressSubnet.IsValid() {
		return errors.New("the egress network has no IPv4 subnet")
	}
	return nil
}

// createWorkspace makes the shared /workspace volume, owned by the uid the
// gateway and agent images run as.
func (s *Stack) createWorkspace(ctx context.Context) error {
	v, err := s.cli.VolumeCreate(ctx, client.VolumeCreateOptions{Name: s.name("workspace"), Labels: s.labels})
	if err != nil {
		return fmt.Errorf("creating the workspace volume: %w", err)
	}
	s.volume = v.Volume.Name
	_, err = s.oneShot(ctx, s.opts.BaseImage, "workspace-init", []string{"-c", "chown 10001:10001 /workspace && chmod 0755 /workspace"},
		testcontainers.WithEntrypoint("sh"),
		testcontainers.WithMounts(testcontainers.VolumeMount(s.volume, workspace)),
		testcontainers.WithConfigModifier(func(c *container.Config) { c.User = "0"; c.Healthcheck = noHealthcheck }),
		s.dbNet.on(nil))
	return err
}

// noHealthcheck turns off the image's healthcheck in fixture containers
// made from the gateway image.
var noHealthcheck = &container.HealthConfig{Test: []string{"NONE"}}

// oneShot runs a container to completion and returns its logs; a non-zero
// exit is an error that includes them.
func (s *Stack) oneShot(ctx context.Context, image, role string, cmd []string, opts ...testcontainers.ContainerCustomizer) (string, error) {
	all := append([]testcontainers.ContainerCustomizer{
		testcontainers.WithName(s.name(role)),
		testcontainers.WithLabels(s.labels),
		testcontainers.WithCmd(cmd...),
		testcontainers.WithWaitStrategy(wait.ForExit().WithExitTimeout(2 * time.Minute)),
	}, opts...)
	c, err := testcontainers.Run(ctx, image, all...)
	if c != nil {
		s.oneShots = append(s.oneShots, c)
	}
	if err != nil {
		return "", fmt.Errorf("running %s: %w", role, err)
	}
	logs := containerLogs(ctx, c)
	st, err := c.State(ctx)
	if err != nil {
		return logs, fmt.Errorf("inspecting %s: %w", role, err)
	}
	if st.ExitCode != 0 {
		return logs, fmt.Errorf("%s exited with %d:\n%s", role, st.ExitCode, logs)
	}
	return logs, nil
}

func (s *Stack) startPostgres(ctx context.Context) error {
	c, err := testcontainers.Run(ctx, s.opts.PostgresImage,
		testcontainers.WithName(s.name("postgres")),
		testcontainers.WithLabels(s.labels),
		s.dbNet.on([]string{hostPostgres}),
		testcontainers.WithEnv(map[string]string{"POSTGRES_USER": dbUser, "POSTGRES_PASSWORD": s.Secrets.DBPassword, "POSTGRES_DB": dbName}),
		testcontainers.WithHostConfigModifier(func(hc *container.HostConfig) {
			hc.Mounts = append(hc.Mounts, mount.Mount{Type: mount.TypeVolume, Target: "/var/lib/postgresql/data"})
		}),
		testcontainers.WithWaitStrategy(postgresReady()),
	)
	s.Postgres = c
	if err != nil {
		return fmt.Errorf("starting %s: %w", s.opts.PostgresImage, err)
	}
	return nil
}

// postgresReady waits until the server (not the init-time temporary
// server, which listens on the socket only) accepts TCP connections.
func postgresReady() wait.Strategy {
	return wait.ForExec([]string{"pg_isready", "-h", "127.0.0.1", "-U", dbUser, "-d", dbName}).
		WithPollInterval(pollLong).WithStartupTimeout(2 * time.Minute)
}

func (s *Stack) databaseURL() string {
	return fmt.Sprintf("postgres://%s:%s@%s:5432/%s?sslmode=disable", dbUser, s.Secrets.DBPassword, hostPostgres, dbName)
}

func (s *Stack) migrate(ctx context.Context) error {
	logs, err := s.oneShot(ctx, s.opts.GatewayImage, "migrate", []string{"migrate", "up"},
		testcontainers.WithEntrypoint("ironcurtain"),
		testcontainers.WithConfigModifier(func(c *container.Config) { c.Healthcheck = noHealthcheck }),
		s.dbNet.on(nil),
		testcontainers.WithEnv(map[string]string{"IRONCURTAIN_DATABASE_URL": s.databaseURL()}))
	if err == nil {
		s.opts.Logf("migrate: %s", strings.TrimSpace(logs))
	}
	return err
}

func (s *Stack) startInternet(ctx context.Context) error {
	names := []string{HostAllowed, HostBlocked, HostGit, HostModel, HostGitHub, HostApprover, hostInternet}
	env := map[string]string{
		"E2E_MODEL_KEY": s.Secrets.ModelKey,
		"E2E_GIT_TOKEN": s.Secrets.GitToken,
	}
	if s.confined != nil {
		names = append(names, HostMCP)
		env["E2E_MCP_TOKEN"] = s.confined.RemoteToken
	}
	pair, err := s.CA.Issue(names...)
	if err != nil {
		return err
	}
	bin, err := os.ReadFile(s.opts.InternetBinary)
	if err != nil {
		return fmt.Errorf("reading the internet binary: %w", err)
	}
	forbidden := make([]string, 0, len(s.AgentTokens))
	for _, t := range s.AgentTokens {
		forbidden = append(forbidden, t)
	}
	env["E2E_FORBIDDEN"] = strings.Join(forbidden, ",")
	c, err := testcontainers.Run(ctx, s.opts.BaseImage,
		testcontainers.WithName(s.name("internet")),
		testcontainers.WithLabels(s.labels),
		s.egressNet.on(names),
		// Root: it listens on 443 and 80 like the real thing. The image's
		// healthcheck is the gateway's, not ours.
		testcontainers.WithConfigModifier(func(c *container.Config) { c.User = "0"; c.Healthcheck = noHealthcheck }),
		testcontainers.WithEntrypoint("/srv/e2e/ic-e2e-internet"),
		testcontainers.WithEnv(env),
		testcontainers.WithFiles(
			testcontainers.ContainerFile{Reader: bytesReader(bin), ContainerFilePath: "/srv/e2e/ic-e2e-internet", FileMode: 0o755},
			testcontainers.ContainerFile{Reader: bytesReader(pair.CertPEM), ContainerFilePath: "/srv/e2e/tls.crt", FileMode: 0o644},
			testcontainers.ContainerFile{Reader: bytesReader(pair.KeyPEM), ContainerFilePath: "/srv/e2e/tls.key", FileMode: 0o600},
			testcontainers.ContainerFile{Reader: bytesReader(s.opts.ModelScript), ContainerFilePath: "/srv/e2e/model-script.json", FileMode: 0o644},
		),
		testcontainers.WithWaitStrategy(wait.ForLog(`"msg":"listening"`).WithStartupTimeout(time.Minute)),
	)
	s.Internet = c
	if err != nil {
		return fmt.Errorf("starting the internet container: %w", err)
	}
	s.InternetIP, err = s.ipOn(ctx, c, s.egressNet)
	return err
}

// ipOn returns a container's address on a network.
func (s *Stack) ipOn(ctx context.Context, c *testcontainers.DockerContainer, n *dockerNet) (netip.Addr, error) {
	ins, err := c.Inspect(ctx)
	if err != nil {
		return netip.Addr{}, fmt.Errorf("inspecting %s: %w", c.ID, err)
	}
	ep, ok := ins.NetworkSettings.Networks[n.Name]
	if !ok || ep == nil || !ep.IPAddress.IsValid() {
		return netip.Addr{}, fmt.Errorf("container %s has no address on %s", c.ID, n.Name)
	}
	return ep.IPAddress, nil
}

func (s *Stack) startGateway(ctx context.Context) error {
	c, err := s.runGateway(ctx, "gateway", hostGateway, hostGatewayOps)
	s.Gateway = c
	if err != nil {
		return err
	}
	return s.WaitGatewayReady(ctx, 2*time.Minute)
}

// runGateway starts a gateway container (role names it) with agentHost its
// name on the agent network and opsHost on the ops network, where the ops
// API listens; it does not wait for readiness.
func (s *Stack) runGateway(ctx context.Context, role, agentHost, opsHost string) (*testcontainers.DockerContainer, error) {
	params := configParams{Sessions: s.opts.Sessions, EgressSubnet: s.EgressSubnet, OpsHost: opsHost, SessionWorkspaces: s.opts.SessionWorkspaces}
	if s.confined != nil {
		params.PolicyDir = confinedPolicy
		params.ExtraServers, params.Extra = s.confinedConfig()
	}
	extra, err := s.confinedGateway()
	if err != nil {
		return nil, err
	}
	files := []testcontainers.ContainerFile{
		{Reader: bytesReader(gatewayConfig(params)), ContainerFilePath: gatewayConfigPath, FileMode: 0o644},
		// The run's CA is the gateway's whole system trust store: Go (the
		// relay) and git (the push) read this file, and in the suite every
		// upstream is the internet container.
		{Reader: bytesReader(s.CA.CertPEM), ContainerFilePath: caBundlePath, FileMode: 0o644},
	}
	for _, name := range s.opts.Sessions {
		files = append(files, testcontainers.ContainerFile{Reader: bytesReader([]byte(s.AgentTokens[name] + "\n")),
			ContainerFilePath: agentTokenDir + "/" + name, FileMode: 0o644})
	}
	opts := []testcontainers.ContainerCustomizer{
		testcontainers.WithName(s.name(role)),
		testcontainers.WithLabels(s.labels),
		s.opsNet.on([]string{opsHost}), // first: the published port lives here
		s.agentNet.on([]string{agentHost}),
		s.egressNet.on(nil),
		s.dbNet.on(nil),
		testcontainers.WithEntrypoint("ironcurtain"),
		testcontainers.WithCmd("serve", "--config", gatewayConfigPath),
		testcontainers.WithEnv(map[string]string{
			"IRONCURTAIN_DATABASE_URL":   s.databaseURL(),
			"IRONCURTAIN_AGENT_TOKEN":    s.AgentTokens["agent"],
			"IRONCURTAIN_OPERATOR_TOKEN": s.Secrets.OperatorToken,
			"ANTHROPIC_API_KEY":          s.Secrets.ModelKey,
			"GITHUB_TOKEN":               s.Secrets.GitToken,
		}),
		testcontainers.WithExposedPorts("8081/tcp"),
		testcontainers.WithHostConfigModifier(func(hc *container.HostConfig) {
			hc.PortBindings = mobynet.PortMap{
				mobynet.MustParsePort("8081/tcp"): {{HostIP: netip.MustParseAddr("127.0.0.1")}},
			}
		}),
		testcontainers.WithMounts(testcontainers.VolumeMount(s.volume, workspace)),
		testcontainers.WithHostConfigModifier(s.sessionWorkspacesMount),
		testcontainers.WithFiles(files...),
	}
	c, err := testcontainers.Run(ctx, s.opts.GatewayImage, append(opts, extra...)...)
	if err != nil {
		return c, fmt.Errorf("starting the %s: %w", role, err)
	}
	return c, nil
}

func (s *Stack) startAgent(ctx context.Context) error {
	probe, err := os.ReadFile(s.opts.ProbeBinary)
	if err != nil {
		return fmt.Errorf("reading the probe binary: %w", err)
	}
	c, err := testcontainers.Run(ctx, s.opts.AgentImage,
		testcontainers.WithName(s.name("agent")),
		testcontainers.WithLabels(s.labels),
		s.agentNet.on([]string{"agent"}),
		testcontainers.WithEntrypoint(ProbePath),
		testcontainers.WithCmd("idle"),
		testcontainers.WithEnv(s.AgentEnv("agent")),
		testcontainers.WithMounts(testcontainers.VolumeMount(s.volume, workspace)),
		testcontainers.WithFiles(
			testcontainers.ContainerFile{Reader: bytesReader(probe), ContainerFilePath: ProbePath, FileMode: 0o755},
			testcontainers.ContainerFile{Reader: bytesReader(s.CA.CertPEM), ContainerFilePath: AgentCAPath, FileMode: 0o644},
		),
	)
	s.Agent = c
	if err != nil {
		return fmt.Errorf("starting the agent container: %w", err)
	}
	return nil
}

// startShell starts the agent-shell image as it is deployed: on the
// agent network only, with the agent token of its session in the
// environment and nothing else (git and gh reach the gateway at
// http://gateway:8080, the image's default). Its main process idles.
func (s *Stack) startShell(ctx context.Context) error {
	if s.opts.AgentShellImage == "" {
		return nil
	}
	c, err := testcontainers.Run(ctx, s.opts.AgentShellImage,
		testcontainers.WithName(s.name("agent-shell")),
		testcontainers.WithLabels(s.labels),
		s.agentNet.on([]string{"agent-shell"}),
		testcontainers.WithEntrypoint("sleep"),
		testcontainers.WithCmd("infinity"),
		testcontainers.WithEnv(map[string]string{"IRONCURTAIN_AGENT_TOKEN": s.AgentTokens[s.opts.ShellSession]}),
	)
	s.Shell = c
	if err != nil {
		return fmt.Errorf("starting the agent-shell container: %w", err)
	}
	return nil
}

// ExecShell runs a command in the agent-shell container as the image's
// user, with env (KEY=VALUE) added to the container's environment.
func (s *Stack) ExecShell(ctx context.Context, env []string, cmd ...string) (ExecResult, error) {
	if s.Shell == nil {
		return ExecResult{}, errors.New("no agent-shell container (Options.AgentShellImage is empty)")
	}
	return execIn(ctx, s.cli, s.Shell.ID, cmd, env, nil)
}

// AgentEnv is the agent's environment for a session: what the Compose
// file gives the agent container (the agent token, the gateway's MCP,
// model and proxy URLs) and nothing else. In a replica's view (replica.go)
// the URLs name that replica.
func (s *Stack) AgentEnv(session string) map[string]string {
	tok := s.AgentTokens[session]
	proxy := "http://" + session + ":" + tok + "@" + s.agentHost + ":3128"
	return map[string]string{
		"IRONCURTAIN_AGENT_TOKEN":    tok,
		"IRONCURTAIN_MCP_URL":        s.MCPURL(),
		"IRONCURTAIN_MODEL_BASE_URL": "http://" + s.agentHost + ":8080/llm",
		"HTTPS_PROXY":                proxy,
		"HTTP_PROXY":                 proxy,
		"NO_PROXY":                   s.agentHost,
	}
}

func randomHex(n int) string {
	b := make([]byte, n)
	if _, err := rand.Read(b); err != nil {
		panic(err) // crypto/rand never fails on Linux
	}
	return hex.EncodeToString(b)
}

func sleep(ctx context.Context, d time.Duration) error {
	t := time.NewTimer(d)
	defer t.Stop()
	select {
	case <-ctx.Done():
		return ctx.Err()
	case <-t.C:
		return nil
	}
}

// sessionWorkspacesMount bind-mounts Options.SessionWorkspacesHostDir at
// the gateway's session_workspaces.root (when both are set).
func (s *Stack) sessionWorkspacesMount(hc *container.HostConfig) {
	if s.opts.SessionWorkspacesHostDir == "" || s.opts.SessionWorkspaces == "" {
		return
	}
	hc.Mounts = append(hc.Mounts, mount.Mount{Type: mount.TypeBind, Source: s.opts.SessionWorkspacesHostDir, Target: s.opts.SessionWorkspaces})
}
