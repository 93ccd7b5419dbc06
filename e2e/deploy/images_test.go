package deploy

import (
	"archive/tar"
	"context"
	"errors"
	"io"
	"os"
	"path"
	"sort"
	"strings"
	"testing"
	"time"

	"github.com/moby/moby/api/types/container"
	"github.com/moby/moby/client"
	"github.com/testcontainers/testcontainers-go"
	tclog "github.com/testcontainers/testcontainers-go/log"
)

func TestMain(m *testing.M) {
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
		if os.Getenv("CI") == "true" {
			t.Fatalf("Docker is not available (CI=true): %v", err)
		}
		t.Skipf("Docker is not available: %v (in CI this fails)", err)
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
		if os.Getenv("CI") == "true" {
			t.Fatalf("image %s: %v (make images builds it)", image, err)
		}
		t.Skipf("image %s is not built (make images): %v", image, err)
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
