package launcher

import (
	"bufio"
	"context"
	"encoding/json"
	"errors"
	"net"
	"path/filepath"
	"reflect"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/moby/moby/api/types/container"
	"github.com/moby/moby/api/types/mount"
	"github.com/moby/moby/api/types/network"
)

var testToken = []byte("0123456789abcdef0123456789abcdef-test")

func testConfig(t *testing.T) *Config {
	t.Helper()
	c, err := ParseConfig([]byte(`
socket: /run/l.sock
token_file: /run/l.token
proxy: gateway:8081
servers:
  notes:
    image: example.org/notes@sha256:abc
    args: ["--stdio"]
    network: ic-srv-notes
    env: {NOTES_DIR: /data}
    volumes: [{name: notes-data, target: /data, writable: true}, {name: notes-ro, target: /ro}]
    secret_files: [{source: /srv/secrets/notes-token, target: /run/secrets/notes-token}]
    memory_mb: 128
    pids: 64
    cpus: 0.25
`))
	if err != nil {
		t.Fatal(err)
	}
	return c
}

func TestBuildSpec(t *testing.T) {
	c := testConfig(t)
	id := ProxyIdentity(testToken, "notes")
	spec := BuildSpec("notes", c.Servers["notes"], c.Proxy, id)
	cfg, hc := spec.Config, spec.HostConfig
	proxyURL := "http://notes:" + id + "@gateway:8081"
	pids := int64(64)
	tests := []struct {
		name      string
		got, want any
	}{
		{"Name", spec.Name, "ironcurtain-srv-notes"},
		{"Image", cfg.Image, "example.org/notes@sha256:abc"},
		{"Cmd", []string(cfg.Cmd), []string{"--stdio"}},
		{"User", cfg.User, DefaultUser},
		{"Env", cfg.Env, []string{"HTTPS_PROXY=" + proxyURL, "HTTP_PROXY=" + proxyURL, "NOTES_DIR=/data", "http_proxy=" + proxyURL, "https_proxy=" + proxyURL}},
		{"OpenStdin", cfg.OpenStdin, true},
		{"StdinOnce", cfg.StdinOnce, true},
		{"Tty", cfg.Tty, false},
		{"Privileged", hc.Privileged, false},
		{"ReadonlyRootfs", hc.ReadonlyRootfs, true},
		{"CapDrop", []string(hc.CapDrop), []string{"ALL"}},
		{"CapAdd", len(hc.CapAdd), 0},
		{"SecurityOpt", hc.SecurityOpt, []string{"no-new-privileges:true"}},
		{"NetworkMode", hc.NetworkMode, container.NetworkMode("ic-srv-notes")},
		{"IpcMode", hc.IpcMode, container.IPCModePrivate},
		{"PidMode", hc.PidMode, container.PidMode("")},
		{"Binds", len(hc.Binds), 0},
		{"Devices", len(hc.Devices), 0},
		{"Tmpfs", hc.Tmpfs, map[string]string{"/tmp": "rw,noexec,nosuid,nodev,size=64m"}},
		{"Memory", hc.Memory, int64(128 << 20)},
		{"MemorySwap", hc.MemorySwap, int64(128 << 20)},
		{"PidsLimit", hc.PidsLimit, &pids},
		{"NanoCPUs", hc.NanoCPUs, int64(250_000_000)},
		{"AutoRemove", hc.AutoRemove, true},
		{"LogConfig", hc.LogConfig.Type, "none"},
		{"Mounts", hc.Mounts, []mount.Mount{
			{Type: mount.TypeVolume, Source: "notes-data", Target: "/data", ReadOnly: false, VolumeOptions: &mount.VolumeOptions{NoCopy: true}},
			{Type: mount.TypeVolume, Source: "notes-ro", Target: "/ro", ReadOnly: true, VolumeOptions: &mount.VolumeOptions{NoCopy: true}},
			{Type: mount.TypeBind, Source: "/srv/secrets/notes-token", Target: "/run/secrets/notes-token", ReadOnly: true, BindOptions: &mount.BindOptions{Propagation: mount.PropagationRPrivate}},
		}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			if !reflect.DeepEqual(tt.got, tt.want) {
				t.Errorf("%s = %#v, want %#v", tt.name, tt.got, tt.want)
			}
		})
	}
	t.Run("no proxy on network none", func(t *testing.T) {
		s := c.Servers["notes"]
		s.Network = "none"
		for _, e := range BuildSpec("notes", s, c.Proxy, id).Config.Env {
			if strings.Contains(strings.ToLower(e), "proxy") {
				t.Errorf("env %q on network none", e)
			}
		}
	})
}

func TestProxyIdentity(t *testing.T) {
	a, b := ProxyIdentity(testToken, "a"), ProxyIdentity(testToken, "b")
	if a == b || len(a) != 64 || a != ProxyIdentity(testToken, "a") || a == ProxyIdentity([]byte("another token of sufficient length!!"), "a") {
		t.Errorf("identities are not per server and per token: %s %s", a, b)
	}
}

func TestConfigRefusals(t *testing.T) {
	base := "socket: /run/l.sock\ntoken_file: /run/l.token\nservers:\n  s:\n    image: img\n"
	tests := []struct {
		name, extra, want string
	}{
		{"no network", "", "network: is required"},
		{"host network", "    network: host\n", "not a network of its own"},
		{"bridge network", "    network: bridge\n", "not a network of its own"},
		{"container network", "    network: container:gw\n", "not a network of its own"},
		{"root user", "    network: n\n    user: \"0\"\n", "must not be root"},
		{"root user with group", "    network: n\n    user: \"000:100\"\n", "must not be root"},
		{"named user", "    network: n\n    user: root\n", "numeric"},
		{"host path volume", "    network: n\n    volumes: [{name: /etc, target: /x}]\n", "named volume"},
		{"volume on /proc", "    network: n\n    volumes: [{name: v, target: /proc/x}]\n", "reserved"},
		{"proxy env", "    network: n\n    env: {HTTPS_PROXY: http://evil}\n", "set by the launcher"},
		{"relative secret source", "    network: n\n    secret_files: [{source: x/token, target: /run/x}]\n", "clean absolute path"},
		{"secret source /", "    network: n\n    secret_files: [{source: /, target: /run/x}]\n", "clean absolute path"},
		{"secret on /tmp", "    network: n\n    secret_files: [{source: /s, target: /tmp}]\n", "reserved"},
		{"two mounts on one target", "    network: n\n    secret_files: [{source: /s, target: /d}]\n    volumes: [{name: v, target: /d}]\n", "also the target"},
		{"unknown key", "    network: n\n    privileged: true\n", "privileged"},
		{"memory", "    network: n\n    memory_mb: 999999\n", "memory_mb"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			_, err := ParseConfig([]byte(base + tt.extra))
			if err == nil || !strings.Contains(err.Error(), tt.want) {
				t.Errorf("err = %v, want it to contain %q", err, tt.want)
			}
		})
	}
}

func TestParseRequest(t *testing.T) {
	tests := []struct {
		name, in string
		ok       bool
	}{
		{"start", `{"op":"start","server":"notes","token":"t"}`, true},
		{"stop", `{"op":"stop","server":"notes","token":"t"}`, true},
		{"attach", `{"op":"attach","server":"notes","token":"t"}`, true},
		{"exec", `{"op":"exec","server":"notes","token":"t"}`, false},
		{"case variant", `{"Op":"start","server":"notes","token":"t"}`, false},
		{"duplicate", `{"op":"stop","op":"start","server":"notes","token":"t"}`, false},
		{"image smuggled", `{"op":"start","server":"notes","token":"t","image":"alpine"}`, false},
		{"privileged smuggled", `{"op":"start","server":"notes","token":"t","privileged":true}`, false},
		{"mount smuggled", `{"op":"start","server":"notes","token":"t","mounts":[{"source":"/","target":"/h"}]}`, false},
		{"cap smuggled", `{"op":"start","server":"notes","token":"t","cap_add":["SYS_ADMIN"]}`, false},
		{"HostConfig smuggled", `{"op":"start","server":"notes","token":"t","HostConfig":{"Privileged":true}}`, false},
		{"trailing", `{"op":"start","server":"notes","token":"t"}{}`, false},
		{"bad name", `{"op":"start","server":"../x","token":"t"}`, false},
		{"no token", `{"op":"start","server":"notes"}`, false},
		{"array", `[]`, false},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			_, err := ParseRequest([]byte(tt.in))
			if (err == nil) != tt.ok {
				t.Errorf("ParseRequest(%s) err = %v, want ok=%v", tt.in, err, tt.ok)
			}
			if err != nil && !errors.Is(err, ErrBadRequest) {
				t.Errorf("err %v does not wrap ErrBadRequest", err)
			}
		})
	}
}

func FuzzParseRequest(f *testing.F) {
	f.Add([]byte(`{"op":"start","server":"notes","token":"t"}`))
	f.Add([]byte(`{"op":"start","server":"notes","token":"t","image":"x"}`))
	f.Add([]byte(`{"op":"stop","server":"a_b-1","token":"\u0000"}`))
	f.Fuzz(func(t *testing.T, b []byte) {
		r, err := ParseRequest(b)
		if err != nil {
			return
		}
		if r.Op != OpStart && r.Op != OpStop && r.Op != OpAttach || !ServerNameRE.MatchString(r.Server) || r.Token == "" {
			t.Fatalf("accepted %q as %+v", b, r)
		}
		// Only the three names can have been in the object.
		var m map[string]any
		if json.Unmarshal(b, &m) == nil && len(m) != 3 {
			t.Fatalf("accepted %q with %d members", b, len(m))
		}
	})
}

// serve runs a launcher on a unix socket and returns a client for it.
func serve(t *testing.T, d *fakeDocker) (*Config, *Client) {
	t.Helper()
	cfg := testConfig(t)
	if d.networks == nil {
		d.networks = map[string]network.Inspect{"ic-srv-notes": safeNetwork()}
	}
	sock := filepath.Join(t.TempDir(), "l.sock")
	ln, err := net.Listen("unix", sock)
	if err != nil {
		t.Fatal(err)
	}
	l, err := New(cfg, testToken, d, nil)
	if err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan error, 1)
	go func() { done <- l.Serve(ctx, ln) }()
	t.Cleanup(func() {
		cancel()
		if err := <-done; err != nil {
			t.Error(err)
		}
	})
	return cfg, &Client{Socket: sock, Token: testToken}
}

// raw sends one request line and returns the reply.
func raw(t *testing.T, sock, line string) Reply {
	t.Helper()
	c, err := net.Dial("unix", sock)
	if err != nil {
		t.Fatal(err)
	}
	defer c.Close()
	_ = c.SetDeadline(time.Now().Add(10 * time.Second))
	if _, err := c.Write([]byte(line + "\n")); err != nil {
		t.Fatal(err)
	}
	l, err := readLine(bufio.NewReader(c), 4096)
	if err != nil {
		t.Fatal(err)
	}
	var r Reply
	if err := json.Unmarshal(l, &r); err != nil {
		t.Fatal(err)
	}
	return r
}

// TestRefusals: a compromised gateway cannot get anything but the
// configured spec: every smuggled field, unknown name or wrong token is
// refused before Docker is asked anything, and a later start builds exactly
// the configured spec.
func TestRefusals(t *testing.T) {
	d := &fakeDocker{}
	cfg, cl := serve(t, d)
	tok := string(testToken)
	tests := []struct{ name, line, reply string }{
		{"unknown name", `{"op":"start","server":"evil","token":"` + tok + `"}`, "unknown server"},
		{"wrong token", `{"op":"start","server":"notes","token":"` + strings.Repeat("x", 37) + `"}`, "not authorised"},
		{"no token", `{"op":"start","server":"notes"}`, "bad request"},
		{"other image", `{"op":"start","server":"notes","token":"` + tok + `","image":"alpine:latest"}`, "bad request"},
		{"privileged", `{"op":"start","server":"notes","token":"` + tok + `","privileged":true}`, "bad request"},
		{"host mount", `{"op":"start","server":"notes","token":"` + tok + `","mounts":["/:/host"]}`, "bad request"},
		{"binds", `{"op":"start","server":"notes","token":"` + tok + `","Binds":["/var/run/docker.sock:/s"]}`, "bad request"},
		{"cap add", `{"op":"start","server":"notes","token":"` + tok + `","cap_add":["ALL"]}`, "bad request"},
		{"network host", `{"op":"start","server":"notes","token":"` + tok + `","network":"host"}`, "bad request"},
		{"env", `{"op":"start","server":"notes","token":"` + tok + `","env":["LD_PRELOAD=/tmp/x"]}`, "bad request"},
		{"duplicate server", `{"op":"start","server":"evil","server":"notes","token":"` + tok + `"}`, "bad request"},
		{"exec op", `{"op":"exec","server":"notes","token":"` + tok + `"}`, "bad request"},
		{"too long", `{"op":"start","server":"notes","token":"` + strings.Repeat("a", 2000) + `"}`, "unreadable request"},
		{"attach not running", `{"op":"attach","server":"notes","token":"` + tok + `"}`, "attach failed"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			r := raw(t, cl.Socket, tt.line)
			if r.OK || r.Error != tt.reply {
				t.Errorf("reply = %+v, want refusal %q", r, tt.reply)
			}
		})
	}
	d.mu.Lock()
	n := len(d.creates) + len(d.starts)
	d.mu.Unlock()
	if n != 0 {
		t.Fatalf("refused requests reached Docker: %d creates/starts", n)
	}
	// A real start: the spec is the configured one, whatever came before.
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	s, err := cl.Start(ctx, "notes")
	if err != nil {
		t.Fatal(err)
	}
	if s.Image != "example.org/notes@sha256:abc" {
		t.Errorf("reply image = %q", s.Image)
	}
	if _, err := s.Write([]byte("hello\n")); err != nil {
		t.Fatal(err)
	}
	line, err := bufio.NewReader(s).ReadString('\n')
	if err != nil || line != "hello\n" {
		t.Fatalf("echo = %q, %v", line, err)
	}
	_ = s.Close()
	d.mu.Lock()
	defer d.mu.Unlock()
	want := BuildSpec("notes", cfg.Servers["notes"], cfg.Proxy, ProxyIdentity(testToken, "notes"))
	if len(d.creates) != 1 || !reflect.DeepEqual(d.creates[0], want) {
		t.Fatalf("creates = %+v, want exactly the configured spec", d.creates)
	}
}

func TestStopAndWrongTokenClient(t *testing.T) {
	d := &fakeDocker{}
	_, cl := serve(t, d)
	ctx := context.Background()
	if err := cl.Stop(ctx, "notes"); err != nil {
		t.Fatalf("stop: %v", err)
	}
	bad := &Client{Socket: cl.Socket, Token: []byte(strings.Repeat("y", 40))}
	if _, err := bad.Start(ctx, "notes"); !errors.Is(err, ErrRefused) {
		t.Fatalf("start with a wrong token: %v, want ErrRefused", err)
	}
	if err := cl.Stop(ctx, "unknown"); !errors.Is(err, ErrRefused) {
		t.Fatalf("stop unknown: %v, want ErrRefused", err)
	}
}

func BenchmarkParseRequest(b *testing.B) {
	line := []byte(`{"op":"start","server":"notes","token":"0123456789abcdef0123456789abcdef"}`)
	for b.Loop() {
		if _, err := ParseRequest(line); err != nil {
			b.Fatal(err)
		}
	}
}

// TestNetworkCheck: a server is started only on an internal bridge network
// whose bridge has no host address (else the container reaches the Docker
// host's services through the gateway address); nothing is created
// otherwise.
func TestNetworkCheck(t *testing.T) {
	mod := func(f func(*network.Inspect)) *network.Inspect {
		n := safeNetwork()
		f(&n)
		return &n
	}
	tests := []struct {
		name string
		net  *network.Inspect // nil: the network does not exist
		ok   bool
	}{
		{"internal, no host address", mod(func(*network.Inspect) {}), true},
		{"missing", nil, false},
		{"not internal", mod(func(n *network.Inspect) { n.Internal = false }), false},
		{"host address on the bridge", mod(func(n *network.Inspect) { n.Options = nil }), false},
		{"inhibit false", mod(func(n *network.Inspect) { n.Options[InhibitIPv4] = "false" }), false},
		{"other driver", mod(func(n *network.Inspect) { n.Driver = "macvlan" }), false},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			d := &fakeDocker{networks: map[string]network.Inspect{}}
			if tt.net != nil {
				d.networks["ic-srv-notes"] = *tt.net
			}
			_, cl := serve(t, d)
			ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
			defer cancel()
			s, err := cl.Start(ctx, "notes")
			if err == nil {
				s.Close()
			}
			if (err == nil) != tt.ok {
				t.Fatalf("start: %v, want ok=%v", err, tt.ok)
			}
			d.mu.Lock()
			defer d.mu.Unlock()
			if !tt.ok && len(d.creates) != 0 {
				t.Fatalf("a container was created on a refused network")
			}
		})
	}
}

// TestShutdownEndsStreams: when the launcher stops, an open stream ends
// and the container it started is removed (no orphans).
func TestShutdownEndsStreams(t *testing.T) {
	d := &fakeDocker{networks: map[string]network.Inspect{"ic-srv-notes": safeNetwork()}}
	cfg := testConfig(t)
	sock := filepath.Join(t.TempDir(), "l.sock")
	ln, err := Listen(sock)
	if err != nil {
		t.Fatal(err)
	}
	l, err := New(cfg, testToken, d, nil)
	if err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan error, 1)
	go func() { done <- l.Serve(ctx, ln) }()
	s, err := (&Client{Socket: sock, Token: testToken}).Start(context.Background(), "notes")
	if err != nil {
		t.Fatal(err)
	}
	defer s.Close()
	cancel()
	select {
	case err := <-done:
		if err != nil {
			t.Fatal(err)
		}
	case <-time.After(10 * time.Second):
		t.Fatal("Serve did not return with a stream open")
	}
	d.mu.Lock()
	defer d.mu.Unlock()
	if len(d.starts) != 1 || !slices.Contains(d.removes, d.starts[0]) {
		t.Fatalf("started %v, removed %v: the container outlived the launcher", d.starts, d.removes)
	}
}
