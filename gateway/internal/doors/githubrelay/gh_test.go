package githubrelay

import (
	"net"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"

	"ironcurtain.dev/gateway/internal/testenv"
)

// ghCLI runs the real gh against the relay, over http_unix_socket (gh then
// speaks plain HTTP on the socket, whatever the URL's scheme) or through
// HTTP_PROXY (GH_HOST=github.localhost only: gh uses plain HTTP for it),
// with GH_HOST=host and the agent token as GH_ENTERPRISE_TOKEN and GH_TOKEN.
type ghCLI struct {
	bin, cfgDir, host string
	proxy             string // HTTP_PROXY instead of the socket
	work              string // a clone-like repository whose origin is host/acme/app
}

func newGHCLI(t *testing.T, e *env, host string, viaProxy bool) *ghCLI {
	t.Helper()
	bin := testenv.Require(t, "gh")
	dir := t.TempDir()
	sock := filepath.Join(dir, "gh.sock")
	ln, err := net.Listen("unix", sock)
	if err != nil {
		t.Fatal(err)
	}
	srv := &http.Server{Handler: e.mux}
	go func() { _ = srv.Serve(ln) }()
	t.Cleanup(func() { _ = srv.Close() })
	cfg := filepath.Join(dir, "config")
	if err := os.MkdirAll(cfg, 0o700); err != nil {
		t.Fatal(err)
	}
	conf := "http_unix_socket: " + sock + "\nprompt: disabled\n"
	g := &ghCLI{bin: bin, cfgDir: cfg, host: host, work: filepath.Join(dir, "work")}
	for _, args := range [][]string{{"init", "-q", "-b", "feature", g.work}, {"-C", g.work, "remote", "add", "origin", "https://" + host + "/acme/app.git"}} {
		if out, err := exec.Command("git", args...).CombinedOutput(); err != nil {
			t.Fatalf("git %v: %v\n%s", args, err, out)
		}
	}
	if viaProxy {
		// gh talks plain HTTP to api.github.localhost; HTTP_PROXY sends it
		// to the agent port in absolute form, routed by its Host.
		conf = "prompt: disabled\n"
		g.proxy = e.relay.URL
	}
	if err := os.WriteFile(filepath.Join(cfg, "config.yml"), []byte(conf), 0o600); err != nil {
		t.Fatal(err)
	}
	return g
}

func (g *ghCLI) run(args ...string) (string, error) {
	cmd := exec.Command(g.bin, args...)
	cmd.Dir = g.work
	cmd.Env = []string{"PATH=" + os.Getenv("PATH"), "HOME=" + g.cfgDir, "XDG_CACHE_HOME=" + filepath.Join(g.cfgDir, "cache"), "TMPDIR=" + g.cfgDir, "XDG_STATE_HOME=" + filepath.Join(g.cfgDir, "state"), "XDG_DATA_HOME=" + filepath.Join(g.cfgDir, "data"), "GH_CONFIG_DIR=" + g.cfgDir, "GH_HOST=" + g.host,
		"GH_TOKEN=" + agentTok, "GH_ENTERPRISE_TOKEN=" + agentTok, "GH_REPO=" + g.host + "/acme/app",
		"GH_PROMPT_DISABLED=1", "GH_DEBUG=" + os.Getenv("GH_TEST_DEBUG"), "GH_NO_UPDATE_NOTIFIER=1", "NO_COLOR=1", "GH_PAGER=cat"}
	if g.proxy != "" {
		cmd.Env = append(cmd.Env, "HTTP_PROXY="+g.proxy, "http_proxy="+g.proxy)
	}
	out, err := cmd.CombinedOutput()
	return string(out), err
}

// TestGHCLI drives the real gh through the relay: reads and pr create
// work, merge in REST and GraphQL is refused, and nothing of a refused
// request reaches GitHub.
func TestGHCLI(t *testing.T) {
	for _, tc := range []struct {
		name, host string
		proxy      bool
	}{
		{name: "enterprise host over the socket", host: "ironcurtain.gateway"},
		{name: "github.localhost over the socket", host: "github.localhost"},
		{name: "github.com over the socket", host: "github.com"},
		{name: "github.localhost through HTTP_PROXY", host: "github.localhost", proxy: true},
	} {
		t.Run(tc.name, func(t *testing.T) {
			e := newEnv(t, false)
			g := newGHCLI(t, e, tc.host, tc.proxy)
			if out, err := g.run("api", "repos/acme/app"); err != nil || !strings.Contains(out, "acme/app") {
				t.Fatalf("gh api repos/acme/app: %v\n%s", err, out)
			}
			out, err := g.run("api", "-X", "POST", "repos/acme/app/pulls", "-f", "title=t", "-f", "head=feature", "-f", "base=main")
			if err != nil || !strings.Contains(out, `"number":11`) {
				t.Fatalf("gh api create: %v\n%s", err, out)
			}
			for _, tc := range []struct {
				args []string
				tool string
			}{
				{args: []string{"pr", "create", "--head", "feature", "--base", "main", "--title", "t", "--body", "b"}, tool: "pr_create"},
				{args: []string{"pr", "view", "11"}, tool: "pr_list"},
				{args: []string{"pr", "comment", "1", "--body", "looks good"}, tool: "pr_comment"},
				{args: []string{"pr", "close", "11"}, tool: "pr_close"},
			} {
				if out, err := g.run(tc.args...); err != nil {
					t.Fatalf("gh %s: %v\n%s", strings.Join(tc.args, " "), err, out)
				}
				if d := e.sink.Decisions()[len(e.sink.Decisions())-1]; d.Tool != tc.tool || d.Decision != "allow" {
					t.Fatalf("gh %s: last record %+v", strings.Join(tc.args, " "), d)
				}
			}
			e.gh.reset()
			for _, args := range [][]string{
				{"pr", "close", "1"},
				{"pr", "edit", "1", "--title", "x"},
				{"api", "-X", "PUT", "repos/acme/app/pulls/11/merge"},
				{"api", "graphql", "-f", `query=mutation{mergePullRequest(input:{pullRequestId:"PR_11"}){clientMutationId}}`},
				{"pr", "merge", "11", "--merge"},
				{"api", "-X", "PATCH", "repos/acme/app/pulls/1", "-f", "title=x"},
			} {
				out, err := g.run(args...)
				if err == nil || !strings.Contains(out, "IronCurtain") {
					for _, r := range e.gh.requests() {
						t.Logf("GitHub got %s %s %.300s", r.method, r.path, r.body)
					}
					t.Fatalf("gh %s: %v\n%s", strings.Join(args, " "), err, out)
				}
				t.Logf("gh %s:\n%s", strings.Join(args, " "), out)
			}
			for _, r := range e.gh.requests() {
				if strings.Contains(r.path, "/merge") || strings.Contains(r.body, "mergePullRequest") || r.method == "PATCH" || r.method == "PUT" {
					t.Fatalf("GitHub received %+v", r)
				}
			}
			checkTokens(t, e)
		})
	}
}
