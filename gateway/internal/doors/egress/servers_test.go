package egress

import (
	"encoding/base64"
	"net/http"
	"strings"
	"testing"

	"ironcurtain.dev/gateway/internal/netguard/netguardtest"
	"ironcurtain.dev/gateway/netpolicy"
)

const tokenNotes = "notes-proxy-identity-0123456789abcdef0123456789"

func serverAuth(name, token string) string {
	return "Basic " + base64.StdEncoding.EncodeToString([]byte(name+":"+token))
}

// TestServerIdentity: an image server's egress is decided on its own
// allowlist and recorded under its name; neither the deployment
// allowlist, escalation nor the agent's sessions widen it, and its
// allowlist does not widen the agent's.
func TestServerIdentity(t *testing.T) {
	_, port, _ := tlsUpstream(t)
	esc := &fakeEscalator{approve: true}
	tp := startProxy(t, port, withConfig(func(c *ProxyConfig) {
		c.Servers = []ServerIdentity{{Name: "notes", Token: tokenNotes, Allow: netpolicy.MustParsePatterns("api.notes.test")}}
		c.Resolver = netguardtest.NewResolver().Set("example.com", "127.0.0.1").Set("api.notes.test", "127.0.0.1").Set("a.allowed.test", "127.0.0.1")
		c.EscalateUnknownHosts = true
		c.UnsafeSkipSNICheck = true
	}), withDeps(func(d *Deps) { d.Escalator = esc }))
	tests := []struct {
		name, target, auth string
		status             int
		session, rule      string
	}{
		{"server to its host", "api.notes.test", serverAuth("notes", tokenNotes), http.StatusOK, "server:notes", "servers.egress.allowed_hosts[api.notes.test]"},
		{"server to a deployment host", "example.com", serverAuth("notes", tokenNotes), http.StatusForbidden, "server:notes", "servers.egress.allowed_hosts"},
		{"server to an unknown host is not escalated", "other.test", serverAuth("notes", tokenNotes), http.StatusForbidden, "server:notes", "servers.egress.allowed_hosts"},
		{"server without identity", "api.notes.test", "", http.StatusProxyAuthRequired, "", ruleAuth},
		{"server with a wrong identity", "api.notes.test", serverAuth("notes", tokenNotes+"x"), http.StatusProxyAuthRequired, "", ruleAuth},
		{"agent cannot use the server's allowlist", "api.notes.test", basicAuth(tokenS1), http.StatusOK, "s1", "escalation "},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			n := tp.sink.count()
			c, resp := rawConnect(t, tp.addr, hostPort(tt.target, port), tt.auth)
			c.Close()
			if resp.StatusCode != tt.status {
				t.Fatalf("status = %d, want %d", resp.StatusCode, tt.status)
			}
			if tt.session == "" {
				return // unauthenticated refusals are summarised per minute
			}
			ev := tp.sink.wait(t, n+1)
			if ev.SessionID != tt.session || !strings.HasPrefix(ev.Rule, tt.rule) {
				t.Fatalf("event session %q rule %q, want %q %q", ev.SessionID, ev.Rule, tt.session, tt.rule)
			}
		})
	}
	esc.mu.Lock()
	defer esc.mu.Unlock()
	for _, r := range esc.requests {
		if strings.HasPrefix(r.SessionID, ServerSessionPrefix) {
			t.Errorf("a server's request was escalated: %+v", r)
		}
	}
}

func TestServerIdentityConfig(t *testing.T) {
	tests := []struct {
		name string
		ids  []ServerIdentity
	}{
		{"short token", []ServerIdentity{{Name: "a", Token: "short"}}},
		{"no name", []ServerIdentity{{Token: tokenNotes}}},
		{"duplicate name", []ServerIdentity{{Name: "a", Token: tokenNotes}, {Name: "a", Token: tokenNotes + "2"}}},
		{"shared token", []ServerIdentity{{Name: "a", Token: tokenNotes}, {Name: "b", Token: tokenNotes}}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			if _, err := newServerIdentities(tt.ids); err == nil {
				t.Fatal("accepted")
			}
		})
	}
}
