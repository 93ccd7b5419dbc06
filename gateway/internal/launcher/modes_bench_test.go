package launcher

import (
	"bufio"
	"context"
	"crypto/rand"
	"encoding/hex"
	"fmt"
	"io"
	"log/slog"
	"net"
	"net/http"
	"net/netip"
	"os"
	"os/exec"
	"os/signal"
	"path/filepath"
	"runtime"
	"runtime/debug"
	"slices"
	"strconv"
	"strings"
	"syscall"
	"testing"
	"time"

	mcpclient "github.com/mark3labs/mcp-go/client"
	"github.com/mark3labs/mcp-go/client/transport"
	"github.com/mark3labs/mcp-go/mcp"
	"github.com/mark3labs/mcp-go/server"
	"github.com/moby/moby/api/pkg/stdcopy"
	"github.com/moby/moby/client"
	"go.yaml.in/yaml/v3"

	"ironcurtain.dev/gateway/internal/audit"
	"ironcurtain.dev/gateway/internal/doors/mcphub"
	"ironcurtain.dev/gateway/internal/netguard"
	"ironcurtain.dev/gateway/internal/servers"
	"ironcurtain.dev/gateway/internal/servers/external"
	"ironcurtain.dev/gateway/internal/session"
	"ironcurtain.dev/gateway/netpolicy"
	"ironcurtain.dev/gateway/policy"
)

// Environment of the test binary's extra modes (TestMain).
const (
	launcherConfigVar = "IC_LAUNCHER_TEST_CONFIG" // "launcher": the config file
)

// serveTestHTTP serves the test server over streamable HTTP on a loopback
// port it prints as its first line of stdout (the url: mode's server).
func serveTestHTTP() {
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		fmt.Fprintln(os.Stderr, err)
		return
	}
	fmt.Println(ln.Addr().String())
	hs := &http.Server{Handler: server.NewStreamableHTTPServer(newTestMCPServer()), ReadHeaderTimeout: 10 * time.Second}
	_ = hs.Serve(ln)
}

// runTestLauncher runs the launcher as its own process (as it is deployed)
// until SIGTERM.
func runTestLauncher() {
	ctx, stop := signal.NotifyContext(context.Background(), syscall.SIGTERM, os.Interrupt)
	defer stop()
	log := slog.New(slog.NewTextHandler(os.Stderr, &slog.HandlerOptions{Level: slog.LevelWarn}))
	if err := Run(ctx, os.Getenv(launcherConfigVar), log); err != nil {
		fmt.Fprintln(os.Stderr, err)
		return
	}
	os.Exit(0)
}

// benchStack is the gateway side of BenchmarkConfinedModes: the launcher
// in its own process, and this process as the gateway.
type benchStack struct {
	cfg      Config
	cli      *client.Client
	tag      string
	lc       *Client
	launcher *exec.Cmd
	names    []string
}

// startBenchStack builds the test image and starts the launcher as a child
// process configured for the given server names (network none: the echo
// server makes no egress).
func startBenchStack(b *testing.B, names ...string) *benchStack {
	b.Helper()
	cli := dockerOrSkip(b)
	suffix := make([]byte, 4)
	_, _ = rand.Read(suffix)
	id := hex.EncodeToString(suffix)
	tag := "ironcurtain/launcher-test:" + id
	buildTestImage(b, cli, tag)
	dir := b.TempDir()
	cfg := Config{Socket: filepath.Join(dir, "l.sock"), TokenFile: filepath.Join(dir, "token"), Servers: map[string]ServerConfig{}}
	st := &benchStack{cli: cli, tag: tag}
	for _, n := range names {
		full := n + "-" + id
		st.names = append(st.names, full)
		cfg.Servers[full] = ServerConfig{Image: tag, Args: []string{"/ic-test-server", "-test.run=^$"}, Network: "none",
			Env: map[string]string{modeVar: "serve"}, MemoryMB: 64, Pids: 32, CPUs: 0.5}
	}
	if err := cfg.Validate(); err != nil {
		b.Fatal(err)
	}
	st.cfg = cfg
	y, err := yaml.Marshal(&cfg)
	if err != nil {
		b.Fatal(err)
	}
	cfgPath := filepath.Join(dir, "launcher.yaml")
	if err := os.WriteFile(cfgPath, y, 0o600); err != nil {
		b.Fatal(err)
	}
	if err := os.WriteFile(cfg.TokenFile, testToken, 0o600); err != nil {
		b.Fatal(err)
	}
	exe, err := os.Executable()
	if err != nil {
		b.Fatal(err)
	}
	cmd := exec.Command(exe, "-test.run=^$")
	cmd.Env = append(os.Environ(), modeVar+"=launcher", launcherConfigVar+"="+cfgPath)
	cmd.Stderr = os.Stderr
	if err := cmd.Start(); err != nil {
		b.Fatal(err)
	}
	st.launcher = cmd
	b.Cleanup(func() {
		_ = cmd.Process.Signal(syscall.SIGTERM)
		_ = cmd.Wait()
		for _, n := range st.names {
			_, _ = cli.ContainerRemove(context.Background(), ContainerName(n), client.ContainerRemoveOptions{Force: true})
		}
	})
	deadline := time.Now().Add(30 * time.Second)
	for {
		if fi, err := os.Stat(cfg.Socket); err == nil && fi.Mode().Perm() == 0o660 { // Listen's chmod is its last step
			break
		}
		if time.Now().After(deadline) {
			b.Fatal("the launcher does not listen")
		}
		time.Sleep(20 * time.Millisecond)
	}
	st.lc = &Client{Socket: cfg.Socket, Token: testToken}
	return st
}

// startImage starts server name (one of the stack's) in image: mode.
func (st *benchStack) startImage(ctx context.Context, name string) (*external.Server, error) {
	return external.Start(ctx, external.Config{Name: name, Launch: st.lc.Launcher(name, st.tag), StartTimeout: 2 * time.Minute}, external.Deps{})
}

// benchHub is the gateway's call path in this process: the hub's gate with
// the real policy engine (echo pinned and allowed on every server), audit
// records written to a sink that drops them (the write-ahead record's own
// cost, a Postgres insert, is measured in docs/performance.md and is the
// same for every mode).
func benchHub(b *testing.B, srvs ...servers.Server) *mcphub.Hub {
	b.Helper()
	ann := &policy.Annotations{}
	var names []string
	for _, s := range srvs {
		names = append(names, s.Name())
		for _, tl := range s.Tools() {
			if tl.Name != "echo" {
				continue
			}
			def := policy.ToolDefinition{Name: tl.Name, Description: tl.Description, InputSchema: tl.InputSchema}
			pin, err := def.Pin()
			if err != nil {
				b.Fatal(err)
			}
			schema, err := policy.CanonicalSchema(tl.InputSchema)
			if err != nil {
				b.Fatal(err)
			}
			ann.Add(policy.ToolAnnotation{Tool: tl.Name, Server: s.Name(), InputSchema: schema, Pin: &pin,
				Args: []policy.ArgAnnotation{{Name: "text", Spec: policy.Static(policy.RoleNone)}}})
		}
	}
	cp := &policy.CompiledPolicy{Rules: []policy.CompiledRule{{
		Name: "allow-echo", If: policy.RuleCondition{Server: names, Tool: []string{"echo"}}, Then: policy.Allow, Reason: "echo is harmless",
	}}}
	eng, err := policy.New(cp, ann, nil, policy.Settings{Sandbox: b.TempDir()})
	if err != nil {
		b.Fatal(err)
	}
	hub, err := mcphub.New(mcphub.Config{}, mcphub.Deps{Servers: srvs, Policy: eng, Audit: dropSink{}, Auth: noAuth{}})
	if err != nil {
		b.Fatal(err)
	}
	b.Cleanup(func() {
		ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
		defer cancel()
		_ = hub.Shutdown(ctx)
	})
	if got := len(hub.Tools()); got != len(srvs) {
		b.Fatalf("the hub exposes %d tools, want %d (%v)", got, len(srvs), hub.Tools())
	}
	return hub
}

type dropSink struct{}

func (dropSink) Record(context.Context, audit.Event) error { return nil }

type noAuth struct{}

func (noAuth) Authenticate(context.Context, string) (session.Session, error) {
	return session.Session{}, session.ErrUnknownToken
}

// startHTTPServer runs the test server over streamable HTTP in a child
// process and returns its URL.
func startHTTPServer(b *testing.B) netpolicy.URL {
	b.Helper()
	exe, _ := os.Executable()
	cmd := exec.Command(exe, "-test.run=^$")
	cmd.Env = append(os.Environ(), modeVar+"=serve-http")
	out, err := cmd.StdoutPipe()
	if err != nil {
		b.Fatal(err)
	}
	if err := cmd.Start(); err != nil {
		b.Fatal(err)
	}
	b.Cleanup(func() { _ = cmd.Process.Kill(); _ = cmd.Wait() })
	line, err := bufio.NewReader(out).ReadString('\n')
	if err != nil {
		b.Fatal(err)
	}
	u, err := netpolicy.ParseURL("http://" + strings.TrimSpace(line) + "/mcp")
	if err != nil {
		b.Fatal(err)
	}
	return u
}

// BenchmarkConfinedModes is issue 26's figures: per-call latency of one
// small server (echo) called directly over stdio and through the gateway
// in each mode, interleaved call by call; the cold start of an image
// server; the resident memory of the gateway side and of the launcher with
// 20 image servers connected and listed. Needs Docker and the offline base
// image (it skips without them, fails under CI=true). Run:
//
//	go test -run '^$' -bench BenchmarkConfinedModes -benchtime=1x ./gateway/internal/launcher/
func BenchmarkConfinedModes(b *testing.B) {
	const (
		calls      = 2000 // per mode
		coldStarts = 7
		many       = 20
	)
	var names []string
	for i := range coldStarts {
		names = append(names, fmt.Sprintf("cold%d", i))
	}
	names = append(names, "img", "stream", "raw")
	for i := range many {
		names = append(names, fmt.Sprintf("many%d", i))
	}
	st := startBenchStack(b, names...)
	cold, img, stream, raw := st.names[:coldStarts], st.names[coldStarts], st.names[coldStarts+1], st.names[coldStarts+2]
	manyNames := st.names[coldStarts+3:]
	ctx := context.Background()
	exe, _ := os.Executable()

	for b.Loop() {
		// Cold start: the start request to the first tools/list answer
		// (create, attach, start, initialize, tools/list), one at a time.
		var colds []time.Duration
		for _, n := range cold {
			began := time.Now()
			s, err := st.startImage(ctx, n)
			if err != nil {
				b.Fatal(err)
			}
			if len(s.Tools()) == 0 {
				b.Fatalf("%s lists no tools", n)
			}
			colds = append(colds, time.Since(began))
			_ = s.Close()
		}
		slices.Sort(colds)
		b.Logf("cold start of an image server (%d): min %v median %v max %v", len(colds), colds[0].Round(time.Millisecond),
			colds[len(colds)/2].Round(time.Millisecond), colds[len(colds)-1].Round(time.Millisecond))
		b.ReportMetric(float64(colds[len(colds)/2].Milliseconds()), "cold-start-median-ms")

		// Latency: direct (the agent's own stdio client on the server
		// binary) and through the gateway's gate in each mode.
		direct, err := mcpclient.NewStdioMCPClient(exe, []string{modeVar + "=serve"}, "-test.run=^$")
		if err != nil {
			b.Fatal(err)
		}
		initialize(b, direct)
		// Where image mode's time goes: the same client on the launcher's
		// stream (no gate), and on a Docker attach of the same hardened
		// container without the launcher.
		ls, err := st.lc.Start(ctx, stream)
		if err != nil {
			b.Fatal(err)
		}
		viaLauncher := ioClient(b, ls, ls)
		attached := st.attach(b, raw)
		cmdSrv, err := external.Start(ctx, external.Config{Name: "cmd", Command: exe, Args: []string{"-test.run=^$"},
			Env: map[string]string{modeVar: "serve"}}, external.Deps{})
		if err != nil {
			b.Fatal(err)
		}
		imgSrv, err := st.startImage(ctx, img)
		if err != nil {
			b.Fatal(err)
		}
		guard, err := netguard.NewGuard(netguard.GuardConfig{Allow: netpolicy.MustParsePatterns("127.0.0.1"),
			Addresses: netpolicy.AddressPolicy{UnsafeAllow: []netip.Prefix{netip.MustParsePrefix("127.0.0.1/32")}}})
		if err != nil {
			b.Fatal(err)
		}
		tr, err := external.NewHTTPTransport(external.HTTPConfig{Name: "url", URL: startHTTPServer(b)}, external.HTTPDeps{Dialer: guard, Sink: dropSink{}})
		if err != nil {
			b.Fatal(err)
		}
		urlSrv, err := external.Start(ctx, external.Config{Name: "url", Transport: tr, StartTimeout: 30 * time.Second}, external.Deps{})
		if err != nil {
			b.Fatal(err)
		}
		hub := benchHub(b, cmdSrv, imgSrv, urlSrv)
		modes := []struct {
			name string
			call func(context.Context) error
		}{
			{"direct", func(ctx context.Context) error { return echo(ctx, direct) }},
			{"docker-attach", func(ctx context.Context) error { return echo(ctx, attached) }},
			{"launcher-stream", func(ctx context.Context) error { return echo(ctx, viaLauncher) }},
		}
		for _, m := range []string{"cmd", img, "url"} {
			tool := m + "__echo"
			modes = append(modes, struct {
				name string
				call func(context.Context) error
			}{map[string]string{"cmd": "command", img: "image", "url": "url"}[m], func(ctx context.Context) error {
				res := hub.Call(ctx, mcphub.CallRequest{Session: session.Session{ID: "bench"}, Tool: tool, Args: map[string]any{"text": "x"}})
				if res.IsError || resultText(res) != "x" {
					return fmt.Errorf("%s: %+v", tool, res)
				}
				return nil
			}})
		}
		lat := make([][]time.Duration, len(modes))
		for i := -100; i < calls; i++ { // 100 warm-up rounds
			for k := range modes {
				j := (i + 100 + k) % len(modes) // rotate who goes first
				cctx, cancel := context.WithTimeout(ctx, 30*time.Second)
				began := time.Now()
				err := modes[j].call(cctx)
				d := time.Since(began)
				cancel()
				if err != nil {
					b.Fatal(err)
				}
				if i >= 0 {
					lat[j] = append(lat[j], d)
				}
			}
		}
		us := func(d time.Duration) float64 { return float64(d.Nanoseconds()) / 1e3 }
		var directMed, directP99 time.Duration
		for j, m := range modes {
			d := lat[j]
			slices.Sort(d)
			med, p99 := d[len(d)/2], d[len(d)*99/100]
			b.ReportMetric(us(med), m.name+"-median-µs")
			b.ReportMetric(us(p99), m.name+"-p99-µs")
			if j == 0 {
				directMed, directP99 = med, p99
				b.Logf("%-8s median %7.0f µs  p99 %7.0f µs", m.name, us(med), us(p99))
				continue
			}
			b.ReportMetric(us(med-directMed), m.name+"-share-median-µs")
			b.Logf("%-8s median %7.0f µs  p99 %7.0f µs  minus direct: median %+6.0f µs, p99 %+6.0f µs",
				m.name, us(med), us(p99), us(med-directMed), us(p99-directP99))
		}
		_ = direct.Close()
		_ = viaLauncher.Close()
		_ = attached.Close()
		_ = cmdSrv.Close()
		_ = imgSrv.Close()
		_ = urlSrv.Close()
		_ = tr.Close()

		// Resident memory with 0 and with 20 image servers connected and
		// listed behind a hub.
		debug.FreeOSMemory()
		time.Sleep(time.Second) // the closed servers' pumps end
		gw0, l0 := rssKiB(b), procRSSKiB(b, strconv.Itoa(st.launcher.Process.Pid))
		var srvs []servers.Server
		var ext []*external.Server
		began := time.Now()
		for _, n := range manyNames {
			s, err := st.startImage(ctx, n)
			if err != nil {
				b.Fatal(err)
			}
			srvs, ext = append(srvs, s), append(ext, s)
		}
		b.Logf("%d image servers started one after another in %v", len(srvs), time.Since(began).Round(time.Millisecond))
		hub20 := benchHub(b, srvs...)
		debug.FreeOSMemory()
		gw20, l20 := rssKiB(b), procRSSKiB(b, strconv.Itoa(st.launcher.Process.Pid))
		b.Logf("RSS, gateway side (this process: hub, adapters): %d MiB with 0 servers, %d MiB with %d (+%d KiB per server)",
			gw0>>10, gw20>>10, len(srvs), (gw20-gw0)/int64(len(srvs)))
		b.Logf("RSS, launcher process: %d MiB with 0 servers, %d MiB with %d (+%d KiB per server)",
			l0>>10, l20>>10, len(srvs), (l20-l0)/int64(len(srvs)))
		b.ReportMetric(float64(gw20-gw0)/float64(len(srvs)), "gateway-RSS-KiB/server")
		b.ReportMetric(float64(l20-l0)/float64(len(srvs)), "launcher-RSS-KiB/server")
		runtime.KeepAlive(hub20)
		for _, s := range ext {
			_ = s.Close()
		}
	}
}

func initialize(b *testing.B, c *mcpclient.Client) {
	b.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	if _, err := c.Initialize(ctx, mcp.InitializeRequest{Params: mcp.InitializeParams{ProtocolVersion: mcp.LATEST_PROTOCOL_VERSION}}); err != nil {
		b.Fatal(err)
	}
}

// ioClient is an initialized MCP client on a server's stdout (r) and stdin
// (w).
func ioClient(b *testing.B, r io.Reader, w io.WriteCloser) *mcpclient.Client {
	b.Helper()
	c := mcpclient.NewClient(transport.NewIO(r, w, nil))
	if err := c.Start(context.Background()); err != nil {
		b.Fatal(err)
	}
	initialize(b, c)
	return c
}

// echo calls the echo tool with a client of its own (no gateway).
func echo(ctx context.Context, c *mcpclient.Client) error {
	req := mcp.CallToolRequest{}
	req.Params.Name = "echo"
	req.Params.Arguments = map[string]any{"text": "x"}
	res, err := c.CallTool(ctx, req)
	if err == nil && (res.IsError || len(res.Content) != 1) {
		err = fmt.Errorf("echo: %+v", res)
	}
	return err
}

// attach creates and starts server name's container with the launcher's
// hardened spec but without the launcher, attached through the Docker API
// from this process, and returns a client on it.
func (st *benchStack) attach(b *testing.B, name string) *mcpclient.Client {
	b.Helper()
	ctx := context.Background()
	created, err := st.cli.ContainerCreate(ctx, BuildSpec(name, st.cfg.Servers[name], "", ""))
	if err != nil {
		b.Fatal(err)
	}
	b.Cleanup(func() {
		_, _ = st.cli.ContainerRemove(context.Background(), created.ID, client.ContainerRemoveOptions{Force: true})
	})
	hj, err := st.cli.ContainerAttach(ctx, created.ID, client.ContainerAttachOptions{Stream: true, Stdin: true, Stdout: true, Stderr: true})
	if err != nil {
		b.Fatal(err)
	}
	b.Cleanup(hj.Close)
	if _, err := st.cli.ContainerStart(ctx, created.ID, client.ContainerStartOptions{}); err != nil {
		b.Fatal(err)
	}
	pr, pw := io.Pipe()
	go func() {
		_, err := stdcopy.StdCopy(pw, io.Discard, hj.Reader)
		_ = pw.CloseWithError(err)
	}()
	return ioClient(b, pr, hj.Conn)
}
