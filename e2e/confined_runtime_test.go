package e2e_test

import (
	"regexp"
	"testing"
	"time"

	"github.com/moby/moby/client"

	"ironcurtain.dev/e2e/internal/testenv"
)

// TestConfinedRuntimeServers runs the Node and the Python server images
// (images/servers, their Debian variants: Debian's nodejs and python3
// running the dependency-free echo servers of images/servers/testdata) in
// image: mode through the launcher, next to the evil server: each one's
// tool is listed (its definition matches the pin), a call is allowed by the
// policy, answered by that runtime and recorded with its outcome, and each
// container has the hardened spec.
func TestConfinedRuntimeServers(t *testing.T) {
	s := confinedTopology(t)
	if confinedRuntimesErr != nil {
		testenv.Missing(t, "the Node and Python server images: %v", confinedRuntimesErr)
	}
	ctx := ctxFor(t, 3*time.Minute)
	begin := time.Now()
	waitForTools(t, ctx, s, "node__echo", "python__echo")
	t.Logf("both runtime servers listed %s after the test began", time.Since(begin).Round(100*time.Millisecond))

	const text = "hello from the confined agent"
	want := map[string]*regexp.Regexp{
		"node":   regexp.MustCompile(`^node v\d+\.\d+\.\d+ echo: ` + text + `$`),
		"python": regexp.MustCompile(`^python 3\.\d+\.\d+ echo: ` + text + `$`),
	}
	rep, err := confinedPlan(ctx, s, probePlan{Calls: []probeCall{
		{Tool: "node__echo", Args: map[string]string{"text": text}},
		{Tool: "python__echo", Args: map[string]string{"text": text}},
	}})
	if err != nil {
		t.Fatal(err)
	}
	for i, server := range []string{"node", "python"} {
		c := rep.Calls[i]
		if c.Err != "" || c.IsError || !want[server].MatchString(c.Text) {
			t.Errorf("%s__echo: err %q, tool error %v: %q; want %s", server, c.Err, c.IsError, c.Text, want[server])
		}
	}

	t.Run("audit", func(t *testing.T) {
		// The outcome row follows the answer: wait for it a little.
		deadline := time.Now().Add(20 * time.Second)
		for {
			missing := []string{}
			calls := toolCalls(t, ctx, s, confinedSession)
			for _, server := range []string{"node", "python"} {
				found := false
				for _, c := range calls {
					found = found || (c.Server == server && c.Tool == "echo" && c.Decision == "allow" &&
						c.Rule == "allow-e2e-"+server && c.Outcome == "ok" && regexp.MustCompile(`"text": ?"`+text+`"`).MatchString(c.Args))
				}
				if !found {
					missing = append(missing, server)
				}
			}
			if len(missing) == 0 {
				return
			}
			if time.Now().After(deadline) {
				for _, c := range calls {
					t.Logf("tool call %s", c)
				}
				t.Fatalf("no allowed echo call with outcome ok recorded for %v", missing)
			}
			time.Sleep(time.Second)
		}
	})

	t.Run("container spec", func(t *testing.T) {
		cli := s.DockerClient()
		list, err := cli.ContainerList(ctx, client.ContainerListOptions{All: true, Filters: make(client.Filters).Add("label", "dev.ironcurtain.launcher")})
		if err != nil {
			t.Fatal(err)
		}
		images := map[string]string{"node": envOr(envNodeServerImage, "ironcurtain/mcp-echo-node:dev"), "python": envOr(envPythonServerImage, "ironcurtain/mcp-echo-python:dev")}
		seen := map[string]int{}
		for _, c := range list.Items {
			server := c.Labels["dev.ironcurtain.server"]
			if images[server] == "" {
				continue
			}
			seen[server]++
			ins, err := cli.ContainerInspect(ctx, c.ID, client.ContainerInspectOptions{})
			if err != nil {
				t.Fatal(err)
			}
			checkHardened(t, s, ins.Container, images[server], runtimePids, runtimeMemoryMB)
		}
		for server := range images {
			if seen[server] != 1 {
				t.Errorf("%d containers of server %s, want 1", seen[server], server)
			}
		}
	})
}
