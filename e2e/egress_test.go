package e2e_test

import (
	"net"
	"net/netip"
	"net/url"
	"strconv"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"ironcurtain.dev/e2e/internal/stack"
)

// fetchTranscript fetches an allowlisted page with the gateway's fetch tool.
const fetchTranscript = `name: e2e-fetch
steps:
  - code: |
      return fetch.http_fetch({ url: "https://` + stack.HostAllowed + `/fetched", format: "text" });
  - expect: { status: ok, contains: ["hello from ` + stack.HostAllowed + `"] }
    final: Fetched.
`

// TestEgress: the agent container has no route to the internet container;
// through the gateway's proxy an allowlisted alias answers and an unlisted
// one gets 403; both are rows in egress_events.
func TestEgress(t *testing.T) {
	s := topology(t)
	ctx := ctxFor(t, 5*time.Minute)
	const session = "egress"

	t.Run("no direct route", func(t *testing.T) {
		targets := []string{
			s.InternetIP.String() + ":443", // the internet container's address
			s.InternetIP.String() + ":80",
			stack.HostAllowed + ":443", // its names do not even resolve on agent_net
			"1.1.1.1:443",              // the real internet
		}
		var got []struct {
			Addr      string `json:"addr"`
			Connected bool   `json:"connected"`
			Error     string `json:"error"`
		}
		if err := s.Probe(ctx, session, nil, &got, append([]string{"dial"}, targets...)...); err != nil {
			t.Fatal(err)
		}
		if len(got) != len(targets) {
			t.Fatalf("dial results = %+v", got)
		}
		for _, r := range got {
			if r.Connected {
				t.Errorf("the agent container connected directly to %s", r.Addr)
			} else {
				t.Logf("direct %s: refused (%s)", r.Addr, r.Error)
			}
		}
	})

	// The agent reaches the gateway's agent API and proxy, and nothing
	// else of the gateway or the database: not the ops API (approvals),
	// not Postgres.
	t.Run("only the agent port and the proxy", func(t *testing.T) {
		tests := []struct {
			addr string
			want bool
		}{
			{addr: "gateway:8080", want: true},
			{addr: "gateway:3128", want: true},
			{addr: "gateway:8081", want: false},
			{addr: "gateway-ops:8081", want: false},
			{addr: "postgres:5432", want: false},
		}
		addrs := make([]string, len(tests))
		for i, tt := range tests {
			addrs[i] = tt.addr
		}
		var got []struct {
			Addr      string `json:"addr"`
			Connected bool   `json:"connected"`
			Error     string `json:"error"`
		}
		if err := s.Probe(ctx, session, nil, &got, append([]string{"dial"}, addrs...)...); err != nil {
			t.Fatal(err)
		}
		for i, tt := range tests {
			if got[i].Connected != tt.want {
				t.Errorf("agent → %s connected = %v (%s), want %v", tt.addr, got[i].Connected, got[i].Error, tt.want)
			}
		}
	})

	// compose/docker-compose.yml gives agent_net's bridge no IPv4 address
	// on the host: through it the agent would reach every host service
	// listening on all addresses (here a listener of the test, and the ops
	// port the gateway publishes).
	t.Run("no host address on the agent network", func(t *testing.T) {
		b, err := s.AgentBridge(ctx)
		if err != nil {
			t.Fatal(err)
		}
		if !b.NoHostAddress {
			t.Errorf("the agent network was created without %s (as compose/docker-compose.yml sets it)", "com.docker.network.bridge.inhibit_ipv4")
		}
		if iface, err := net.InterfaceByName(b.Interface); err == nil {
			addrs, err := iface.Addrs()
			if err != nil {
				t.Fatal(err)
			}
			for _, a := range addrs {
				if p, err := netip.ParsePrefix(a.String()); err == nil && p.Addr().Is4() {
					t.Errorf("the agent network's bridge %s has the host address %s", b.Interface, p)
				}
			}
		} else {
			t.Logf("bridge %s not visible here (Docker runs elsewhere): %v", b.Interface, err)
		}
		ln, err := net.Listen("tcp4", "0.0.0.0:0")
		if err != nil {
			t.Fatal(err)
		}
		defer ln.Close()
		var accepted atomic.Int32
		go func() {
			for {
				c, err := ln.Accept()
				if err != nil {
					return
				}
				accepted.Add(1)
				c.Close()
			}
		}()
		opsURL, err := s.OpsURL(ctx)
		if err != nil {
			t.Fatal(err)
		}
		u, err := url.Parse(opsURL)
		if err != nil {
			t.Fatal(err)
		}
		lnPort := strconv.Itoa(ln.Addr().(*net.TCPAddr).Port)
		targets := []string{
			net.JoinHostPort(b.Gateway.String(), lnPort),   // a host service on 0.0.0.0
			net.JoinHostPort(b.Gateway.String(), u.Port()), // the gateway's published ops port
			net.JoinHostPort(b.Gateway.String(), "22"),     // sshd, if the host runs one
		}
		var got []struct {
			Addr      string `json:"addr"`
			Connected bool   `json:"connected"`
			Error     string `json:"error"`
		}
		if err := s.Probe(ctx, session, nil, &got, append([]string{"dial"}, targets...)...); err != nil {
			t.Fatal(err)
		}
		if len(got) != len(targets) {
			t.Fatalf("dial results = %+v", got)
		}
		for _, r := range got {
			if r.Connected {
				t.Errorf("the agent container reached the host at %s", r.Addr)
			} else {
				t.Logf("host %s: unreachable (%s)", r.Addr, r.Error)
			}
		}
		if n := accepted.Load(); n != 0 {
			t.Errorf("the test's host listener accepted %d connections from the agent network", n)
		}
	})

	type fetch struct {
		URL         string `json:"url"`
		ProxyStatus int    `json:"proxy_status"`
		ProxyBody   string `json:"proxy_body"`
		Status      int    `json:"status"`
		Body        string `json:"body"`
		Error       string `json:"error"`
	}
	tests := []struct {
		name      string
		url       string
		proxy     string // "" = the session's HTTPS_PROXY/HTTP_PROXY
		wantProxy int
		wantBody  string // destination answer, when reached
	}{
		{name: "https allowlisted", url: "https://" + stack.HostAllowed + "/hello", wantProxy: 200, wantBody: "hello from " + stack.HostAllowed},
		{name: "https unlisted", url: "https://" + stack.HostBlocked + "/hello", wantProxy: 403},
		{name: "http allowlisted", url: "http://" + stack.HostAllowed + "/plain", wantProxy: 200, wantBody: "hello from " + stack.HostAllowed},
		{name: "http unlisted", url: "http://" + stack.HostBlocked + "/plain", wantProxy: 403},
		{name: "unlisted by address", url: "https://" + s.InternetIP.String() + "/", wantProxy: 403},
		{name: "the model host is not the agent's to reach", url: "https://" + stack.HostModel + "/v1/messages", wantProxy: 403},
		{name: "wrong agent token", url: "https://" + stack.HostAllowed + "/", proxy: "http://egress:not-a-token@gateway:3128", wantProxy: 407},
		{name: "no agent token", url: "https://" + stack.HostAllowed + "/", proxy: "http://gateway:3128", wantProxy: 407},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			args := []string{"fetch", "-ca", stack.AgentCAPath}
			if tt.proxy != "" {
				args = append(args, "-proxy", tt.proxy)
			}
			var got fetch
			if err := s.Probe(ctx, session, nil, &got, append(args, tt.url)...); err != nil {
				t.Fatal(err)
			}
			if got.ProxyStatus != tt.wantProxy {
				t.Fatalf("proxy answered %d, want %d: %+v", got.ProxyStatus, tt.wantProxy, got)
			}
			if tt.wantBody != "" {
				if got.Status != 200 || !strings.Contains(got.Body, tt.wantBody) {
					t.Fatalf("destination answered %d %q, want 200 containing %q (%s)", got.Status, got.Body, tt.wantBody, got.Error)
				}
			} else if got.Status != 0 || got.Body != "" {
				t.Fatalf("a refused request reached the destination: %+v", got)
			}
			t.Logf("%s → proxy %d %q, destination %d", tt.url, got.ProxyStatus, got.ProxyBody, got.Status)
		})
	}

	t.Run("refused hosts never reached the internet", func(t *testing.T) {
		reqs, err := s.InternetRequests(ctx)
		if err != nil {
			t.Fatal(err)
		}
		seenAllowed := false
		for _, r := range reqs {
			switch r.Host {
			case stack.HostBlocked:
				t.Errorf("the internet container served %s: %+v", stack.HostBlocked, r)
			case stack.HostAllowed:
				seenAllowed = true
			}
		}
		if !seenAllowed {
			t.Errorf("the internet container never saw %s", stack.HostAllowed)
		}
	})

	// The gateway's own fetch tool goes through the same guard; its
	// requests are egress_events rows naming the tool call.
	t.Run("fetch tool", func(t *testing.T) {
		r, err := s.RunTranscript(ctx, session, "fetch", []byte(fetchTranscript), "fetch a page")
		if err != nil {
			t.Fatal(err)
		}
		if r.Code != 0 {
			t.Fatalf("fetch run: %s", r)
		}
	})

	t.Run("egress_events", func(t *testing.T) {
		type event struct {
			Kind       string `json:"kind"`
			Method     string `json:"method"`
			Host       string `json:"host"`
			Port       int    `json:"port"`
			ResolvedIP string `json:"resolved_ip"`
			Decision   string `json:"decision"`
			Reason     string `json:"reason"`
			Rule       string `json:"rule"`
			BytesDown  int64  `json:"bytes_down"`
		}
		want := []struct {
			kind, host, decision string
			port                 int
		}{
			{kind: "connect", host: stack.HostAllowed, port: 443, decision: "allow"},
			{kind: "connect", host: stack.HostBlocked, port: 443, decision: "deny"},
			{kind: "http", host: stack.HostAllowed, port: 80, decision: "allow"},
			{kind: "http", host: stack.HostBlocked, port: 80, decision: "deny"},
			{kind: "connect", host: stack.HostModel, port: 443, decision: "deny"},
			{kind: "fetch", host: stack.HostAllowed, port: 443, decision: "allow"},
		}
		var events []event
		deadline := time.Now().Add(30 * time.Second) // rows are written when a tunnel closes
		for {
			events = nil
			if err := s.QueryJSON(ctx, `SELECT kind, method, host, port, resolved_ip, decision, reason, rule, bytes_down
				FROM egress_events WHERE session_id = 'egress' ORDER BY seq`, &events); err != nil {
				t.Fatal(err)
			}
			missing := 0
			for _, w := range want {
				found := false
				for _, e := range events {
					if e.Kind == w.kind && e.Host == w.host && e.Port == w.port && e.Decision == w.decision {
						found = true
					}
				}
				if !found {
					missing++
					if time.Now().After(deadline) {
						t.Errorf("no egress_events row %s %s:%d %s; rows: %+v", w.kind, w.host, w.port, w.decision, events)
					}
				}
			}
			if missing == 0 || time.Now().After(deadline) {
				break
			}
			time.Sleep(500 * time.Millisecond)
		}
		for _, e := range events {
			if e.Decision == "allow" && (e.ResolvedIP != s.InternetIP.String() || e.BytesDown == 0) {
				t.Errorf("allowed event without the checked address or traffic: %+v (internet is %s)", e, s.InternetIP)
			}
			if e.Decision == "deny" && e.Reason == "" {
				t.Errorf("denied event without a reason: %+v", e)
			}
			t.Logf("egress_events: %+v", e)
		}
		var linked []struct {
			Host string `json:"host"`
			Tool string `json:"tool"`
		}
		if err := s.QueryJSON(ctx, `SELECT e.host, c.tool FROM egress_events e JOIN tool_calls c ON c.call_id = e.tool_call_id
			WHERE e.session_id = 'egress' AND e.kind = 'fetch'`, &linked); err != nil {
			t.Fatal(err)
		}
		if len(linked) != 1 || linked[0].Tool != "http_fetch" || linked[0].Host != stack.HostAllowed {
			t.Errorf("fetch egress events linked to their tool call: %+v, want one http_fetch of %s", linked, stack.HostAllowed)
		}
		verifyChain(t, ctx, s, session, int64(len(want)))
	})

	t.Run("doctor", func(t *testing.T) {
		r, err := s.ExecAgent(ctx, session, nil, "ironcurtain-agent", "doctor",
			"--direct", s.InternetIP.String()+":443,1.1.1.1:443",
			"--unlisted-host", stack.HostBlocked+":443",
			"--allowed-host", stack.HostAllowed+":443")
		if err != nil {
			t.Fatal(err)
		}
		t.Logf("ironcurtain-agent doctor:\n%s%s", r.Stdout, r.Stderr)
		if r.Code != 0 {
			t.Fatalf("doctor failed inside the agent container: %s", r)
		}
	})
}
