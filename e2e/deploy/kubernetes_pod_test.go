package deploy

import (
	"bufio"
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"net/netip"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/moby/moby/api/types/container"
	"github.com/moby/moby/api/types/mount"
	mobynet "github.com/moby/moby/api/types/network"
	"github.com/moby/moby/client"
	"github.com/testcontainers/testcontainers-go"
	"github.com/testcontainers/testcontainers-go/network"
	"github.com/testcontainers/testcontainers-go/wait"

	"ironcurtain.dev/e2e/internal/testenv"
)

// TestKubernetesGatewayPodRuns runs the gateway image the way the rendered
// pod spec says, without a cluster: Docker with the pod's user, a read-only
// root file system, no capabilities, no privilege escalation, a tmpfs for
// each emptyDir and for the workspace claim, gateway.yaml from the rendered
// ConfigMap, the environment of the rendered container (Secrets filled in),
// and the migrate Job before it. It must become ready and serve a minted
// session's tool call that writes to the workspace: the writable paths of the
// pod spec are all the gateway needs. Needs Docker and the gateway and
// Postgres images (make images).
func TestKubernetesGatewayPodRuns(t *testing.T) {
	cli := dockerClient(t)
	gwImage := imageName("IC_GATEWAY_IMAGE", "ironcurtain/gateway:dev")
	pgImage := imageName("IC_POSTGRES_IMAGE", "ironcurtain/postgres-offline:15")
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Minute)
	defer cancel()
	for _, img := range []string{gwImage, pgImage} {
		if _, err := cli.ImageInspect(ctx, img); err != nil {
			testenv.Missing(t, "image %s is not built (make images builds it): %v", img, err)
		}
	}

	r := renderOverlay(t, "overlays/cloudnativepg")
	gw := byRole(t, r.workloads(t), "gateway")[0]
	mig := byRole(t, r.workloads(t), "migrate")[0]
	cfg := gatewayConfigYAML(t, r, gw)

	const dbPassword = "k8s-pod-test-db-password"
	const operatorToken = "k8s-pod-test-operator-token-0123456789"
	dbURL := "postgres://ironcurtain:" + dbPassword + "@postgres:5432/ironcurtain?sslmode=disable"
	secrets := map[string]string{
		secretDatabase + "/url":           dbURL,
		secretGateway + "/operator-token": operatorToken,
	}

	nw, err := network.New(ctx, network.WithLabels(map[string]string{"dev.ironcurtain.deploy-test": "1"}))
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = nw.Remove(context.WithoutCancel(ctx)) })

	pg, err := testcontainers.Run(ctx, pgImage,
		network.WithNetwork([]string{"postgres"}, nw),
		testcontainers.WithEnv(map[string]string{"POSTGRES_USER": "ironcurtain", "POSTGRES_PASSWORD": dbPassword, "POSTGRES_DB": "ironcurtain"}),
		testcontainers.WithWaitStrategy(wait.ForExec([]string{"pg_isready", "-h", "127.0.0.1", "-U", "ironcurtain", "-d", "ironcurtain"}).
			WithPollInterval(500*time.Millisecond).WithStartupTimeout(2*time.Minute)),
	)
	if pg != nil {
		t.Cleanup(func() { _ = pg.Terminate(context.WithoutCancel(ctx)) })
	}
	if err != nil {
		t.Fatalf("starting Postgres: %v", err)
	}

	// The migrate Job.
	m, err := testcontainers.Run(ctx, gwImage, podCustomizers(t, mig, nw, secrets, nil,
		testcontainers.WithWaitStrategy(wait.ForExit().WithExitTimeout(2*time.Minute)))...)
	if m != nil {
		t.Cleanup(func() { _ = m.Terminate(context.WithoutCancel(ctx)) })
	}
	if err != nil {
		t.Fatalf("running the migrate Job's container: %v", err)
	}
	if st, err := m.State(ctx); err != nil || st.ExitCode != 0 {
		t.Fatalf("migrate exited %v (%v): %s", st, err, logsOf(ctx, m))
	}

	// The gateway pod.
	g, err := testcontainers.Run(ctx, gwImage, podCustomizers(t, gw, nw, secrets, map[string][]byte{"gateway.yaml": cfg},
		testcontainers.WithExposedPorts("8080/tcp", "8081/tcp"),
		testcontainers.WithHostConfigModifier(func(hc *container.HostConfig) {
			hc.PortBindings = mobynet.PortMap{
				mobynet.MustParsePort("8080/tcp"): {{HostIP: netip.MustParseAddr("127.0.0.1")}},
				mobynet.MustParsePort("8081/tcp"): {{HostIP: netip.MustParseAddr("127.0.0.1")}},
			}
		}))...)
	if g != nil {
		t.Cleanup(func() { _ = g.Terminate(context.WithoutCancel(ctx)) })
	}
	if err != nil {
		t.Fatalf("starting the gateway pod: %v", err)
	}
	hostURL := func(port string) string {
		p, err := g.MappedPort(ctx, port)
		if err != nil {
			t.Fatal(err)
		}
		return "http://127.0.0.1:" + p.Port()
	}
	ops, api := hostURL("8081/tcp"), hostURL("8080/tcp")
	// The readiness probe's question: /readyz on the ops port.
	deadline := time.Now().Add(2 * time.Minute)
	for {
		resp, err := http.Get(ops + "/readyz")
		var body []byte
		if err == nil {
			body, _ = io.ReadAll(resp.Body)
			resp.Body.Close()
			if resp.StatusCode == http.StatusOK {
				break
			}
			err = fmt.Errorf("status %d: %s", resp.StatusCode, body)
		}
		if st, serr := g.State(ctx); serr == nil && !st.Running {
			t.Fatalf("the gateway pod's container exited (%d): %v\n%s", st.ExitCode, err, logsOf(ctx, g))
		}
		if time.Now().After(deadline) {
			t.Fatalf("the gateway pod did not become ready: %v\n%s", err, logsOf(ctx, g))
		}
		time.Sleep(250 * time.Millisecond)
	}

	// A minted session (the gateway holds no agent token) writes a file.
	var created struct {
		Token string `json:"token"`
	}
	status, body := httpJSON(t, http.MethodPost, ops+"/v1/sessions", operatorToken, map[string]any{"name": "k8s-pod-test", "ttl": "1h"}, &created)
	if status != http.StatusCreated || created.Token == "" {
		t.Fatalf("minting a session: %d %s", status, body)
	}
	mcp := &mcpClient{t: t, url: api + "/mcp", token: created.Token}
	mcp.call("initialize", map[string]any{"protocolVersion": "2025-06-18", "capabilities": map[string]any{}, "clientInfo": map[string]any{"name": "k8s-pod-test", "version": "1"}})
	mcp.notify("notifications/initialized")
	res := mcp.call("tools/call", map[string]any{"name": "filesystem__write_file", "arguments": map[string]any{"path": "/workspace/k8s-pod-test.txt", "content": "written by the pod\n"}})
	if strings.Contains(string(res), `"isError":true`) {
		t.Fatalf("write_file in the pod: %s\n%s", res, logsOf(ctx, g))
	}
	res = mcp.call("tools/call", map[string]any{"name": "filesystem__read_text_file", "arguments": map[string]any{"path": "/workspace/k8s-pod-test.txt"}})
	if !strings.Contains(string(res), "written by the pod") {
		t.Fatalf("read back: %s", res)
	}
	if logs := logsOf(ctx, g); strings.Contains(logs, "read-only file system") || strings.Contains(logs, "permission denied") {
		t.Errorf("the gateway hit a read-only or forbidden path:\n%s", logs)
	}

	t.Run("an agent run finds the gateway without DNS", func(t *testing.T) {
		agentRunFindsGateway(t, ctx, cli, r, g, nw, ops, operatorToken)
	})
}

// agentRunFindsGateway runs one agent run's Job container as its rendered pod
// spec says, with the Service variables Kubernetes would give it (here the
// gateway container's address: there is no kube-proxy) and a freshly minted
// session's token, and the offline demo transcript instead of a model. Its
// URLs are addresses, never names; the demo writes, reads, is denied a write
// outside the sandbox and waits for the approval of a deletion, given here.
func agentRunFindsGateway(t *testing.T, ctx context.Context, cli interface {
	ImageInspect(context.Context, string, ...client.ImageInspectOption) (client.ImageInspectResult, error)
}, r k8sRender, g *testcontainers.DockerContainer, nw *testcontainers.DockerNetwork, ops, operatorToken string) {
	agentImage := imageName("IC_AGENT_IMAGE", "ironcurtain/agent:dev")
	if _, err := cli.ImageInspect(ctx, agentImage); err != nil {
		testenv.Missing(t, "image %s is not built (make images builds it): %v", agentImage, err)
	}
	run := renderAgentRun(t)
	aw := byRole(t, run.workloads(t), "agent")[0]
	ins, err := g.Inspect(ctx)
	if err != nil {
		t.Fatal(err)
	}
	ep := ins.NetworkSettings.Networks[nw.Name]
	if ep == nil || !ep.IPAddress.IsValid() {
		t.Fatalf("the gateway has no address on %s", nw.Name)
	}
	gwIP := ep.IPAddress.String()
	serviceEnv := map[string]string{}
	for _, o := range r.ofKind("Service") {
		var svc struct {
			Spec struct {
				ClusterIP string `json:"clusterIP"`
				Ports     []struct {
					Port int `json:"port"`
				} `json:"ports"`
			} `json:"spec"`
		}
		o.decode(t, &svc)
		if svc.Spec.ClusterIP == "None" || len(svc.Spec.Ports) == 0 {
			continue
		}
		prefix := serviceEnvPrefix(o.Metadata.Name)
		serviceEnv[prefix+"_SERVICE_HOST"] = gwIP
		serviceEnv[prefix+"_SERVICE_PORT"] = fmt.Sprint(svc.Spec.Ports[0].Port)
	}

	var created struct {
		Token string `json:"token"`
	}
	status, body := httpJSON(t, http.MethodPost, ops+"/v1/sessions", operatorToken, map[string]any{"name": "k8s-agent-run", "ttl": "1h"}, &created)
	if status != http.StatusCreated || created.Token == "" {
		t.Fatalf("minting the run's session: %d %s", status, body)
	}
	secrets := map[string]string{secretAgentToken + "/token": created.Token}
	override := map[string]string{"IRONCURTAIN_MODEL": "replay:/usr/share/ironcurtain/transcripts/demo.yaml"}

	// What the agent's URLs expand to: addresses only.
	env := map[string]string{}
	for k, v := range serviceEnv {
		env[k] = v
	}
	for _, e := range aw.Spec.Containers[0].Env {
		if e.ValueFrom == nil {
			env[e.Name] = expandK8s(e.Value, env)
		} else {
			env[e.Name] = created.Token
		}
	}
	for _, k := range []string{"IRONCURTAIN_MCP_URL", "IRONCURTAIN_MODEL_BASE_URL", "HTTPS_PROXY", "HTTP_PROXY"} {
		if !strings.Contains(env[k], "@"+gwIP+":") && !strings.HasPrefix(env[k], "http://"+gwIP+":") {
			t.Errorf("%s expands to %q: want the gateway's address, no name", k, env[k])
		}
	}

	a, err := testcontainers.Run(ctx, agentImage, podCustomizersEnv(t, aw, nw, secrets, nil, serviceEnv, override)...)
	if a != nil {
		t.Cleanup(func() { _ = a.Terminate(context.WithoutCancel(ctx)) })
	}
	if err != nil {
		t.Fatalf("starting the agent run: %v", err)
	}
	// Its deletion waits for a human: approve it.
	deadline := time.Now().Add(90 * time.Second)
	for {
		var list struct {
			Escalations []struct {
				ID   string `json:"id"`
				Tool string `json:"tool"`
			} `json:"escalations"`
		}
		status, body := httpJSON(t, http.MethodGet, ops+"/v1/escalations?status=pending", operatorToken, nil, &list)
		if status == http.StatusOK && len(list.Escalations) > 0 {
			if s, b := httpJSON(t, http.MethodPost, ops+"/v1/escalations/"+list.Escalations[0].ID+"/approve", operatorToken, map[string]string{"reason": "k8s pod test"}, nil); s != http.StatusOK {
				t.Fatalf("approving: %d %s", s, b)
			}
			break
		}
		if st, err := a.State(ctx); err == nil && !st.Running {
			t.Fatalf("the agent run ended (%d) before its escalation: %s", st.ExitCode, logsOf(ctx, a))
		}
		if time.Now().After(deadline) {
			t.Fatalf("no escalation from the agent run (%d %s): %s", status, body, logsOf(ctx, a))
		}
		time.Sleep(250 * time.Millisecond)
	}
	for {
		st, err := a.State(ctx)
		if err != nil {
			t.Fatal(err)
		}
		if !st.Running {
			logs := logsOf(ctx, a)
			if st.ExitCode != 0 || !strings.Contains(logs, "approved: filesystem__move_file") || !strings.Contains(logs, "Demo finished") {
				t.Fatalf("the agent run exited %d:\n%s", st.ExitCode, logs)
			}
			return
		}
		if time.Now().After(deadline) {
			t.Fatalf("the agent run did not finish: %s", logsOf(ctx, a))
		}
		time.Sleep(250 * time.Millisecond)
	}
}

// podCustomizers runs a container as the pod spec of w says.
func podCustomizers(t *testing.T, w k8sWorkload, nw *testcontainers.DockerNetwork, secrets map[string]string, configFiles map[string][]byte, extra ...testcontainers.ContainerCustomizer) []testcontainers.ContainerCustomizer {
	return podCustomizersEnv(t, w, nw, secrets, configFiles, nil, nil, extra...)
}

// podCustomizersEnv is podCustomizers with the Service variables Kubernetes
// would put in the pod's environment (and expand in $(NAME) references), and
// values the test sets instead of the rendered ones.
func podCustomizersEnv(t *testing.T, w k8sWorkload, nw *testcontainers.DockerNetwork, secrets map[string]string, configFiles map[string][]byte, serviceEnv, override map[string]string, extra ...testcontainers.ContainerCustomizer) []testcontainers.ContainerCustomizer {
	t.Helper()
	c := w.Spec.Containers[0]
	pod := w.Spec.SecurityContext
	if pod == nil || pod.RunAsUser == nil {
		t.Fatalf("%s: no pod runAsUser", w)
	}
	user := fmt.Sprint(*pod.RunAsUser)
	group := user
	if pod.RunAsGroup != nil {
		group = fmt.Sprint(*pod.RunAsGroup)
	}
	fsGroup := group
	if pod.FSGroup != nil {
		fsGroup = fmt.Sprint(*pod.FSGroup)
	}
	env := map[string]string{}
	for k, v := range serviceEnv {
		env[k] = v
	}
	for _, e := range c.Env {
		switch {
		case override[e.Name] != "":
			env[e.Name] = override[e.Name]
		case e.ValueFrom != nil && e.ValueFrom.SecretKeyRef != nil:
			name := e.ValueFrom.SecretKeyRef.Name
			if strings.HasPrefix(name, secretAgentToken+"-") {
				name = secretAgentToken // a generated name: the run's token
			}
			if v, ok := secrets[name+"/"+e.ValueFrom.SecretKeyRef.Key]; ok {
				env[e.Name] = v
			}
		default:
			env[e.Name] = expandK8s(e.Value, env)
		}
	}
	volumes := map[string]string{} // name → kind
	for _, v := range w.Spec.Volumes {
		switch {
		case v.EmptyDir != nil:
			volumes[v.Name] = "emptyDir"
		case v.PersistentVolumeClaim != nil:
			volumes[v.Name] = "claim"
		case v.ConfigMap != nil:
			volumes[v.Name] = "configMap"
		default:
			t.Fatalf("%s: volume %s of a kind this test does not run", w, v.Name)
		}
	}
	tmpfs := map[string]string{}
	var mounts []mount.Mount
	for _, vm := range c.VolumeMounts {
		switch volumes[vm.Name] {
		case "emptyDir", "claim":
			// Writable by the pod's user, as fsGroup makes them.
			tmpfs[vm.MountPath] = "rw,uid=" + user + ",gid=" + fsGroup + ",mode=0770"
		case "configMap":
			if configFiles == nil {
				t.Fatalf("%s mounts a ConfigMap the test has no files for", w)
			}
			dir := t.TempDir()
			for name, b := range configFiles {
				if err := os.WriteFile(filepath.Join(dir, name), b, 0o644); err != nil {
					t.Fatal(err)
				}
			}
			if err := os.Chmod(dir, 0o755); err != nil {
				t.Fatal(err)
			}
			mounts = append(mounts, mount.Mount{Type: mount.TypeBind, Source: dir, Target: vm.MountPath, ReadOnly: true})
		default:
			t.Fatalf("%s mounts unknown volume %s", w, vm.Name)
		}
	}
	sc := c.SecurityContext
	opts := []testcontainers.ContainerCustomizer{
		network.WithNetwork(nil, nw),
		testcontainers.WithLabels(map[string]string{"dev.ironcurtain.deploy-test": "1"}),
		testcontainers.WithEnv(env),
		testcontainers.WithConfigModifier(func(cc *container.Config) {
			cc.User = user + ":" + group
			cc.Healthcheck = &container.HealthConfig{Test: []string{"NONE"}}
			if len(c.Args) > 0 {
				cc.Cmd = c.Args
			}
		}),
		testcontainers.WithHostConfigModifier(func(hc *container.HostConfig) {
			hc.ReadonlyRootfs = isTrue(sc.ReadOnlyRootFilesystem)
			if sc.Capabilities != nil {
				hc.CapDrop = sc.Capabilities.Drop
			}
			if sc.AllowPrivilegeEscalation != nil && !*sc.AllowPrivilegeEscalation {
				hc.SecurityOpt = append(hc.SecurityOpt, "no-new-privileges:true")
			}
			hc.Tmpfs = tmpfs
			hc.Mounts = append(hc.Mounts, mounts...)
		}),
	}
	if len(c.Command) > 0 {
		opts = append(opts, testcontainers.WithEntrypoint(c.Command...))
	}
	return append(opts, extra...)
}

// expandK8s expands $(NAME) as the kubelet does: with a variable defined
// above (or a Service variable); $$ is a literal $; anything else stays.
func expandK8s(v string, env map[string]string) string {
	var b strings.Builder
	for i := 0; i < len(v); i++ {
		if v[i] != '$' || i+1 >= len(v) {
			b.WriteByte(v[i])
			continue
		}
		switch v[i+1] {
		case '$':
			b.WriteByte('$')
			i++
		case '(':
			end := strings.IndexByte(v[i:], ')')
			if end < 0 {
				b.WriteString(v[i:])
				return b.String()
			}
			name := v[i+2 : i+end]
			if val, ok := env[name]; ok {
				b.WriteString(val)
			} else {
				b.WriteString(v[i : i+end+1])
			}
			i += end
		default:
			b.WriteByte('$')
		}
	}
	return b.String()
}

func logsOf(ctx context.Context, c *testcontainers.DockerContainer) string {
	rc, err := c.Logs(context.WithoutCancel(ctx))
	if err != nil {
		return err.Error()
	}
	defer rc.Close()
	b, _ := io.ReadAll(io.LimitReader(rc, 64<<10))
	return string(b)
}

func httpJSON(t *testing.T, method, url, token string, in, out any) (int, []byte) {
	t.Helper()
	b, _ := json.Marshal(in)
	req, _ := http.NewRequest(method, url, bytes.NewReader(b))
	req.Header.Set("Authorization", "Bearer "+token)
	req.Header.Set("Content-Type", "application/json")
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	body, _ := io.ReadAll(resp.Body)
	if out != nil {
		_ = json.Unmarshal(body, out)
	}
	return resp.StatusCode, body
}

// mcpClient speaks just enough MCP (streamable HTTP, JSON-RPC) for the test.
type mcpClient struct {
	t       *testing.T
	url     string
	token   string
	session string
	id      int
}

func (m *mcpClient) post(body map[string]any) (*http.Response, []byte) {
	m.t.Helper()
	b, _ := json.Marshal(body)
	req, _ := http.NewRequest(http.MethodPost, m.url, bytes.NewReader(b))
	req.Header.Set("Authorization", "Bearer "+m.token)
	req.Header.Set("Content-Type", "application/json")
	req.Header.Set("Accept", "application/json, text/event-stream")
	if m.session != "" {
		req.Header.Set("Mcp-Session-Id", m.session)
	}
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		m.t.Fatal(err)
	}
	defer resp.Body.Close()
	out, _ := io.ReadAll(resp.Body)
	if s := resp.Header.Get("Mcp-Session-Id"); s != "" {
		m.session = s
	}
	return resp, out
}

func (m *mcpClient) notify(method string) {
	m.t.Helper()
	resp, body := m.post(map[string]any{"jsonrpc": "2.0", "method": method})
	if resp.StatusCode/100 != 2 {
		m.t.Fatalf("%s: %d %s", method, resp.StatusCode, body)
	}
}

// call returns the JSON-RPC result of method (from a JSON or an event-stream answer).
func (m *mcpClient) call(method string, params any) json.RawMessage {
	m.t.Helper()
	m.id++
	resp, body := m.post(map[string]any{"jsonrpc": "2.0", "id": m.id, "method": method, "params": params})
	if resp.StatusCode != http.StatusOK {
		m.t.Fatalf("%s: %d %s", method, resp.StatusCode, body)
	}
	payload := body
	if strings.HasPrefix(resp.Header.Get("Content-Type"), "text/event-stream") {
		payload = nil
		sc := bufio.NewScanner(bytes.NewReader(body))
		sc.Buffer(make([]byte, 1<<20), 1<<20)
		for sc.Scan() {
			if d, ok := strings.CutPrefix(sc.Text(), "data:"); ok {
				payload = []byte(strings.TrimSpace(d))
			}
		}
	}
	var msg struct {
		Result json.RawMessage `json:"result"`
		Error  json.RawMessage `json:"error"`
	}
	if err := json.Unmarshal(payload, &msg); err != nil || msg.Error != nil {
		m.t.Fatalf("%s: %v %s", method, err, body)
	}
	return msg.Result
}
