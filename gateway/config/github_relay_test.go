package config

import (
	"strings"
	"testing"
	"time"
)

// TestGitHubRelayValidate: the relay's settings are bounded and its hosts
// are plain lower-case names.
func TestGitHubRelayValidate(t *testing.T) {
	for _, tc := range []struct {
		name  string
		relay GitHubRelayConfig
		want  string // "" valid, else a fragment of the error
	}{
		{name: "zero", relay: GitHubRelayConfig{}},
		{name: "set", relay: GitHubRelayConfig{MaxBodyBytes: 1 << 20, Timeout: time.Minute, Hosts: []string{"api.github.localhost"}}},
		{name: "negative body", relay: GitHubRelayConfig{MaxBodyBytes: -1}, want: "relay.max_body_bytes"},
		{name: "huge body", relay: GitHubRelayConfig{MaxBodyBytes: 65<<20 + 1}, want: "relay.max_body_bytes"},
		{name: "long timeout", relay: GitHubRelayConfig{Timeout: time.Hour}, want: "relay.timeout"},
		{name: "host with port", relay: GitHubRelayConfig{Hosts: []string{"api.github.com:443"}}, want: "relay.hosts"},
		{name: "upper-case host", relay: GitHubRelayConfig{Hosts: []string{"API.github.com"}}, want: "relay.hosts"},
		{name: "empty host", relay: GitHubRelayConfig{Hosts: []string{""}}, want: "relay.hosts"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			g := GitHubConfig{Relay: tc.relay}
			err := g.Validate()
			if tc.want == "" {
				if err != nil {
					t.Fatalf("unexpected error: %v", err)
				}
				return
			}
			if err == nil || !strings.Contains(err.Error(), tc.want) {
				t.Fatalf("error %v, want one naming %s", err, tc.want)
			}
		})
	}
}
