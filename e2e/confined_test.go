package e2e_test

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"log"
	"net/netip"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/moby/moby/client"

	"ironcurtain.dev/e2e/internal/mcpfixture"
	"ironcurtain.dev/e2e/internal/stack"
	"ironcurtain.dev/e2e/internal/testenv"
)

// The confined topology (issue 26) is a stack of its own, started on first
// use by a TestConfined* test: the default topology the other scenarios
// share has no launcher, and its runtime is unchanged.
const (
	confinedSession = "confined"
	envBaseImage    = "IC_BASE_IMAGE" // the offline base the evil server's image is built on
	evilPids        = 64
	evilMemoryMB    = 256
	evilControlPath = "/evil-control"
	// The runtime server images (images/servers, `make server-images`):
	// Debian's nodejs and python3 running the echo servers of
	// images/servers/testdata; servers "node" and "python".
	envNodeServerImage   = "IC_NODE_SERVER_IMAGE"   // default ironcurtain/mcp-echo-node:dev
	envPythonServerImage = "IC_PYTHON_SERVER_IMAGE" // default ironcurtain/mcp-echo-python:dev
	runtimePids          = 64
	runtimeMemoryMB      = 128
)

// evilSecretURL is on the evil server's allowlist and carries a secret.
var evilSecretURL = "http://" + stack.HostAllowed + "/leak?key=" + e2eAWSKey

var (
	confinedOnce  sync.Once
	confinedStack *stack.Stack
	confinedErr   error
	confinedDir   string
	// confinedRuntimesErr says why the runtime servers are not in the
	// topology (their images are missing and could not be built); the other
	// confined tests do not need them.
	confinedRuntimesErr error
)

// confinedTopology returns the confined stack, starting it on first use.
func confinedTopology(t *testing.T) *stack.Stack {
	t.Helper()
	confinedOnce.Do(func() {
		begin := time.Now()
		confinedStack, confinedErr = setupConfined()
		log.Printf("e2e: confined topology setup took %s", time.Since(begin).Round(100*time.Millisecond))
	})
	if confinedErr != nil {
		if errors.Is(confinedErr, errNoDock) {
			testenv.Missing(t, "the e2e suite needs Docker: %v", confinedErr)
		}
		t.Fatalf("e2e confined topology: %v", confinedErr)
	}
	return confinedStack
}

func setupConfined() (*stack.Stack, error) {
	ctx, cancel := context.WithTimeout(context.Background(), 15*time.Minute)
	defer cancel()
	if err := dockerAvailable(ctx); err != nil {
		return nil, fmt.Errorf("%w: %v", errNoDock, err)
	}
	gw := envOr(envGatewayImage, "ironcurtain/gateway:dev")
	agent := envOr(envAgentImage, "ironcurtain/agent:dev")
	pg := envOr(envPostgresImage, "ironcurtain/postgres-offline:15")
	base := envOr(envBaseImage, "ironcurtain/base-offline:bookworm")
	if err := ensureImages(ctx, gw, agent, pg, base); err != nil {
		return nil, err
	}
	root, err := repoRoot()
	if err != nil {
		return nil, err
	}
	if confinedDir, err = os.MkdirTemp("", "ic-e2e-confined-"); err != nil {
		return nil, err
	}
	runtimes, err := runtimeImages(ctx, root)
	if err != nil {
		confinedRuntimesErr = err
		log.Printf("e2e: the confined topology runs without the Node and Python servers: %v", err)
	}
	bins := map[string]string{}
	for _, name := range []string{"internet", "probe", "evilserver"} {
		if bins[name], err = buildFixture(ctx, "./cmd/"+name, filepath.Join(confinedDir, name)); err != nil {
			return nil, err
		}
	}
	return stack.Start(ctx, stack.Options{
		GatewayImage:   gw,
		AgentImage:     agent,
		PostgresImage:  pg,
		BaseImage:      envOr(envFixtureImage, gw),
		InternetBinary: bins["internet"],
		ProbeBinary:    bins["probe"],
		ModelScript:    []byte(modelScript),
		Sessions:       []string{confinedSession},
		Logf:           log.Printf,
		Confined: &stack.Confined{
			EvilBinary:      bins["evilserver"],
			ServerBaseImage: base,
			PolicyDir:       filepath.Join(root, "gateway", "policies", "base"),
			Pids:            evilPids,
			MemoryMB:        evilMemoryMB,
			Runtimes:        runtimes,
			RuntimePids:     runtimePids,
			RuntimeMemoryMB: runtimeMemoryMB,
			EvilEnv: map[string]string{
				// Where the gateway keeps its state, secrets and
				// configuration, and its unix sockets: none of it may
				// even exist in the server's container.
				mcpfixture.EnvFiles: strings.Join([]string{"/var/lib/ironcurtain", stack.SecretsDir, stack.SecretsDir + "/launcher-token",
					stack.SecretsDir + "/remote-token", "/etc/ironcurtain/e2e/gateway.yaml", "/run/ironcurtain/agent-tokens/" + confinedSession,
					stack.LauncherSocket, "/var/run/docker.sock", "/workspace"}, ","),
				mcpfixture.EnvTCP:        "postgres:5432,gateway-ops:8081",
				mcpfixture.EnvBlockedURL: "https://" + stack.HostBlocked + "/",
				mcpfixture.EnvSecretURL:  evilSecretURL,
				mcpfixture.EnvAllowedURL: "http://" + stack.HostAllowed + evilControlPath,
			},
		},
	})
}

// runtimeImages returns the runtime server images by server name,
// running `make server-images` when one is missing (unless IC_E2E_NO_BUILD).
func runtimeImages(ctx context.Context, root string) (map[string]string, error) {
	images := map[string]string{
		"node":   envOr(envNodeServerImage, "ironcurtain/mcp-echo-node:dev"),
		"python": envOr(envPythonServerImage, "ironcurtain/mcp-echo-python:dev"),
	}
	all := []string{images["node"], images["python"]}
	missing := missingImages(ctx, all)
	if len(missing) == 0 {
		return images, nil
	}
	if os.Getenv(envNoBuild) == "1" {
		return nil, fmt.Errorf("images %s are missing (run `make server-images`)", strings.Join(missing, ", "))
	}
	log.Printf("e2e: images %s are missing; running `make server-images` in %s", strings.Join(missing, ", "), root)
	cmd := exec.CommandContext(ctx, "make", "-C", root, "server-images", "NODE_SERVER_IMAGE="+images["node"], "PYTHON_SERVER_IMAGE="+images["python"])
	cmd.Stdout, cmd.Stderr = os.Stderr, os.Stderr
	if err := cmd.Run(); err != nil {
		return nil, fmt.Errorf("building the server images with make server-images: %w", err)
	}
	if missing = missingImages(ctx, all); len(missing) > 0 {
		return nil, fmt.Errorf("images %s are still missing after `make server-images`", strings.Join(missing, ", "))
	}
	return images, nil
}

// closeConfined removes the confined stack (TestMain).
func closeConfined(failed bool) {
	if confinedStack != nil {
		ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
		if failed {
			dumpLogs(ctx, confinedStack)
			fmt.Fprintf(os.Stderr, "===== launcher logs (last 200 lines)\n%s\n", lastLines(confinedStack.LauncherLogs(ctx), 200))
		}
		confinedStack.Close(ctx)
		cancel()
	}
	if confinedDir != "" {
		_ = os.RemoveAll(confinedDir)
	}
}

// confinedSecrets are every secret of the confined stack, by name.
func confinedSecrets(s *stack.Stack) map[string]string {
	secrets := s.Secrets.Named()
	for name, tok := range s.AgentTokens {
		secrets["agent token "+name] = tok
	}
	secrets["launcher token"] = s.LauncherToken()
	secrets["remote MCP bearer token"] = s.RemoteToken()
	return secrets
}

// confinedPlan runs a probe plan against the gateway as the confined
// session.
func confinedPlan(ctx context.Context, s *stack.Stack, plan probePlan) (probeReport, error) {
	if len(plan.Endpoints) == 0 {
		plan.Endpoints = []string{s.MCPURL()}
	}
	return runPlanAs(ctx, s, confinedSession, plan)
}

// waitForTools waits until the gateway lists every tool of want.
func waitForTools(t *testing.T, ctx context.Context, s *stack.Stack, want ...string) []string {
	t.Helper()
	deadline := time.Now().Add(2 * time.Minute)
	for {
		rep, err := confinedPlan(ctx, s, probePlan{ListTools: true})
		missing := []string{}
		for _, w := range want {
			found := false
			for _, tool := range rep.Tools {
				found = found || tool == w
			}
			if !found {
				missing = append(missing, w)
			}
		}
		if err == nil && len(missing) == 0 {
			return rep.Tools
		}
		if time.Now().After(deadline) {
			t.Fatalf("the gateway does not list %v (err %v); it lists %v", missing, err, rep.Tools)
		}
		time.Sleep(2 * time.Second)
	}
}

// evilCall runs evil__attempt (what: all) and decodes its report; it
// retries while the server is (re)starting.
func evilCall(t *testing.T, ctx context.Context, s *stack.Stack, within time.Duration) mcpfixture.Report {
	t.Helper()
	deadline := time.Now().Add(within)
	for {
		rep, err := confinedPlan(ctx, s, probePlan{Calls: []probeCall{{Tool: "evil__attempt", Args: map[string]string{"what": mcpfixture.WhatAll}}}})
		if err == nil && len(rep.Calls) == 1 && rep.Calls[0].Err == "" && !rep.Calls[0].IsError {
			var r mcpfixture.Report
			if err := json.Unmarshal([]byte(rep.Calls[0].Text), &r); err != nil {
				t.Fatalf("decoding the evil report %q: %v", rep.Calls[0].Text, err)
			}
			return r
		}
		if time.Now().After(deadline) {
			t.Fatalf("evil__attempt did not answer within %s: %v %+v", within, err, rep.Calls)
		}
		time.Sleep(2 * time.Second)
	}
}

// requireNoSecret fails if text holds any secret of the stack.
func requireNoSecret(t *testing.T, where, text string, secrets map[string]string) {
	t.Helper()
	for name, v := range secrets {
		if v != "" && strings.Contains(text, v) {
			t.Errorf("%s holds the %s", where, name)
		}
	}
}

// auditLeaks returns "table: secret" for every audit table row holding a
// secret.
func auditLeaks(t *testing.T, ctx context.Context, s *stack.Stack, secrets map[string]string) []string {
	t.Helper()
	var values, checks []string
	for name, v := range secrets {
		values = append(values, "("+stack.Quote(name)+", "+stack.Quote(v)+")")
	}
	for _, table := range []string{"sessions", "tool_calls", "tool_call_outcomes", "egress_events", "llm_calls", "escalations", "session_approvals"} {
		checks = append(checks, "SELECT "+stack.Quote(table)+" AS tbl, s.name FROM secrets s WHERE EXISTS (SELECT 1 FROM "+table+" t WHERE strpos(t::text, s.v) > 0)")
	}
	var leaks []struct {
		Table string `json:"tbl"`
		Name  string `json:"name"`
	}
	q := "WITH secrets(name, v) AS (VALUES " + strings.Join(values, ", ") + ") " + strings.Join(checks, " UNION ALL ")
	if err := s.QueryJSON(ctx, q, &leaks); err != nil {
		t.Fatal(err)
	}
	var out []string
	for _, l := range leaks {
		out = append(out, l.Table+": "+l.Name)
	}
	return out
}

// serverNetPrefix is the evil server network's IPv4 subnet.
func serverNetPrefix(t *testing.T, ctx context.Context, s *stack.Stack) netip.Prefix {
	t.Helper()
	ins, err := s.DockerClient().NetworkInspect(ctx, s.ServerNetwork(), client.NetworkInspectOptions{})
	if err != nil {
		t.Fatal(err)
	}
	for _, c := range ins.Network.IPAM.Config {
		if c.Subnet.IsValid() && c.Subnet.Addr().Is4() {
			return c.Subnet.Masked()
		}
	}
	t.Fatal("the server network has no IPv4 subnet")
	return netip.Prefix{}
}
