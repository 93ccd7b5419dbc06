package e2e_test

import (
	"context"
	"net/netip"
	"strings"
	"testing"
	"time"

	"github.com/moby/moby/api/types/container"
	"github.com/moby/moby/client"

	"ironcurtain.dev/e2e/internal/mcpfixture"
	"ironcurtain.dev/e2e/internal/stack"
)

// TestConfinedImageServer runs the evil server in image: mode (issue 26):
// started by the launcher in its own hardened container on a server
// network whose only peer is the gateway's egress proxy. At start and on
// each call it tries to read every visible process's environment and the
// gateway's state and secret files, to connect to the internet directly,
// to use the proxy without its identity, to a host off its allowlist and
// with a secret in the URL, to fork without bound, to allocate 2 GiB, and
// (on request) to write 100 MB to stdout. Each attempt fails or is
// contained (controls: its allowlisted URL works), built-in tools keep
// answering meanwhile, and every attempt through the proxy is an
// egress_events row of session server:evil (the one without an identity:
// an auth-failures row naming its address).
func TestConfinedImageServer(t *testing.T) {
	s := confinedTopology(t)
	ctx := ctxFor(t, 4*time.Minute)
	secrets := confinedSecrets(s)
	waitForTools(t, ctx, s, "evil__attempt", "filesystem__list_allowed_directories")

	// The attempts, while built-in calls run on other workers.
	plan := probePlan{Workers: 3, Calls: []probeCall{{Tool: "evil__attempt", Args: map[string]string{"what": mcpfixture.WhatAll}}}}
	for range 20 {
		plan.Calls = append(plan.Calls, probeCall{Tool: "filesystem__list_allowed_directories", Args: map[string]string{}})
	}
	rep, err := confinedPlan(ctx, s, plan)
	if err != nil {
		t.Fatal(err)
	}
	evil := rep.Calls[0]
	if evil.Err != "" || evil.IsError {
		t.Fatalf("evil__attempt: err %q, tool error %v: %s", evil.Err, evil.IsError, evil.Text)
	}
	requireBuiltinsServed(t, "during the attempts", rep, evil.Start, evil.End)
	requireNoSecret(t, "the evil server's report", evil.Text, secrets)
	report := evilCall(t, ctx, s, 30*time.Second) // a second round: "on each call"
	t.Run("start", func(t *testing.T) { checkAttempts(t, report.Start, true) })
	t.Run("call", func(t *testing.T) { checkAttempts(t, report.Call, false) })

	t.Run("container spec", func(t *testing.T) { checkEvilContainer(t, ctx, s) })
	t.Run("stdout flood", func(t *testing.T) { checkFlood(t, ctx, s) })
	t.Run("egress_events", func(t *testing.T) { checkEvilEgress(t, ctx, s) })
	t.Run("no secret in records", func(t *testing.T) {
		for _, l := range auditLeaks(t, ctx, s, secrets) {
			t.Errorf("audit rows hold a secret: %s", l)
		}
		requireNoSecret(t, "the gateway logs", s.GatewayLogs(ctx), secrets)
	})
}

// requireBuiltinsServed fails unless every call but the first answered
// without error, and logs how many ran while [from, to] (the evil call).
func requireBuiltinsServed(t *testing.T, what string, rep probeReport, from, to int64) {
	t.Helper()
	during, slowest := 0, time.Duration(0)
	for i, c := range rep.Calls[1:] {
		if c.Err != "" || c.IsError {
			t.Errorf("%s: built-in call %d: err %q, tool error %v: %s", what, i, c.Err, c.IsError, c.Text)
		}
		if c.Start >= from && c.End <= to {
			during++
		}
		slowest = max(slowest, time.Duration(c.End-c.Start))
	}
	t.Logf("%s: %d of %d built-in calls ran during the evil call (%s); slowest %s", what, during, len(rep.Calls)-1,
		time.Duration(to-from).Round(time.Millisecond), slowest.Round(time.Millisecond))
	if during == 0 {
		t.Errorf("%s: no built-in call ran while the evil call did", what)
	}
}

// checkAttempts checks one round of the evil server's attempts. At start
// the gateway's egress proxy may not listen yet (it starts after the
// external servers): then each proxy attempt is refused by the network
// stack, and the control is not required.
func checkAttempts(t *testing.T, as []mcpfixture.Attempt, atStart bool) {
	seen := map[string]int{}
	for _, a := range as {
		seen[a.Kind]++
		t.Logf("%-18s %-60s ok=%-5v count=%d %s", a.Kind, a.Target, a.OK, a.Count, cutText(a.Result, 160))
		switch a.Kind {
		case "environ":
			// Its own PID namespace: only its own processes are in sight.
			if !strings.Contains(a.Target, "ic-e2e-evilserver") {
				t.Errorf("the server sees a process not its own: %s", a.Target)
			}
		case "file":
			if a.OK || !strings.Contains(a.Result, "no such file or directory") {
				t.Errorf("%s is visible in the server's container: ok=%v %s", a.Target, a.OK, a.Result)
			}
		case "tcp":
			if a.OK {
				t.Errorf("a direct connection to %s succeeded: %s", a.Target, a.Result)
			}
		case "proxy-no-identity", "proxy-blocked", "proxy-secret", "proxy-allowed":
			if atStart && strings.Contains(a.Result, "connection refused") {
				continue
			}
			checkProxyAttempt(t, a)
		case "fork":
			if a.OK || a.Count == 0 || a.Count >= evilPids {
				t.Errorf("fork bomb: %d processes started (pids limit %d): %s", a.Count, evilPids, a.Result)
			}
		case "memory":
			if a.OK || a.Count >= evilMemoryMB || !strings.Contains(a.Result, "killed") {
				t.Errorf("allocation: %d MiB (limit %d MiB): %s", a.Count, evilMemoryMB, a.Result)
			}
		default:
			t.Errorf("unexpected attempt %+v", a)
		}
	}
	for _, k := range []string{"environ", "file", "tcp", "proxy-no-identity", "proxy-blocked", "proxy-secret", "proxy-allowed", "fork", "memory"} {
		if seen[k] == 0 {
			t.Errorf("no %s attempt in the report", k)
		}
	}
}

// checkProxyAttempt checks an attempt through the egress proxy.
func checkProxyAttempt(t *testing.T, a mcpfixture.Attempt) {
	t.Helper()
	switch a.Kind {
	case "proxy-no-identity":
		wantRefused(t, a, "407")
	case "proxy-blocked":
		wantRefused(t, a, "Forbidden")
	case "proxy-secret":
		wantRefused(t, a, "403")
	case "proxy-allowed":
		if !a.OK {
			t.Errorf("control: the allowlisted URL %s did not answer through the proxy: %s", a.Target, a.Result)
		}
	}
}

func wantRefused(t *testing.T, a mcpfixture.Attempt, want string) {
	t.Helper()
	if a.OK || !strings.Contains(a.Result, want) {
		t.Errorf("%s %s: ok=%v %q; want refused with %q", a.Kind, a.Target, a.OK, a.Result, want)
	}
}

func cutText(s string, n int) string {
	if len(s) > n {
		return s[:n] + "…"
	}
	return s
}

// checkEvilContainer inspects the container the launcher runs: the
// hardened spec, and nothing the gateway could have asked for.
func checkEvilContainer(t *testing.T, ctx context.Context, s *stack.Stack) {
	cli := s.DockerClient()
	list, err := cli.ContainerList(ctx, client.ContainerListOptions{All: true, Filters: make(client.Filters).Add("label", "dev.ironcurtain.launcher")})
	if err != nil {
		t.Fatal(err)
	}
	n := 0
	for _, c := range list.Items {
		if c.Labels["dev.ironcurtain.server"] != stack.EvilServer {
			continue
		}
		n++
		ins, err := cli.ContainerInspect(ctx, c.ID, client.ContainerInspectOptions{})
		if err != nil {
			t.Fatal(err)
		}
		checkHardened(t, s, ins.Container, s.EvilImage(), evilPids, evilMemoryMB)
	}
	if n != 1 {
		t.Errorf("%d containers of server evil, want 1", n)
	}
	// The gateway never holds the Docker socket.
	if r, err := s.ExecGateway(ctx, "test", "-e", "/var/run/docker.sock"); err != nil || r.Code == 0 {
		t.Errorf("the gateway container has /var/run/docker.sock (err %v, %s)", err, r)
	}
}

// checkHardened checks a server container the launcher runs: the image
// configured for it, the hardened spec (not privileged, read-only root,
// every capability dropped, no mount, the numeric non-root user), its pids
// and memory limits (no swap), only the server network, and no launcher or
// remote token in its environment.
func checkHardened(t *testing.T, s *stack.Stack, c container.InspectResponse, image string, pids, memoryMB int64) {
	t.Helper()
	cfg, hc := c.Config, c.HostConfig
	switch {
	case cfg.Image != image:
		t.Errorf("image %q, want %q", cfg.Image, image)
	case hc.Privileged || !hc.ReadonlyRootfs || len(hc.CapAdd) > 0 || len(hc.CapDrop) != 1 || hc.CapDrop[0] != "ALL":
		t.Errorf("privileged %v, read-only root %v, cap add %v, cap drop %v", hc.Privileged, hc.ReadonlyRootfs, hc.CapAdd, hc.CapDrop)
	case len(hc.Binds) > 0 || len(hc.Mounts) > 0 || len(c.Mounts) > 0:
		t.Errorf("mounts: binds %v, mounts %v, %v", hc.Binds, hc.Mounts, c.Mounts)
	case cfg.User != "65534:65534":
		t.Errorf("user %q", cfg.User)
	case hc.PidsLimit == nil || *hc.PidsLimit != pids || hc.Memory != memoryMB<<20 || hc.MemorySwap != hc.Memory:
		t.Errorf("limits: pids %v, memory %d, swap %d", hc.PidsLimit, hc.Memory, hc.MemorySwap)
	case string(hc.NetworkMode) != s.ServerNetwork() || len(c.NetworkSettings.Networks) != 1:
		t.Errorf("network mode %q, networks %v", hc.NetworkMode, c.NetworkSettings.Networks)
	}
	for _, e := range cfg.Env {
		requireNoSecret(t, "the server's environment", e, map[string]string{"launcher token": s.LauncherToken(), "remote token": s.RemoteToken()})
	}
}

// checkFlood has the server write 100 MB to stdout while built-in calls
// run: the line cap stops the run, the call ends with an error, the
// built-in calls are answered, and the server is back after the restart.
func checkFlood(t *testing.T, ctx context.Context, s *stack.Stack) {
	plan := probePlan{Workers: 3, TimeoutSec: 90, Calls: []probeCall{{Tool: "evil__attempt", Args: map[string]string{"what": mcpfixture.WhatStdoutFlood}}}}
	for range 20 {
		plan.Calls = append(plan.Calls, probeCall{Tool: "filesystem__list_allowed_directories", Args: map[string]string{}})
	}
	begin := time.Now()
	rep, err := confinedPlan(ctx, s, plan)
	if err != nil {
		t.Fatal(err)
	}
	flood := rep.Calls[0]
	t.Logf("flood call: %s, err %q, tool error %v: %s", time.Duration(flood.End-flood.Start).Round(time.Millisecond), flood.Err, flood.IsError, cutText(flood.Text, 200))
	if flood.Err == "" && !flood.IsError {
		t.Errorf("the flood call succeeded: %s", cutText(flood.Text, 200))
	}
	if strings.Contains(flood.Text+flood.Err, "AAAAAAAA") {
		t.Errorf("the flood reached the agent: %s", cutText(flood.Text+flood.Err, 200))
	}
	requireBuiltinsServed(t, "during the flood", rep, flood.Start, flood.End)
	evilCall(t, ctx, s, 90*time.Second)
	t.Logf("the evil server answered again %s after the flood began", time.Since(begin).Round(100*time.Millisecond))
	if !strings.Contains(s.GatewayLogs(ctx), "longer than the limit") {
		t.Error("the gateway did not log the line cap")
	}
}

// checkEvilEgress checks the egress_events rows of session server:evil and
// the aggregated auth failure of the attempt without an identity.
func checkEvilEgress(t *testing.T, ctx context.Context, s *stack.Stack) {
	type event struct {
		Kind, Host, Decision, Rule, Reason string
		Port                               int
	}
	var events []event
	want := []event{
		{Kind: "connect", Host: stack.HostBlocked, Port: 443, Decision: "deny", Rule: "servers.egress.allowed_hosts"},
		{Kind: "http", Host: stack.HostAllowed, Port: 80, Decision: "deny", Rule: "structural-secret-egress"},
		{Kind: "http", Host: stack.HostAllowed, Port: 80, Decision: "allow"},
	}
	deadline := time.Now().Add(30 * time.Second)
	for {
		events = nil
		if err := s.QueryJSON(ctx, `SELECT kind, host, port, decision, rule, reason FROM egress_events
			WHERE session_id = 'server:`+stack.EvilServer+`' ORDER BY seq`, &events); err != nil {
			t.Fatal(err)
		}
		missing := 0
		for _, w := range want {
			found := false
			for _, e := range events {
				found = found || (e.Kind == w.Kind && e.Host == w.Host && e.Port == w.Port && e.Decision == w.Decision && strings.HasPrefix(e.Rule, w.Rule))
			}
			if !found {
				missing++
				if time.Now().After(deadline) {
					t.Errorf("no egress_events row %+v of server:evil", w)
				}
			}
		}
		if missing == 0 || time.Now().After(deadline) {
			break
		}
		time.Sleep(time.Second)
	}
	for _, e := range events {
		t.Logf("egress_events server:evil: %+v", e)
	}
	reqs, err := s.InternetRequests(ctx)
	if err != nil {
		t.Fatal(err)
	}
	control := false
	for _, r := range reqs {
		switch {
		case r.Host == stack.HostBlocked:
			t.Errorf("the blocked host was reached: %+v", r)
		case r.Path == "/leak":
			t.Errorf("the URL with the secret was fetched: %+v", r)
		case r.Path == evilControlPath:
			control = true
		}
	}
	if !control {
		t.Error("control: the allowlisted URL never reached the internet")
	}
	// The attempt without an identity cannot name the server: the proxy
	// writes one auth-failures row per source address and minute.
	srvNet := serverNetPrefix(t, ctx, s)
	deadline = time.Now().Add(80 * time.Second)
	for {
		var rows []struct{ Reason string }
		if err := s.QueryJSON(ctx, `SELECT reason FROM egress_events WHERE kind = 'auth-failures' ORDER BY seq`, &rows); err != nil {
			t.Fatal(err)
		}
		for _, r := range rows {
			if addr := sourceOf(r.Reason); addr.IsValid() && srvNet.Contains(addr) {
				t.Logf("auth-failures row: %s", r.Reason)
				return
			}
		}
		if time.Now().After(deadline) {
			t.Errorf("no auth-failures row names an address of the server network %s: %+v", srvNet, rows)
			return
		}
		time.Sleep(2 * time.Second)
	}
}

// sourceOf reads the address after "from " in an auth-failures reason.
func sourceOf(reason string) netip.Addr {
	_, rest, ok := strings.Cut(reason, " from ")
	if !ok {
		return netip.Addr{}
	}
	f := strings.Fields(rest)
	if len(f) == 0 {
		return netip.Addr{}
	}
	if ap, err := netip.ParseAddrPort(f[0]); err == nil {
		return ap.Addr()
	}
	a, _ := netip.ParseAddr(f[0])
	return a
}
