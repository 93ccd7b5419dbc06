package e2e_test

import (
	"encoding/json"
	"slices"
	"strings"
	"testing"
	"time"

	"ironcurtain.dev/e2e/internal/stack"
)

// TestConfinedURLServer reaches a streamable-HTTP MCP server on the fake
// internet in url: mode (issue 26): its tools are listed and callable
// through the gateway, which sends the bearer token from its secret file;
// the token never reaches the agent (tool results, errors) nor any audit
// row or gateway log line, and every request is an egress event.
func TestConfinedURLServer(t *testing.T) {
	s := confinedTopology(t)
	ctx := ctxFor(t, 3*time.Minute)
	secrets := confinedSecrets(s)
	tools := waitForTools(t, ctx, s, "remote__echo", "remote__fail")
	t.Logf("tools: %v", tools)

	rep, err := confinedPlan(ctx, s, probePlan{ListTools: true, Calls: []probeCall{
		{Tool: "remote__echo", Args: map[string]string{"text": "hello through url mode"}},
		{Tool: "remote__fail", Args: map[string]string{}},
	}})
	if err != nil {
		t.Fatal(err)
	}
	echo, fail := rep.Calls[0], rep.Calls[1]
	if echo.Err != "" || echo.IsError || echo.Text != "remote echo: hello through url mode" {
		t.Errorf("remote__echo: err %q, tool error %v: %q", echo.Err, echo.IsError, echo.Text)
	}
	if fail.Err == "" && !fail.IsError {
		t.Errorf("remote__fail succeeded: %q", fail.Text)
	}
	t.Logf("remote__fail: err %q, tool error %v: %q", fail.Err, fail.IsError, fail.Text)
	out, _ := json.Marshal(rep)
	requireNoSecret(t, "what the agent got", string(out), secrets)

	reqs, err := s.InternetRequests(ctx)
	if err != nil {
		t.Fatal(err)
	}
	authorised := 0
	for _, r := range reqs {
		if r.Host != stack.HostMCP {
			continue
		}
		if r.Note == "mcp: authorised" {
			authorised++
		} else {
			t.Errorf("a request to the remote server was not authorised: %+v", r)
		}
	}
	if authorised == 0 {
		t.Error("no authorised request reached the remote server")
	}

	var events []struct {
		Kind, Host, Decision, Rule string
	}
	if err := s.QueryJSON(ctx, `SELECT kind, host, decision, rule FROM egress_events WHERE kind = 'mcp-url' ORDER BY seq`, &events); err != nil {
		t.Fatal(err)
	}
	if !slices.ContainsFunc(events, func(e struct{ Kind, Host, Decision, Rule string }) bool {
		return e.Host == stack.HostMCP && e.Decision == "allow" && strings.Contains(e.Rule, "servers."+stack.RemoteServer+".url")
	}) {
		t.Errorf("no allowed mcp-url egress event for %s: %+v", stack.HostMCP, events)
	}
	t.Logf("%d mcp-url egress events (the remote server has %d authorised requests)", len(events), authorised)

	for _, l := range auditLeaks(t, ctx, s, secrets) {
		t.Errorf("audit rows hold a secret: %s", l)
	}
	requireNoSecret(t, "the gateway logs", s.GatewayLogs(ctx), secrets)
	requireNoSecret(t, "the internet logs", s.InternetLogs(ctx), secrets)
}
