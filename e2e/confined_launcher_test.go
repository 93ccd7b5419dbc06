package e2e_test

import (
	"encoding/json"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/moby/moby/client"

	"ironcurtain.dev/e2e/internal/stack"
)

// TestConfinedLauncherRefuses sends, from inside the gateway container
// (the launcher's only client: it holds the socket and the token, as a
// compromised gateway would), start requests the launcher must refuse: an
// unknown name, another image, a privileged flag, a host mount, a command,
// a wrong token. Each gets the launcher's refusal, no container is created
// or changed, and the evil server keeps running.
func TestConfinedLauncherRefuses(t *testing.T) {
	s := confinedTopology(t)
	ctx := ctxFor(t, 3*time.Minute)
	waitForTools(t, ctx, s, "evil__attempt")
	before := launcherContainers(t, s)

	probe, err := os.ReadFile(filepath.Join(confinedDir, "probe"))
	if err != nil {
		t.Fatal(err)
	}
	const probePath = "/tmp/ic-e2e-probe"
	if err := s.CopyToGateway(ctx, probe, probePath, 0o755); err != nil {
		t.Fatal(err)
	}
	tok := s.LauncherToken()
	req := func(extra string) string {
		return `{"op":"start","server":"` + stack.EvilServer + `","token":"` + tok + `"` + extra + `}`
	}
	cases := []struct{ name, line, want string }{
		{"unknown name", `{"op":"start","server":"notes","token":"` + tok + `"}`, "unknown server"},
		{"another image", req(`,"image":"` + envOr(envGatewayImage, "ironcurtain/gateway:dev") + `"`), "bad request"},
		{"privileged", req(`,"privileged":true`), "bad request"},
		{"host mount", req(`,"mounts":[{"type":"bind","source":"/","target":"/host"}]`), "bad request"},
		{"host bind", req(`,"binds":["/var/run/docker.sock:/var/run/docker.sock"]`), "bad request"},
		{"command", req(`,"args":["sh","-c","id"]`), "bad request"},
		{"nested", `{"op":"start","server":{"name":"evil","privileged":true},"token":"` + tok + `"}`, "bad request"},
		{"duplicate server", `{"op":"start","server":"notes","server":"evil","token":"` + tok + `"}`, "bad request"},
		{"wrong token", `{"op":"start","server":"evil","token":"` + strings.Repeat("x", 64) + `"}`, "not authorised"},
	}
	var lines []string
	for _, c := range cases {
		lines = append(lines, c.line)
	}
	r, err := s.ExecGatewayStdin(ctx, []byte(strings.Join(lines, "\n")+"\n"), probePath, "launcher", stack.LauncherSocket)
	if err != nil || r.Code != 0 {
		t.Fatalf("probe launcher: %v %s", err, r)
	}
	var got []struct{ Request, Reply, Err string }
	if err := json.Unmarshal([]byte(r.Stdout), &got); err != nil || len(got) != len(cases) {
		t.Fatalf("probe launcher: %v, %d answers: %s", err, len(got), r.Stdout)
	}
	for i, c := range cases {
		var rep struct {
			OK    bool   `json:"ok"`
			Error string `json:"error"`
		}
		if err := json.Unmarshal([]byte(got[i].Reply), &rep); err != nil || rep.OK || rep.Error != c.want {
			t.Errorf("%s: reply %q (err %v %s), want refused with %q", c.name, got[i].Reply, err, got[i].Err, c.want)
		}
	}
	if after := launcherContainers(t, s); strings.Join(after, ",") != strings.Join(before, ",") {
		t.Errorf("the launcher's containers changed: before %v, after %v", before, after)
	}
	if n := strings.Count(s.LauncherLogs(ctx), "launcher: refused a request"); n < len(cases) {
		t.Errorf("the launcher logged %d refusals, want at least %d", n, len(cases))
	}
	evilCall(t, ctx, s, 30*time.Second)
}

// launcherContainers lists the launcher's containers as "id name image".
func launcherContainers(t *testing.T, s *stack.Stack) []string {
	t.Helper()
	list, err := s.DockerClient().ContainerList(t.Context(), client.ContainerListOptions{All: true,
		Filters: make(client.Filters).Add("label", "dev.ironcurtain.launcher")})
	if err != nil {
		t.Fatal(err)
	}
	var out []string
	for _, c := range list.Items {
		out = append(out, c.ID[:12]+" "+strings.Join(c.Names, "/")+" "+c.Image)
	}
	return out
}
