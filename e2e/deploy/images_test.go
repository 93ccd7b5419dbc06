package deploy

import (
	"archive/tar"
	"context"
	"errors"
	"io"
	"os"
	"os/exec"
	"path"
	"sort"
	"strings"
	"testing"
	"time"

	"github.com/moby/moby/api/types/container"
	"github.com/moby/moby/client"
	"github.com/testcontainers/testcontainers-go"
	tclog "github.com/testcontainers/testcontainers-go/log"

	"ironcurtain.dev/e2e/internal/tcenv"
	"ironcurtain.dev/e2e/internal/testenv"
)

func TestMain(m *testing.M) {
	// Before any testcontainers client exists: the reaper's image cannot
	// be pulled without a registry (each test removes what it starts).
	tcenv.NoReaper()
	// testcontainers' own progress lines are noise here; the tests say what they check.
	tclog.SetDefault(tclog.NewNoopLogger())
	os.Exit(m.Run())
}

// Images under test: what `make images` builds (the Makefile passes its
// names to the e2e suite).
func imageName(env, def string) string {
	if v := os.Getenv(env); v != "" {
		return v
	}
	return def
}

// dockerClient returns a client, or skips (fails with CI=true) without Docker.
func dockerClient(t *testing.T) *client.Client {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	cli, err := testcontainers.NewDockerClientWithOpts(ctx)
	if err == nil {
		_, err = cli.Ping(ctx, client.PingOptions{})
	}
	if err != nil {
		testenv.Missing(t, "Docker is not available: %v", err)
	}
	t.Cleanup(func() { cli.Close() })
	return cli.Client
}

// imageFiles creates (never starts) a container of image and lists every
// entry of its exported filesystem: path → tar header.
func imageFiles(t *testing.T, cli *client.Client, image string) (map[string]*tar.Header, client.ImageInspectResult) {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 3*time.Minute)
	defer cancel()
	ins, err := cli.ImageInspect(ctx, image)
	if err != nil {
		testenv.Missing(t, "image %s is not built (make images builds it): %v", image, err)
	}
	created, err := cli.ContainerCreate(ctx, client.ContainerCreateOptions{
		Config: &container.Config{Image: image, Labels: map[string]string{"dev.ironcurtain.deploy-test": "1"}},
	})
	if err != nil {
		t.Fatalf("creating a container of %s: %v", image, err)
	}
	defer func() {
		_, _ = cli.ContainerRemove(context.WithoutCancel(ctx), created.ID, client.ContainerRemoveOptions{Force: true, RemoveVolumes: true})
	}()
	rc, err := cli.ContainerExport(ctx, created.ID, client.ContainerExportOptions{})
	if err != nil {
		t.Fatalf("exporting %s: %v", image, err)
	}
	defer rc.Close()
	files := map[string]*tar.Header{}
	tr := tar.NewReader(rc)
	for {
		h, err := tr.Next()
		if errors.Is(err, io.EOF) {
			break
		}
		if err != nil {
			t.Fatalf("reading the export of %s: %v", image, err)
		}
		files[strings.TrimSuffix(strings.TrimPrefix(h.Name, "./"), "/")] = h
	}
	if len(files) == 0 {
		t.Fatalf("the export of %s is empty", image)
	}
	return files, ins
}

// networkTools are programs that can open a connection (or run code that
// does) on their own.
var networkTools = []string{"git", "ssh", "scp", "sftp", "curl", "wget", "nc", "ncat", "netcat", "socat",
	"telnet", "ftp", "sh", "bash", "dash", "busybox", "perl", "python", "python3", "ruby", "node",
	"openssl", "apt", "apt-get", "dpkg"}

func TestAgentImageHasOnlyTheRunner(t *testing.T) {
	cli := dockerClient(t)
	image := imageName("IC_AGENT_IMAGE", "ironcurtain/agent:dev")
	files, ins := imageFiles(t, cli, image)
	cfg := ins.Config

	// Every regular file of the image, exhaustively. Docker adds the
	// /etc/hosts family and /.dockerenv to every container.
	allowed := func(p string) bool {
		switch p {
		case "usr/local/bin/ironcurtain-agent", "etc/passwd", "etc/group", "etc/nsswitch.conf",
			"etc/ssl/certs/ca-certificates.crt", ".dockerenv", "etc/hostname", "etc/hosts", "etc/resolv.conf":
			return true
		}
		return strings.HasPrefix(p, "usr/share/ironcurtain/transcripts/") || strings.HasPrefix(p, "dev/")
	}
	var unexpected []string
	for p, h := range files {
		base := path.Base(p)
		if contains(networkTools, base) {
			t.Errorf("%s holds %s", image, p)
		}
		if (h.Typeflag == tar.TypeReg || h.Typeflag == tar.TypeSymlink || h.Typeflag == tar.TypeLink) && !allowed(p) && p != "etc/mtab" {
			unexpected = append(unexpected, p)
		}
	}
	sort.Strings(unexpected)
	if len(unexpected) > 0 {
		t.Errorf("%s holds files beyond the runner and its runtime files: %v", image, unexpected)
	}
	if h := files["usr/local/bin/ironcurtain-agent"]; h == nil || h.Mode&0o111 == 0 {
		t.Errorf("%s has no executable usr/local/bin/ironcurtain-agent", image)
	}
	if h := files["usr/share/ironcurtain/transcripts/demo.yaml"]; h == nil {
		t.Errorf("%s has no demo transcript (make up runs it)", image)
	}
	if h := files["home/ironcurtain"]; h == nil || h.Uid != 10001 {
		t.Errorf("%s: home/ironcurtain missing or not owned by 10001", image)
	}
	if h := files["tmp"]; h == nil || h.Mode&0o1777 != 0o1777 {
		t.Errorf("%s: tmp missing or not 1777", image)
	}

	if cfg.User != "10001:10001" {
		t.Errorf("%s runs as %q, want 10001:10001", image, cfg.User)
	}
	for _, kv := range cfg.Env {
		name, _, _ := strings.Cut(kv, "=")
		if credentialNames.MatchString(name) || !contains([]string{"PATH", "HOME", "SSL_CERT_FILE"}, name) {
			t.Errorf("%s sets %s", image, name)
		}
	}
	if strings.Join(cfg.Entrypoint, " ") != "ironcurtain-agent" {
		t.Errorf("%s entrypoint %v", image, cfg.Entrypoint)
	}
}

func TestGatewayImage(t *testing.T) {
	cli := dockerClient(t)
	image := imageName("IC_GATEWAY_IMAGE", "ironcurtain/gateway:dev")
	files, ins := imageFiles(t, cli, image)
	cfg := ins.Config
	for _, want := range []string{
		"usr/local/bin/ironcurtain", "usr/bin/git", "usr/bin/ssh", "etc/ssl/certs/ca-certificates.crt",
		"etc/ironcurtain/gateway.yaml", "etc/ironcurtain/policy/compiled-policy.json",
		"etc/ironcurtain/policy/dynamic-lists.json", "etc/ironcurtain/policy/tool-annotations.json",
	} {
		if files[want] == nil {
			t.Errorf("%s has no %s", image, want)
		}
	}
	for _, dir := range []string{"workspace", "var/lib/ironcurtain", "var/lib/ironcurtain/git"} {
		if h := files[dir]; h == nil || h.Uid != 10001 {
			t.Errorf("%s: %s missing or not owned by 10001 (volumes mounted there inherit it)", image, dir)
		}
	}
	if cfg.User != "10001:10001" {
		t.Errorf("%s runs as %q, want 10001:10001", image, cfg.User)
	}
	if cfg.Healthcheck == nil || len(cfg.Healthcheck.Test) < 3 || cfg.Healthcheck.Test[1] != "ironcurtain" || cfg.Healthcheck.Test[2] != "healthcheck" {
		t.Errorf("%s healthcheck %v, want ironcurtain healthcheck", image, cfg.Healthcheck)
	}
	for _, kv := range cfg.Env {
		name, _, _ := strings.Cut(kv, "=")
		if credentialNames.MatchString(name) {
			t.Errorf("%s bakes in %s", image, name)
		}
	}
	for _, p := range []string{"root/.ssh", "home/ironcurtain/.ssh", "home/ironcurtain/.git-credentials", "home/ironcurtain/.gitconfig"} {
		if files[p] != nil {
			t.Errorf("%s holds %s", image, p)
		}
	}
	var lists int
	for p := range files {
		if strings.HasPrefix(p, "var/lib/apt/lists/") && !strings.HasSuffix(p, "/partial") && p != "var/lib/apt/lists/lock" {
			lists++
		}
	}
	if lists > 0 {
		t.Errorf("%s keeps %d apt package lists", image, lists)
	}
}

// credentialFiles are file names that hold a credential for some tool; the
// agent shell must carry none (the agent token is given at run time and
// never written down).
var credentialFiles = []string{".git-credentials", "hosts.yml", ".netrc", ".npmrc", ".pypirc",
	"credentials", "credentials.json", "config.json", "id_rsa", "id_ecdsa", "id_ed25519", "id_dsa",
	"auth.json", ".env"}

func TestAgentShellImage(t *testing.T) {
	cli := dockerClient(t)
	image := imageName("IC_AGENT_SHELL_IMAGE", "ironcurtain/agent-shell:dev")
	files, ins := imageFiles(t, cli, image)
	cfg := ins.Config
	for _, want := range []string{
		"usr/bin/git", "usr/bin/gh", "usr/bin/curl", "usr/bin/socat", "etc/ssl/certs/ca-certificates.crt",
		"etc/gitconfig", "usr/local/bin/gh", "usr/local/lib/ironcurtain/git-credential-ironcurtain",
		"usr/local/lib/ironcurtain/gh-relay-forward",
	} {
		if files[want] == nil {
			t.Errorf("%s has no %s", image, want)
		}
	}
	for _, p := range []string{"usr/local/bin/gh", "usr/local/lib/ironcurtain/git-credential-ironcurtain", "usr/local/lib/ironcurtain/gh-relay-forward", "etc/gitconfig"} {
		if h := files[p]; h != nil && (h.Uid != 0 || h.Mode&0o022 != 0) {
			t.Errorf("%s: %s is owned by %d with mode %o: the agent could rewrite it", image, p, h.Uid, h.Mode)
		}
	}
	for p, h := range files {
		if h.Typeflag != tar.TypeReg && h.Typeflag != tar.TypeSymlink {
			continue
		}
		base := path.Base(p)
		// Debian's own files named like a credential file hold none: only
		// the places a tool would keep one are checked.
		home := strings.HasPrefix(p, "home/") || strings.HasPrefix(p, "root/") || strings.HasPrefix(p, "workspace/")
		if home && (contains(credentialFiles, base) || strings.Contains(p, "/.ssh/") || strings.Contains(p, "/.config/gh/")) {
			t.Errorf("%s holds %s", image, p)
		}
		if strings.HasPrefix(p, "etc/ssh/") && strings.HasPrefix(base, "ssh_host_") {
			t.Errorf("%s holds the host key %s", image, p)
		}
	}
	if cfg.User != "10001:10001" {
		t.Errorf("%s runs as %q, want 10001:10001", image, cfg.User)
	}
	for _, kv := range cfg.Env {
		name, value, _ := strings.Cut(kv, "=")
		if credentialNames.MatchString(name) || name == "IRONCURTAIN_AGENT_TOKEN" || name == "IRONCURTAIN_AGENT_TOKEN_FILE" {
			t.Errorf("%s bakes in %s", image, name)
		}
		if strings.Contains(value, "@") && strings.Contains(strings.ToUpper(name), "PROXY") {
			t.Errorf("%s bakes a proxy credential into %s", image, name)
		}
	}
	var lists int
	for p := range files {
		if strings.HasPrefix(p, "var/lib/apt/lists/") && !strings.HasSuffix(p, "/partial") && p != "var/lib/apt/lists/lock" {
			lists++
		}
	}
	if lists > 0 {
		t.Errorf("%s keeps %d apt package lists", image, lists)
	}
}

// agentShellProbe runs in a container of the agent shell with a canary
// agent token: git's URL rewriting, the credential helper (for the gateway,
// for github.com, for another host, without a token), gh through a fake
// GitHub relay (socat on 127.0.0.1:18080 logging what it receives), an
// attempt to store the credential, and finally a search of the container's
// whole filesystem for the canary.
const agentShellProbe = `
set -u
cat >/tmp/fake-relay <<'X'
#!/bin/bash
while IFS= read -r l; do l=${l%$'\r'}; [ -z "$l" ] && break; echo "REQ $l" >>/tmp/relay.log; done
body='{"login":"octo"}'
printf 'HTTP/1.1 200 OK\r\nContent-Type: application/json\r\nContent-Length: %d\r\nConnection: close\r\n\r\n%s' ${#body} "$body"
X
chmod +x /tmp/fake-relay
socat TCP-LISTEN:18080,bind=127.0.0.1,reuseaddr,fork EXEC:/tmp/fake-relay &
for i in $(seq 50); do (exec 3<>/dev/tcp/127.0.0.1/18080) 2>/dev/null && break; sleep 0.1; done
echo "URL $(git ls-remote --get-url https://github.com/acme/app.git)"
echo "SSHURL $(git ls-remote --get-url git@github.com:acme/app.git)"
printf 'protocol=http\nhost=127.0.0.1:18080\n\n' | git credential fill | sed 's/^/GATEWAYCRED /'
printf 'protocol=https\nhost=github.com\n\n' | GIT_TERMINAL_PROMPT=0 git credential fill 2>/dev/null | sed 's/^/GITHUBCRED /'
printf 'protocol=http\nhost=evil.test\n\n' | /usr/local/lib/ironcurtain/git-credential-ironcurtain get | sed 's/^/EVILCRED /'
printf 'protocol=http\nhost=127.0.0.1:18080\n\n' | IRONCURTAIN_AGENT_TOKEN= /usr/local/lib/ironcurtain/git-credential-ironcurtain get 2>/dev/null | sed 's/^/NOTOKENCRED /'
printf 'protocol=http\nhost=127.0.0.1:18080\nusername=agent\npassword=%s\n\n' "$IRONCURTAIN_AGENT_TOKEN" | git credential approve
# A dead proxy in the environment: gh's socket transport must not use it.
echo "GH $(HTTPS_PROXY=http://agent:x@127.0.0.1:1 HTTP_PROXY=http://agent:x@127.0.0.1:1 gh api /repos/acme/app)"
sleep 0.3
cat /tmp/relay.log
rm -f /tmp/relay.log
echo "HELPER $(git config --system --get-urlmatch credential.helper http://gateway:8080/git/github.com/acme/app.git)"
echo "GHHELPER $(git config --get-urlmatch credential.helper https://github.com/acme/app.git)"
printf %s "$IRONCURTAIN_AGENT_TOKEN" >/tmp/ic-control
echo "CONTROL $(grep -rlsF --exclude-dir=proc --exclude-dir=sys --exclude-dir=dev "$IRONCURTAIN_AGENT_TOKEN" / | tr '\n' ' ')"
rm -f /tmp/ic-control
echo "KEYS $(grep -rlsE 'BEGIN [A-Z ]*PRIVATE KEY|ghp_[A-Za-z0-9]{20}|github_pat_|gho_[A-Za-z0-9]{20}|sk-ant-|sk-proj-|AKIA[0-9A-Z]{16}' /etc /home /root /usr/local /workspace /opt | tr '\n' ' ')"
echo "ONDISK $(grep -rlsF --exclude-dir=proc --exclude-dir=sys --exclude-dir=dev "$IRONCURTAIN_AGENT_TOKEN" / | tr '\n' ' ')"
echo DONE
`

func TestAgentShellGoesThroughTheGateway(t *testing.T) {
	cli := dockerClient(t)
	image := imageName("IC_AGENT_SHELL_IMAGE", "ironcurtain/agent-shell:dev")
	_, _ = imageFiles(t, cli, image) // skips (or fails under CI) when the image is missing
	const canary = "ic-agent-canary-7f3a9c"
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	defer cancel()
	// The gateway URL the image was built for is http://gateway:8080; the
	// probe points git's credential context and gh at the fake relay by
	// overriding the URL both read at run time (git through -c in
	// GIT_CONFIG_*, the same keys /etc/gitconfig sets).
	cmd := exec.CommandContext(ctx, "docker", "run", "--rm", "--network", "none",
		"--label", "dev.ironcurtain.deploy-test=1",
		"-e", "IRONCURTAIN_AGENT_TOKEN="+canary,
		"-e", "IRONCURTAIN_GATEWAY_URL=http://127.0.0.1:18080",
		"-e", "GIT_CONFIG_COUNT=2",
		"-e", "GIT_CONFIG_KEY_0=credential.http://127.0.0.1:18080.helper",
		"-e", "GIT_CONFIG_VALUE_0=/usr/local/lib/ironcurtain/git-credential-ironcurtain",
		"-e", "GIT_CONFIG_KEY_1=credential.http://127.0.0.1:18080.username",
		"-e", "GIT_CONFIG_VALUE_1=agent",
		image, "bash", "-c", agentShellProbe)
	outb, err := cmd.CombinedOutput()
	out := string(outb)
	if err != nil || !strings.Contains(out, "DONE") {
		t.Fatalf("the probe failed: %v\n%s", err, out)
	}
	has := func(line string) bool { return contains(lines([]byte(out)), line) }
	tests := []struct {
		name string
		ok   bool
	}{
		{name: "https://github.com/ goes to the gateway's git door", ok: has("URL http://gateway:8080/git/github.com/acme/app.git")},
		{name: "git@github.com: goes to the gateway's git door", ok: has("SSHURL http://gateway:8080/git/github.com/acme/app.git")},
		{name: "the gateway gets the agent token", ok: has("GATEWAYCRED password="+canary) && has("GATEWAYCRED username=agent")},
		{name: "github.com gets nothing", ok: !strings.Contains(out, "GITHUBCRED password")},
		{name: "another host gets nothing from the helper", ok: !strings.Contains(out, "EVILCRED")},
		{name: "no token, no answer", ok: !strings.Contains(out, "NOTOKENCRED")},
		{name: "gh reaches the relay under /github", ok: has("GH {\"login\":\"octo\"}") && has("REQ GET /github/repos/acme/app HTTP/1.1")},
		{name: "gh sends the agent token as a Bearer token", ok: has("REQ Authorization: Bearer " + canary)},
		{name: "gh's request names the gateway as its host", ok: has("REQ Host: 127.0.0.1:18080")},
		{name: "/etc/gitconfig names the helper for the gateway", ok: has("HELPER /usr/local/lib/ironcurtain/git-credential-ironcurtain")},
		{name: "/etc/gitconfig names no helper for github.com", ok: has("GHHELPER ")},
		{name: "the disk search finds a planted copy (control)", ok: has("CONTROL /tmp/ic-control ")},
		{name: "nothing wrote the token to disk", ok: has("ONDISK ")},
		{name: "no private key or known token format in the image's configuration and homes", ok: has("KEYS ")},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			if !tt.ok {
				t.Errorf("not so; the probe said:\n%s", out)
			}
		})
	}
}
