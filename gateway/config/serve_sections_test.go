package config

import (
	"strings"
	"testing"
	"time"
)

func TestServeSectionsValidate(t *testing.T) {
	tests := []struct {
		name    string
		v       Validator
		wantErr string // substring naming the field; "" = valid
	}{
		{name: "agent defaults", v: &AgentConfig{}},
		{name: "agent ok", v: &AgentConfig{Listen: "127.0.0.1:8080", TokenFiles: map[string]string{"ci": "/run/secrets/ci"}}},
		{name: "agent listen without port", v: &AgentConfig{Listen: "8080"}, wantErr: "listen"},
		{name: "agent empty token file", v: &AgentConfig{TokenFiles: map[string]string{"ci": ""}}, wantErr: "token_files.ci"},
		{name: "agent empty session name", v: &AgentConfig{TokenFiles: map[string]string{" ": "/x"}}, wantErr: "token_files"},
		{name: "agent limits ok", v: &AgentConfig{Limits: ListenerLimits{MaxConnections: 100, MaxConnectionsPerClient: 10, IdleTimeout: time.Minute}, StreamMaxDuration: time.Hour}},
		{name: "agent per-client above cap", v: &AgentConfig{Limits: ListenerLimits{MaxConnections: 10, MaxConnectionsPerClient: 11}}, wantErr: "max_connections_per_client"},
		{name: "agent negative cap", v: &AgentConfig{Limits: ListenerLimits{MaxConnections: -1}}, wantErr: "max_connections"},
		{name: "agent idle timeout too short", v: &AgentConfig{Limits: ListenerLimits{IdleTimeout: time.Millisecond}}, wantErr: "idle_timeout"},
		{name: "agent stream too short", v: &AgentConfig{StreamMaxDuration: time.Second}, wantErr: "stream_max_duration"},
		{name: "ops per-client above cap", v: &OpsConfig{Limits: ListenerLimits{MaxConnections: 5, MaxConnectionsPerClient: 6}}, wantErr: "max_connections_per_client"},
		{name: "git defaults", v: &GitConfig{}},
		{name: "git ok", v: &GitConfig{MirrorDir: "/var/lib/ic/git", TokenFile: "/run/secrets/t", Timeout: time.Second}},
		{name: "git relative mirror", v: &GitConfig{MirrorDir: "mirror"}, wantErr: "mirror_dir"},
		{name: "git relative key", v: &GitConfig{SSHKeyFile: "id_ed25519"}, wantErr: "ssh_key_file"},
		{name: "git negative timeout", v: &GitConfig{NetworkTimeout: -time.Second}, wantErr: "network_timeout"},
		{name: "git bad token env", v: &GitConfig{TokenEnv: "GITHUB TOKEN"}, wantErr: "token_env"},
		{name: "database defaults", v: &DatabaseConfig{}},
		{name: "database bad env", v: &DatabaseConfig{URLEnv: "1DB"}, wantErr: "url_env"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			mustValidate(t, tt.v, tt.wantErr)
		})
	}
	if (&AgentConfig{}).ListenAddr() != DefaultAgentListen || (&GitConfig{}).MirrorPath() != DefaultGitMirrorDir ||
		(&DatabaseConfig{}).URLVariable() != DefaultDatabaseURLEnv || (&GitConfig{}).TokenVariable() != DefaultGitTokenEnv {
		t.Fatal("defaults")
	}
}

func TestParseServeSectionsNamesBadField(t *testing.T) {
	_, err := Parse("gateway.yaml", withFetch("agent:\n  listen: nope\ngit:\n  mirror_dir: rel\n"))
	if err == nil {
		t.Fatal("Parse accepted a bad agent.listen")
	}
	for _, want := range []string{"gateway.yaml", "agent.listen", "git.mirror_dir"} {
		if !strings.Contains(err.Error(), want) {
			t.Errorf("error %q does not name %s", err, want)
		}
	}
}

func TestListenerLimitsFromYAML(t *testing.T) {
	c, err := Parse("gateway.yaml", withFetch("agent:\n  max_connections: 100\n  idle_timeout: 5s\nops:\n  max_connections_per_client: 3\n"))
	if err != nil {
		t.Fatal(err)
	}
	a, o := c.Agent.AgentLimits(), c.Ops.OpsLimits()
	if a.MaxConnections != 100 || a.MaxConnectionsPerClient != 100 || a.IdleTimeout != 5*time.Second {
		t.Errorf("agent limits %+v", a)
	}
	if o.MaxConnections != DefaultOpsMaxConnections || o.MaxConnectionsPerClient != 3 || o.IdleTimeout != DefaultListenerIdleTimeout {
		t.Errorf("ops limits %+v", o)
	}
	if _, err := Parse("gateway.yaml", withFetch("agent:\n  max_connections: 10\n  max_connections_per_client: 20\n")); err == nil || !strings.Contains(err.Error(), "agent.max_connections_per_client") {
		t.Errorf("Parse = %v, want an error naming agent.max_connections_per_client", err)
	}
}

func TestUnsafeSettings(t *testing.T) {
	c, err := Parse("gateway.yaml", withFetch("egress:\n  unsafe_skip_sni_check: true\n  unsafe_allow_addresses: [10.0.0.0/8]\n"))
	if err != nil {
		t.Fatal(err)
	}
	got := strings.Join(c.UnsafeSettings(), ",")
	if got != "egress.unsafe_allow_addresses,egress.unsafe_skip_sni_check" {
		t.Errorf("UnsafeSettings = %q", got)
	}
	c, err = Parse("gateway.yaml", withFetch("egress:\n  unsafe_skip_sni_check: false\n"))
	if err != nil {
		t.Fatal(err)
	}
	if u := c.UnsafeSettings(); len(u) != 0 {
		t.Errorf("UnsafeSettings = %q, want none", u)
	}
}
