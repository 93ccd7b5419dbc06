package cli

import (
	"bytes"
	"context"
	"strings"
	"testing"

	"ironcurtain.dev/gateway/config"
	"ironcurtain.dev/gateway/internal/launcher"
)

// fetchServersYAML is the servers section a test gateway.yaml needs (the
// fetch allowlist every configuration must have).
const fetchServersYAML = "servers:\n  fetch:\n    allowed_domains: [\"*\"]\n"

func TestServersCommand(t *testing.T) {
	tests := []struct {
		args     []string
		code     int
		stdout   []string
		stderrIn string
	}{
		{args: []string{"add", "github"}, code: 0, stdout: []string{"catalog: github@v1.10.1-3-g64a49f34", "command: /usr/local/bin/github-mcp-server"}},
		{args: []string{"add", "time@unpinned"}, code: 0, stdout: []string{"catalog: time@unpinned"}, stderrIn: "no pins"},
		{args: []string{"add", "nosuch"}, code: 1, stderrIn: "not in the catalog"},
		{args: []string{"list"}, code: 0, stdout: []string{"github", "memory", "time"}},
		{args: nil, code: 2, stderrIn: "usage"},
		{args: []string{"add"}, code: 2, stderrIn: "usage"},
		{args: []string{"add", "--bogus"}, code: 2, stderrIn: "usage"},
		{args: []string{"add", "memory", "--image", "ironcurtain/mcp-node-memory:1.0.0"}, code: 0, stdout: []string{
			"make server-image RUNTIME=node PACKAGE=@modelcontextprotocol/server-memory VERSION=<exact version>",
			"    catalog: memory@unpinned\n    image: \"ironcurtain/mcp-node-memory:1.0.0\"\n",
			"    network: ironcurtain_agent_net\n"}},
		{args: []string{"add", "time", "--image=t@sha256:00", "--network", "srv-time"}, code: 0, stdout: []string{
			"RUNTIME=python PACKAGE=mcp-server-time", "network: srv-time"}},
		{args: []string{"add", "github", "--image", "gh:1"}, code: 0, stdout: []string{
			`args: ["stdio"]`, "#   GITHUB_PERSONAL_ACCESS_TOKEN: <${GITHUB_TOKEN}>"}},
		{args: []string{"add", "filesystem-ref", "--image", "fs:1"}, code: 0, stdout: []string{`args: ["/srv/data"]`}},
		{args: []string{"add", "memory", "--image"}, code: 2, stderrIn: "needs a value"},
		{args: []string{"add", "memory", "--image", "a b"}, code: 2, stderrIn: "not a reference"},
		{args: []string{"add", "memory", "--network", "srv"}, code: 2, stderrIn: "--network only with --image"},
		{args: []string{"list", "--image", "x"}, code: 2, stderrIn: "go with add"},
	}
	for _, tt := range tests {
		t.Run(strings.Join(tt.args, " "), func(t *testing.T) {
			var out, errb bytes.Buffer
			code := runServers(context.Background(), Env{Args: tt.args, Stdout: &out, Stderr: &errb, Getenv: func(string) string { return "" }})
			if code != tt.code {
				t.Fatalf("code %d, want %d; stderr %s", code, tt.code, errb.String())
			}
			for _, w := range tt.stdout {
				if !strings.Contains(out.String(), w) {
					t.Errorf("stdout lacks %q:\n%s", w, out.String())
				}
			}
			if !strings.Contains(errb.String(), tt.stderrIn) {
				t.Errorf("stderr lacks %q:\n%s", tt.stderrIn, errb.String())
			}
		})
	}
	// What add prints is a valid configuration.
	var out bytes.Buffer
	if code := runServers(context.Background(), Env{Args: []string{"add", "github"}, Stdout: &out, Stderr: &bytes.Buffer{}}); code != 0 {
		t.Fatal(code)
	}
	// It goes under the servers: of a gateway.yaml, which lists the fetch
	// allowlist every configuration needs.
	snippet, ok := strings.CutPrefix(out.String(), "servers:\n")
	if !ok {
		t.Fatalf("the snippet is not a servers: section:\n%s", out.String())
	}
	c, err := config.Parse("/cfg/gateway.yaml", []byte(fetchServersYAML+snippet))
	if err != nil {
		t.Fatalf("the snippet does not parse: %v\n%s", err, out.String())
	}
	if len(c.PolicySettings().CatalogAnnotations) != 44 {
		t.Fatal("the snippet's server gets no catalog annotations")
	}
}

// TestServersAddImage: what `servers add <name> --image` prints for each
// catalog server is a gateway.yaml section the gateway loads with the
// catalog's annotations, and a launcher.yaml entry the launcher accepts,
// naming the same image.
func TestServersAddImage(t *testing.T) {
	for _, name := range []string{"github", "memory", "time", "filesystem-ref", "fetch-ref", "git-ref"} {
		t.Run(name, func(t *testing.T) {
			const image = "ironcurtain/mcp-test@sha256:0123456789abcdef0123456789abcdef0123456789abcdef0123456789abcdef"
			var out, errb bytes.Buffer
			if code := runServers(context.Background(), Env{Args: []string{"add", name, "--image", image}, Stdout: &out, Stderr: &errb}); code != 0 {
				t.Fatalf("code %d: %s", code, errb.String())
			}
			gw, lc, ok := strings.Cut(out.String(), "# launcher.yaml")
			if !ok {
				t.Fatalf("no launcher.yaml part:\n%s", out.String())
			}
			_, gw, ok = strings.Cut(gw, "# gateway.yaml\nservers:\n")
			if !ok {
				t.Fatalf("no gateway.yaml servers: section:\n%s", out.String())
			}
			c, err := config.Parse("/cfg/gateway.yaml", []byte(fetchServersYAML+gw+
				"launcher:\n  socket: /run/l.sock\n  token_file: /run/secrets/launcher-token\n"))
			if err != nil {
				t.Fatalf("the gateway section does not parse: %v\n%s", err, gw)
			}
			servers := c.ImageServers()
			if len(servers) != 1 || c.Servers[servers[0]].Image != image {
				t.Fatalf("image servers %v of:\n%s", servers, gw)
			}
			if len(c.PolicySettings().CatalogAnnotations) == 0 {
				t.Error("the image server gets no catalog annotations")
			}
			_, lc, _ = strings.Cut(lc, "\n")
			l, err := launcher.ParseConfig([]byte("socket: /run/l.sock\ntoken_file: /run/secrets/launcher-token\n" + lc))
			if err != nil {
				t.Fatalf("the launcher entry does not parse: %v\n%s", err, lc)
			}
			if got := l.Servers[servers[0]].Image; got != image {
				t.Errorf("launcher image %q, want %q", got, image)
			}
		})
	}
}

// FuzzServersAddImage: whatever --image and --network values `servers add`
// accepts, the sections it prints cannot carry another key: the gateway's
// section and the launcher's entry either fail to load or name exactly the
// image (and network) given.
func FuzzServersAddImage(f *testing.F) {
	f.Add("ironcurtain/mcp-node-memory:1.0.0", "ironcurtain_agent_net")
	f.Add("x@sha256:00", "srv")
	f.Add("a\n    privileged: true", "n")
	f.Add(`a" , "b`, "n:x")
	f.Add("é\u2028x", "-")
	f.Fuzz(func(t *testing.T, image, network string) {
		var out bytes.Buffer
		code := runServers(context.Background(), Env{Args: []string{"add", "memory", "--image", image, "--network=" + network}, Stdout: &out, Stderr: &bytes.Buffer{}})
		if code != 0 {
			return
		}
		gw, lc, ok := strings.Cut(out.String(), "# launcher.yaml")
		if !ok {
			t.Fatalf("no launcher.yaml part:\n%s", out.String())
		}
		if _, gw, ok = strings.Cut(gw, "# gateway.yaml\nservers:\n"); !ok {
			t.Fatalf("no gateway.yaml part:\n%s", out.String())
		}
		if c, err := config.Parse("/cfg/gateway.yaml", []byte(fetchServersYAML+gw+
			"launcher:\n  socket: /run/l.sock\n  token_file: /run/secrets/launcher-token\n")); err == nil {
			if s := c.ImageServers(); len(s) != 1 || c.Servers[s[0]].Image != image {
				t.Fatalf("image %q: the gateway section names %v:\n%s", image, s, gw)
			}
		}
		_, lc, _ = strings.Cut(lc, "\n")
		if l, err := launcher.ParseConfig([]byte("socket: /run/l.sock\ntoken_file: /run/secrets/launcher-token\n" + lc)); err == nil {
			s, ok := l.Servers["memory"]
			if len(l.Servers) != 1 || !ok || s.Image != image || s.Network != network || len(s.Volumes)+len(s.SecretFiles)+len(s.Env) > 0 {
				t.Fatalf("image %q network %q: the launcher entry is %+v:\n%s", image, network, l.Servers, lc)
			}
		}
	})
}
