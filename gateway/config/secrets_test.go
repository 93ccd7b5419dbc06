package config

import (
	"reflect"
	"strings"
	"testing"

	"ironcurtain.dev/gateway/secretscan"
)

func TestSecretsSection(t *testing.T) {
	tests := []struct {
		name    string
		yaml    string
		wantErr []string
		check   func(t *testing.T, c *Config)
	}{
		{
			name: "absent: default detectors escalate, high entropy off",
			yaml: "{}",
			check: func(t *testing.T, c *Config) {
				s := c.Secrets.Scan()
				if s.Disabled || len(s.Deny) != 0 || s.TextServers != nil {
					t.Fatalf("scan = %+v", s)
				}
				if !reflect.DeepEqual(s.Kinds, secretscan.DefaultKinds()) {
					t.Fatalf("kinds = %v, want %v", s.Kinds, secretscan.DefaultKinds())
				}
				if c.Secrets.ProxyBodyLimit() != DefaultSecretsMaxProxyBodyBytes || c.Secrets.PushLimit() != DefaultSecretsMaxPushBytes {
					t.Fatalf("limits = %d %d", c.Secrets.ProxyBodyLimit(), c.Secrets.PushLimit())
				}
				if _, err := c.SecretScanner(); err != nil {
					t.Fatal(err)
				}
				if got := c.PolicySettings().Secrets; !reflect.DeepEqual(got.Kinds, s.Kinds) {
					t.Fatalf("policy settings kinds = %v", got.Kinds)
				}
			},
		},
		{
			name: "per detector actions",
			yaml: `
secrets:
  default_action: deny
  actions:
    json-web-token: escalate
    url-password: "off"
    high-entropy-value: escalate
  text_servers: [github, slack]
  max_proxy_body_bytes: 4096
  max_push_bytes: 1048576
`,
			check: func(t *testing.T, c *Config) {
				s := c.Secrets.Scan()
				has := func(ks []secretscan.Kind, k secretscan.Kind) bool {
					for _, x := range ks {
						if x == k {
							return true
						}
					}
					return false
				}
				if has(s.Kinds, secretscan.KindURLPassword) || !has(s.Kinds, secretscan.KindHighEntropy) || !has(s.Kinds, secretscan.KindJWT) {
					t.Fatalf("kinds = %v", s.Kinds)
				}
				if has(s.Deny, secretscan.KindJWT) || has(s.Deny, secretscan.KindHighEntropy) || !has(s.Deny, secretscan.KindAWSKeyID) || !has(s.Deny, secretscan.KindExact) {
					t.Fatalf("deny = %v", s.Deny)
				}
				if !reflect.DeepEqual(s.TextServers, []string{"github", "slack"}) {
					t.Fatalf("text servers = %v", s.TextServers)
				}
				if c.Secrets.ProxyBodyLimit() != 4096 || c.Secrets.PushLimit() != 1<<20 {
					t.Fatalf("limits = %d %d", c.Secrets.ProxyBodyLimit(), c.Secrets.PushLimit())
				}
			},
		},
		{
			name: "disabled",
			yaml: "secrets: {disabled: true}",
			check: func(t *testing.T, c *Config) {
				sc, err := c.SecretScanner()
				if err != nil {
					t.Fatal(err)
				}
				if sc.Detector() != nil {
					t.Fatal("a disabled setting still has a detector")
				}
			},
		},
		{
			name: "bad values name their field",
			yaml: `
secrets:
  default_action: allow
  actions:
    aws-key: deny
    private-key: allow
  text_servers: ["", "a__b"]
  max_proxy_body_bytes: -1
  max_push_bytes: 2147483648
`,
			wantErr: []string{
				`secrets.default_action: "allow": must be escalate or deny`,
				`secrets.actions.aws-key: unknown detector`,
				`secrets.actions.private-key: "allow": must be escalate, deny or off`,
				`secrets.text_servers[0]`, `secrets.text_servers[1]`,
				`secrets.max_proxy_body_bytes: must be between`,
				`secrets.max_push_bytes: must be between`,
			},
		},
		{
			name:    "unknown key",
			yaml:    "secrets: {block: true}",
			wantErr: []string{"secrets.block: unknown key"},
		},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			c := mustParse(t, "gateway.yaml", withFetch(tt.yaml), tt.wantErr)
			if c == nil {
				return
			}
			tt.check(t, c)
		})
	}
}

// The gateway's own secrets are matched exactly, never marshalled into the
// policy version, and values too short to match are reported by label.
func TestSecretsExact(t *testing.T) {
	c, err := Parse("gateway.yaml", withFetch("{}"))
	if err != nil {
		t.Fatal(err)
	}
	short := c.Secrets.SetExact([]secretscan.Secret{
		{Label: "agent token agent", Value: "agent-token-0123456789"},
		{Label: "github token", Value: "short"},
		{Label: "dup", Value: "agent-token-0123456789"},
		{Label: "empty", Value: ""},
	})
	if !reflect.DeepEqual(short, []string{"github token"}) {
		t.Fatalf("too short = %v", short)
	}
	if c.Secrets.ExactCount() != 1 {
		t.Fatalf("exact count = %d", c.Secrets.ExactCount())
	}
	sc, err := c.SecretScanner()
	if err != nil {
		t.Fatal(err)
	}
	hits := sc.Detector().ScanURL("https://example.com/?q=agent-token-0123456789")
	if len(hits) != 1 || hits[0].Kind != secretscan.KindExact || strings.Contains(hits[0].Excerpt, "0123") {
		t.Fatalf("hits = %+v", hits)
	}
}
