package launcher

import (
	"archive/tar"
	"bytes"
	"cmp"
	"context"
	"crypto/rand"
	"encoding/hex"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"maps"
	"net"
	"os"
	"path/filepath"
	"runtime"
	"slices"
	"sort"
	"strings"
	"testing"
	"time"

	"github.com/moby/moby/api/pkg/stdcopy"
	"github.com/moby/moby/api/types/build"
	"github.com/moby/moby/api/types/container"
	"github.com/moby/moby/client"

	"ironcurtain.dev/gateway/internal/servers"
	"ironcurtain.dev/gateway/internal/servers/external"
	"ironcurtain.dev/gateway/internal/testenv"
)

// baseImage is the offline base image (make images-offline); the test
// image is it plus this test binary as a stdio MCP server.
// baseImage is the image the test server is built on: IC_BASE_IMAGE (the
// Makefile passes its BASE_IMAGE), else the offline base.
var baseImage = cmp.Or(os.Getenv("IC_BASE_IMAGE"), "ironcurtain/base-offline:bookworm")

// dockerOrSkip returns a Docker client; without Docker the test skips,
// except under CI=true, where it fails (DESIGN §13).
func dockerOrSkip(t testing.TB) *client.Client {
	t.Helper()
	fail := func(format string, args ...any) { t.Helper(); testenv.Missing(t, format, args...) }
	cli, err := client.New(client.FromEnv)
	if err != nil {
		fail("no Docker client: %v", err)
		return nil
	}
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	if _, err := cli.Ping(ctx, client.PingOptions{}); err != nil {
		cli.Close()
		fail("Docker is not reachable: %v", err)
		return nil
	}
	if _, err := cli.ImageInspect(ctx, baseImage); err != nil {
		cli.Close()
		fail("%s is missing (make images-offline): %v", baseImage, err)
		return nil
	}
	t.Cleanup(func() { cli.Close() })
	return cli
}

// buildTestImage builds baseImage + this test binary at /srv with the
// classic builder (no registry needed).
func buildTestImage(t testing.TB, cli *client.Client, tag string) {
	t.Helper()
	exe, err := os.Executable()
	if err != nil {
		t.Fatal(err)
	}
	bin, err := os.ReadFile(exe)
	if err != nil {
		t.Fatal(err)
	}
	var buf bytes.Buffer
	tw := tar.NewWriter(&buf)
	for _, f := range []struct {
		name string
		mode int64
		data []byte
	}{
		{"Dockerfile", 0o644, []byte("FROM " + baseImage + "\nCOPY srv /ic-test-server\n")},
		{"srv", 0o755, bin},
	} {
		if err := tw.WriteHeader(&tar.Header{Name: f.name, Mode: f.mode, Size: int64(len(f.data))}); err != nil {
			t.Fatal(err)
		}
		if _, err := tw.Write(f.data); err != nil {
			t.Fatal(err)
		}
	}
	if err := tw.Close(); err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithTimeout(context.Background(), 3*time.Minute)
	defer cancel()
	res, err := cli.ImageBuild(ctx, &buf, client.ImageBuildOptions{Tags: []string{tag}, Version: build.BuilderV1, Remove: true, ForceRemove: true})
	if err != nil {
		t.Fatalf("building the test image: %v", err)
	}
	out, err := io.ReadAll(res.Body)
	res.Body.Close()
	if err != nil || bytes.Contains(out, []byte(`"errorDetail"`)) {
		t.Fatalf("building the test image: %v\n%s", err, out)
	}
	t.Cleanup(func() {
		_, _ = cli.ImageRemove(context.Background(), tag, client.ImageRemoveOptions{Force: true, PruneChildren: true})
	})
}

// TestDockerImageServer starts a server through the launcher with real
// Docker, lists and calls its tools through the external adapter, checks
// the running container's spec, and lets the server try to escape.
func TestDockerImageServer(t *testing.T) {
	cli := dockerOrSkip(t)
	suffix := make([]byte, 4)
	_, _ = rand.Read(suffix)
	id := hex.EncodeToString(suffix)
	tag := "ironcurtain/launcher-test:" + id
	name := "evil-" + id
	netName := "ic-launcher-test-" + id
	buildTestImage(t, cli, tag)

	ctx := context.Background()
	// The server's network: internal, and no host address on its bridge.
	if _, err := cli.NetworkCreate(ctx, netName, client.NetworkCreateOptions{Driver: "bridge", Internal: true,
		Options: map[string]string{InhibitIPv4: "true"}}); err != nil {
		t.Fatalf("creating the internal network: %v", err)
	}
	t.Cleanup(func() { _, _ = cli.NetworkRemove(context.Background(), netName, client.NetworkRemoveOptions{}) })
	// A plain internal network (the bridge has a host address): refused.
	leakyNet := netName + "-leaky"
	if _, err := cli.NetworkCreate(ctx, leakyNet, client.NetworkCreateOptions{Driver: "bridge", Internal: true}); err != nil {
		t.Fatalf("creating the internal network: %v", err)
	}
	t.Cleanup(func() { _, _ = cli.NetworkRemove(context.Background(), leakyNet, client.NetworkRemoveOptions{}) })
	// A service of the Docker host listening on every address: an internal
	// network's gateway address reaches it unless the bridge has none.
	hostLn, err := net.Listen("tcp", "0.0.0.0:0")
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { hostLn.Close() })
	go func() {
		for {
			c, err := hostLn.Accept()
			if err != nil {
				return
			}
			c.Close()
		}
	}()
	netInfo, err := cli.NetworkInspect(ctx, netName, client.NetworkInspectOptions{})
	if err != nil || len(netInfo.Network.IPAM.Config) == 0 {
		t.Fatalf("inspecting the network: %v", err)
	}
	hostAddr := net.JoinHostPort(netInfo.Network.IPAM.Config[0].Gateway.String(), fmt.Sprint(hostLn.Addr().(*net.TCPAddr).Port))

	proxyID, proxyAddr := startTestProxy(t, cli, tag, netName, name)

	t.Setenv("GITHUB_TOKEN", "ghp_gateway_secret_must_not_reach_the_server")
	cfg := &Config{Socket: "/unused", TokenFile: "/unused", Proxy: proxyAddr, Servers: map[string]ServerConfig{
		name: {Image: tag, Args: []string{"/ic-test-server", "-test.run=^$"}, Network: netName,
			Env:      map[string]string{modeVar: "serve", "IC_PROBE_HOST": hostAddr, "IC_PROBE_PROXY_TARGET": "127.0.0.1:8443"},
			MemoryMB: 128, Pids: 32, CPUs: 1},
		"leaky-" + id: {Image: tag, Network: leakyNet},
	}}
	if err := cfg.Validate(); err != nil {
		t.Fatal(err)
	}
	sock := filepath.Join(t.TempDir(), "l.sock")
	ln, err := Listen(sock)
	if err != nil {
		t.Fatal(err)
	}
	l, err := New(cfg, testToken, cli, slog.New(slog.NewTextHandler(tWriter{t}, nil)))
	if err != nil {
		t.Fatal(err)
	}
	sctx, stop := context.WithCancel(ctx)
	served := make(chan error, 1)
	go func() { served <- l.Serve(sctx, ln) }()
	t.Cleanup(func() {
		stop()
		<-served
		_, _ = cli.ContainerRemove(context.Background(), ContainerName(name), client.ContainerRemoveOptions{Force: true})
	})
	lc := &Client{Socket: sock, Token: testToken}

	if _, err := lc.Start(ctx, "leaky-"+id); !errors.Is(err, ErrRefused) {
		t.Fatalf("start on an internal network whose bridge has a host address: %v, want refused", err)
	}
	if _, err := cli.ContainerInspect(ctx, ContainerName("leaky-"+id), client.ContainerInspectOptions{}); err == nil {
		t.Fatal("a container was created on the refused network")
	}

	began := time.Now()
	srv, err := external.Start(ctx, external.Config{Name: name, Launch: lc.Launcher(name, tag), StartTimeout: 60 * time.Second,
		MinBackoff: 100 * time.Millisecond, MaxBackoff: time.Second}, external.Deps{})
	if err != nil {
		t.Fatalf("starting the image server: %v", err)
	}
	t.Logf("cold start (create, attach, start, initialize, tools/list): %v", time.Since(began))
	defer srv.Close()
	var names []string
	for _, tl := range srv.Tools() {
		names = append(names, tl.Name)
	}
	sort.Strings(names)
	if strings.Join(names, ",") != "eatmem,echo,flood,probe" {
		t.Fatalf("tools = %v", names)
	}
	callText := func(tool string) (string, error) {
		cctx, cancel := context.WithTimeout(ctx, 60*time.Second)
		defer cancel()
		res, err := srv.Call(cctx, tool, map[string]any{"text": "hi"})
		if err != nil {
			return "", err
		}
		return resultText(res), nil
	}
	if got, err := callText("echo"); err != nil || got != "hi" {
		t.Fatalf("echo = %q, %v", got, err)
	}

	t.Run("hardened spec", func(t *testing.T) {
		ins, err := cli.ContainerInspect(ctx, ContainerName(name), client.ContainerInspectOptions{})
		if err != nil {
			t.Fatal(err)
		}
		hc, c := ins.Container.HostConfig, ins.Container.Config
		checks := []struct {
			what string
			ok   bool
		}{
			{"read-only root", hc.ReadonlyRootfs},
			{"not privileged", !hc.Privileged},
			{"cap_drop ALL", slices.Equal(hc.CapDrop, []string{"ALL"}) && len(hc.CapAdd) == 0},
			{"no-new-privileges", slices.Contains(hc.SecurityOpt, "no-new-privileges:true")},
			{"non-root user", c.User == DefaultUser},
			{"memory", hc.Memory == 128<<20 && hc.MemorySwap == 128<<20},
			{"pids", hc.PidsLimit != nil && *hc.PidsLimit == 32},
			{"cpus", hc.NanoCPUs == 1e9},
			{"tmpfs /tmp", strings.HasPrefix(hc.Tmpfs["/tmp"], "rw,noexec,nosuid,nodev")},
			{"no host mounts", len(hc.Binds) == 0 && len(ins.Container.Mounts) == 0},
			{"own network", string(hc.NetworkMode) == netName},
			{"private pid namespace", hc.PidMode == ""},
			{"no log file", hc.LogConfig.Type == "none"},
			{"proxy identity", slices.Contains(c.Env, "HTTPS_PROXY=http://"+name+":"+ProxyIdentity(testToken, name)+"@"+proxyAddr)},
			{"only configured env", !slices.ContainsFunc(c.Env, func(e string) bool { return strings.HasPrefix(e, "GITHUB_TOKEN=") })},
		}
		for _, ck := range checks {
			if !ck.ok {
				t.Errorf("%s: not so in the running container (%+v)", ck.what, hc)
			}
		}
	})

	t.Run("evil server is contained", func(t *testing.T) {
		out, err := callText("probe")
		if err != nil {
			t.Fatal(err)
		}
		var r probeResult
		if err := json.Unmarshal([]byte(out), &r); err != nil {
			t.Fatalf("%v: %s", err, out)
		}
		t.Logf("probe: %s", out)
		if r.UID == 0 {
			t.Error("runs as root")
		}
		if len(r.Foreign) > 0 {
			t.Errorf("sees processes that are not its own (the gateway's /proc must be out of reach): %q", r.Foreign)
		}
		if r.CapEff != "0000000000000000" || r.NoNewPrivs != "1" {
			t.Errorf("CapEff %q NoNewPrivs %q", r.CapEff, r.NoNewPrivs)
		}
		if r.RootWrite == "" || r.TmpWrite != "" {
			t.Errorf("root write error %q, /tmp write error %q", r.RootWrite, r.TmpWrite)
		}
		for _, d := range r.DirectTCP {
			if strings.HasSuffix(d, ": connected") {
				t.Errorf("direct TCP out: %s", d)
			}
		}
		if len(r.Secrets) > 0 {
			t.Errorf("finds gateway state or secrets: %v", r.Secrets)
		}
		if slices.Contains(r.Env, "GITHUB_TOKEN") {
			t.Error("the gateway's environment reached the server")
		}
		wantProxy := map[string]string{
			"identity":               "200 ping", // its allowlisted host, through the proxy
			"identity_off_allowlist": "403",
			"no_identity":            "407",
			"forged_identity":        "407",
		}
		if !maps.Equal(r.Proxy, wantProxy) {
			t.Errorf("egress proxy answers %v, want %v", r.Proxy, wantProxy)
		}
		logs := containerLogs(t, cli, proxyID)
		for _, want := range []string{`"session_id":"server:` + name + `"`, `"decision":"allow"`, `"decision":"deny"`, `"rule":"servers.egress.allowed_hosts[127.0.0.1]"`} {
			if !strings.Contains(logs, want) {
				t.Errorf("the proxy's records lack %s:\n%s", want, logs)
			}
		}
		if r.Forked >= 32 || r.ForkRefused == "" {
			t.Errorf("fork bomb not contained: %d processes started, refusal %q", r.Forked, r.ForkRefused)
		}
	})

	waitRestart := func(t *testing.T, after string) {
		t.Helper()
		deadline := time.Now().Add(60 * time.Second)
		for {
			got, err := callText("echo")
			if err == nil && got == "hi" {
				return
			}
			if time.Now().After(deadline) {
				t.Fatalf("no restart after %s: %q %v", after, got, err)
			}
			time.Sleep(200 * time.Millisecond)
		}
	}
	t.Run("2 GiB of memory kills only the server, which restarts", func(t *testing.T) {
		if _, err := callText("eatmem"); err == nil {
			t.Fatal("allocating 2 GiB under a 128 MiB limit succeeded")
		}
		waitRestart(t, "the OOM kill")
	})
	t.Run("100 MB of stdout ends the run at the line cap, which restarts", func(t *testing.T) {
		var before, after runtime.MemStats
		runtime.ReadMemStats(&before)
		if _, err := callText("flood"); err == nil {
			t.Fatal("a 100 MB line was accepted")
		}
		runtime.ReadMemStats(&after)
		if grown := int64(after.TotalAlloc - before.TotalAlloc); grown > 8*external.MaxLineBytes {
			t.Errorf("the flood cost the gateway %d MiB of allocations", grown>>20)
		}
		waitRestart(t, "the flood")
	})

	if err := srv.Close(); err != nil {
		t.Fatal(err)
	}
	deadline := time.Now().Add(30 * time.Second)
	for {
		if _, err := cli.ContainerInspect(ctx, ContainerName(name), client.ContainerInspectOptions{}); err != nil {
			break
		}
		if time.Now().After(deadline) {
			t.Fatal("the container outlived the gateway's connection")
		}
		time.Sleep(100 * time.Millisecond)
	}
}

func resultText(r servers.Result) string {
	var b strings.Builder
	for _, c := range r.Content {
		b.WriteString(c.Text)
	}
	return b.String()
}

// tWriter logs the launcher's lines through t.
type tWriter struct{ t testing.TB }

func (w tWriter) Write(p []byte) (int, error) {
	w.t.Log(strings.TrimSpace(string(p)))
	return len(p), nil
}

// rssKiB is this process's resident set (VmRSS).
func rssKiB(tb testing.TB) int64 { return procRSSKiB(tb, "self") }

// procRSSKiB is the resident set (VmRSS) of process pid ("self": this one).
func procRSSKiB(tb testing.TB, pid string) int64 {
	tb.Helper()
	kib, err := testenv.ProcStatusKiB(pid, "VmRSS")
	if err != nil {
		tb.Fatal(err)
	}
	return kib
}

// startTestProxy runs the egress proxy (runTestProxy) in its own container
// on the server's network and returns its id and address.
func startTestProxy(t *testing.T, cli *client.Client, image, netName, server string) (string, string) {
	t.Helper()
	ctx := context.Background()
	created, err := cli.ContainerCreate(ctx, client.ContainerCreateOptions{
		Name: "ic-launcher-test-proxy-" + server,
		Config: &container.Config{Image: image, Cmd: []string{"/ic-test-server", "-test.run=^$"},
			Env: []string{modeVar + "=proxy", "IC_PROXY_SERVER=" + server, "IC_PROXY_TOKEN=" + ProxyIdentity(testToken, server)}},
		HostConfig: &container.HostConfig{NetworkMode: container.NetworkMode(netName)},
	})
	if err != nil {
		t.Fatalf("creating the proxy container: %v", err)
	}
	t.Cleanup(func() {
		_, _ = cli.ContainerRemove(context.Background(), created.ID, client.ContainerRemoveOptions{Force: true})
	})
	if _, err := cli.ContainerStart(ctx, created.ID, client.ContainerStartOptions{}); err != nil {
		t.Fatalf("starting the proxy container: %v", err)
	}
	ins, err := cli.ContainerInspect(ctx, created.ID, client.ContainerInspectOptions{})
	if err != nil {
		t.Fatal(err)
	}
	ep := ins.Container.NetworkSettings.Networks[netName]
	if ep == nil || !ep.IPAddress.IsValid() {
		t.Fatalf("the proxy container has no address on %s", netName)
	}
	return created.ID, net.JoinHostPort(ep.IPAddress.String(), "3128")
}

// containerLogs returns a container's stdout and stderr so far.
func containerLogs(t *testing.T, cli *client.Client, id string) string {
	t.Helper()
	rc, err := cli.ContainerLogs(context.Background(), id, client.ContainerLogsOptions{ShowStdout: true, ShowStderr: true})
	if err != nil {
		t.Fatal(err)
	}
	defer rc.Close()
	var out bytes.Buffer
	if _, err := stdcopy.StdCopy(&out, &out, rc); err != nil {
		t.Fatal(err)
	}
	return out.String()
}
