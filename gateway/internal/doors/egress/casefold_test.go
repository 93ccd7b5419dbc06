package egress

import (
	"net"
	"net/http"
	"strconv"
	"strings"
	"testing"

	"ironcurtain.dev/gateway/internal/netguard/netguardtest"
	"ironcurtain.dev/gateway/policy"
	"ironcurtain.dev/gateway/secretscan"
)

// A host name is case-insensitive, so the proxy lower-cases it; a scan of
// the lower-cased name missed the case-sensitive formats spelled into its
// labels (an AWS key id is upper case), and the lookup of the allowed name
// then carried the key to a DNS server. The scan must see the name as it
// arrived, and in the case that a format needs, and refuse before any
// lookup. The logging resolver proves no lookup happened.
func TestProxySecretsHostCaseBeforeResolve(t *testing.T) {
	port := echoUpstream(t)
	lowerKey := strings.ToLower(testAWSKey)
	exact := policy.SecretScan{Exact: []secretscan.Secret{{Label: "github token", Value: "GW0F3A9C1B7E5D42A8"}}}
	plain := func(urlHost, hostHeader string) string {
		return "GET http://" + urlHost + "/ HTTP/1.1\r\nHost: " + hostHeader + "\r\nProxy-Authorization: " + basicAuth(tokenS1) + "\r\n\r\n"
	}
	tests := []struct {
		name      string
		scan      policy.SecretScan
		connect   string // CONNECT target host
		req       string // or a plain-HTTP request
		wantWhere string
	}{
		{name: "CONNECT: upper-case key id under a listed domain", connect: testAWSKey + ".allowed.test",
			wantWhere: "aws-access-key-id in host name"},
		{name: "CONNECT: key id written in lower case by the agent", connect: lowerKey + ".allowed.test",
			wantWhere: "aws-access-key-id in host name"},
		{name: "CONNECT: key id in mixed case with a trailing dot", connect: "AkIa" + testAWSKey[4:] + ".Allowed.TEST.",
			wantWhere: "aws-access-key-id in host name"},
		{name: "CONNECT: a gateway secret in another case", scan: exact, connect: "x-gw0f3a9c1b7e5d42a8.allowed.test",
			wantWhere: "gateway-secret in host name"},
		{name: "plain HTTP: upper-case key id in the URL's host", req: plain(testAWSKey+".allowed.test:"+strconv.Itoa(port), lowerKey+".allowed.test:"+strconv.Itoa(port)),
			wantWhere: "aws-access-key-id in host name"},
		{name: "plain HTTP: upper-case key id only in the Host header", req: plain(lowerKey+".allowed.test:"+strconv.Itoa(port), testAWSKey+".allowed.test:"+strconv.Itoa(port)),
			wantWhere: "aws-access-key-id in host name"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			res := netguardtest.NewResolver().Set(lowerKey+".allowed.test", "127.0.0.1").Set("x-gw0f3a9c1b7e5d42a8.allowed.test", "127.0.0.1")
			esc := &fakeEscalator{approve: false}
			tp := startProxy(t, port,
				withConfig(func(c *ProxyConfig) { noSNI(c); c.Resolver = res }),
				withDeps(func(d *Deps) { d.Escalator = esc; d.Secrets = newScanner(t, tt.scan) }))
			var resp *http.Response
			if tt.connect != "" {
				var c net.Conn
				c, resp = rawConnect(t, tp.addr, hostPort(tt.connect, port), basicAuth(tokenS1))
				defer c.Close()
			} else {
				c, err := net.Dial("tcp", tp.addr)
				if err != nil {
					t.Fatal(err)
				}
				defer c.Close()
				resp = rawRoundTrip(t, c, tt.req, http.MethodGet)
			}
			text := body(t, resp)
			if resp.StatusCode != http.StatusForbidden {
				t.Fatalf("status %d (%q); want 403", resp.StatusCode, text)
			}
			ev := tp.sink.wait(t, 1)
			if ev.Rule != policy.RuleSecretEgress || !strings.Contains(ev.Reason, tt.wantWhere) {
				t.Fatalf("recorded %q / %q; want %q naming %q", ev.Rule, ev.Reason, policy.RuleSecretEgress, tt.wantWhere)
			}
			if n := res.Total(); n != 0 {
				t.Fatalf("%d DNS lookups before the refusal (%v): the label left the gateway", n, res.Lookups())
			}
			// The audit record and the operator never see the labels (the
			// agent's own answer may name the host it asked for).
			if len(esc.requests) != 1 {
				t.Fatalf("%d escalations; want 1", len(esc.requests))
			}
			seen := strings.ToLower(ev.Reason + ev.Host + esc.requests[0].Reason + string(esc.requests[0].Args))
			for _, leak := range []string{lowerKey, "gw0f3a9c1b7e5d42a8"} {
				if strings.Contains(seen, leak) {
					t.Fatalf("the record or the escalation carries the labels: %+v / %+v", ev, esc.requests[0])
				}
			}
		})
	}
}
