package config

import (
	"errors"
	"fmt"
	"sort"
	"strings"

	"ironcurtain.dev/gateway/policy"
	"ironcurtain.dev/gateway/secretscan"
)

// Defaults of the secrets section.
const (
	DefaultSecretsMaxProxyBodyBytes = 1 << 20  // 1 MiB of a plain-HTTP request body
	DefaultSecretsMaxPushBytes      = 64 << 20 // 64 MiB of commit messages and added blobs
	maxSecretsScanBytes             = 1 << 30
)

// Secret actions (secrets.actions values and secrets.default_action).
const (
	SecretActionEscalate = "escalate"
	SecretActionDeny     = "deny"
	SecretActionOff      = "off"
)

// SecretsConfig is the secrets section of gateway.yaml: outbound secret
// scanning on every egress path (docs/egress.md, "Secret scanning"). A
// finding is the structural decision structural-secret-egress: escalate by
// default, deny by setting, per detector. The gateway's own secrets (its
// GitHub and git tokens, the model API keys, the agent tokens) are matched
// exactly in addition; they are never written here.
//
//	secrets:
//	  disabled: false
//	  default_action: escalate          # or deny: every detector without an entry in actions
//	  actions:                          # per detector: escalate, deny or off
//	    private-key: deny
//	    high-entropy-value: escalate    # off unless listed (measure its false positives first)
//	  text_servers: [github]            # servers every string argument of whose tools is scanned
//	  max_proxy_body_bytes: 1048576     # plain-HTTP request body scanned by the egress proxy
//	  max_push_bytes: 67108864          # commit messages and added blobs scanned per push
type SecretsConfig struct {
	// Disabled turns scanning off on every path (not recommended).
	Disabled bool `yaml:"disabled"`
	// DefaultAction applies to every detector that Actions does not name
	// (except high-entropy-value, which is off unless named): escalate
	// (default) or deny.
	DefaultAction string `yaml:"default_action"`
	// Actions maps a detector (secretscan kind) to escalate, deny or off.
	Actions map[string]string `yaml:"actions"`
	// TextServers are the servers every string argument of whose tools is
	// scanned. Absent: [github]. GitHub tools (a github-owner or
	// github-repo argument) and email-body arguments are scanned on every
	// server; URL-role arguments always.
	TextServers []string `yaml:"text_servers"`
	// MaxProxyBodyBytes is how much of a plain-HTTP request body the
	// egress proxy scans (default 1 MiB).
	MaxProxyBodyBytes int64 `yaml:"max_proxy_body_bytes"`
	// MaxPushBytes is how much of a push (commit messages and the blobs it
	// adds) is scanned (default 64 MiB).
	MaxPushBytes int64 `yaml:"max_push_bytes"`

	// exact are the gateway's own secrets, set at serve time (SetExact).
	exact []secretscan.Secret
	// pushInspector scans git tool pushes, bound at serve time
	// (SetPushInspector).
	pushInspector policy.PushInspector
}

// SetPushInspector gives the policy the scanner of git tool pushes (the git
// server, through a late binding: the server is built after the policy).
func (s *SecretsConfig) SetPushInspector(i policy.PushInspector) { s.pushInspector = i }

// Validate implements Validator; field names are relative to "secrets".
func (s *SecretsConfig) Validate() error {
	var errs []error
	switch s.DefaultAction {
	case "", SecretActionEscalate, SecretActionDeny:
	default:
		errs = append(errs, Errorf("default_action", "%q: must be escalate or deny", s.DefaultAction))
	}
	known := map[string]bool{}
	for _, k := range secretscan.AllKinds() {
		known[string(k)] = true
	}
	for _, k := range sortedKeys(s.Actions) {
		field := "actions." + k
		if !known[k] {
			errs = append(errs, Errorf(field, "unknown detector (known: %s)", kindList()))
			continue
		}
		switch s.Actions[k] {
		case SecretActionEscalate, SecretActionDeny, SecretActionOff:
		default:
			errs = append(errs, Errorf(field, "%q: must be escalate, deny or off", s.Actions[k]))
		}
	}
	for i, srv := range s.TextServers {
		if srv == "" || strings.Contains(srv, "__") {
			errs = append(errs, Errorf(indexField("text_servers", i), "%q: a server name (non-empty, no \"__\")", srv))
		}
	}
	if s.MaxProxyBodyBytes < 0 || s.MaxProxyBodyBytes > maxSecretsScanBytes {
		errs = append(errs, Errorf("max_proxy_body_bytes", "must be between 1 and %d (0: default %d)", maxSecretsScanBytes, DefaultSecretsMaxProxyBodyBytes))
	}
	if s.MaxPushBytes < 0 || s.MaxPushBytes > maxSecretsScanBytes {
		errs = append(errs, Errorf("max_push_bytes", "must be between 1 and %d (0: default %d)", maxSecretsScanBytes, DefaultSecretsMaxPushBytes))
	}
	return errors.Join(errs...)
}

func kindList() string {
	ks := secretscan.AllKinds()
	out := make([]string, len(ks))
	for i, k := range ks {
		out[i] = string(k)
	}
	return strings.Join(out, ", ")
}

// SetExact gives the gateway's own secrets (tokens and keys read at serve
// time), matched literally wherever something leaves. Values shorter than
// 8 bytes cannot be matched without matching ordinary text; their labels
// are returned so that serve can warn. The values are never logged.
func (s *SecretsConfig) SetExact(secrets []secretscan.Secret) (tooShort []string) {
	s.exact = s.exact[:0]
	seen := map[string]bool{}
	for _, x := range secrets {
		if x.Value == "" || seen[x.Value] {
			continue
		}
		if len(x.Value) < 8 {
			tooShort = append(tooShort, x.Label)
			continue
		}
		seen[x.Value] = true
		s.exact = append(s.exact, x)
	}
	return tooShort
}

// ExactCount returns how many exact values are set (for the startup log).
func (s *SecretsConfig) ExactCount() int { return len(s.exact) }

// Scan returns the policy setting: the detectors that are on, those that
// deny, the text servers and the exact values.
func (s *SecretsConfig) Scan() policy.SecretScan {
	out := policy.SecretScan{Disabled: s.Disabled, TextServers: append([]string(nil), s.TextServers...)}
	if s.TextServers == nil {
		out.TextServers = nil
	}
	def := s.DefaultAction
	if def == "" {
		def = SecretActionEscalate
	}
	kinds := []secretscan.Kind{}
	for _, k := range secretscan.AllKinds() {
		action, named := s.Actions[string(k)]
		if !named {
			action = def
			if k == secretscan.KindHighEntropy {
				action = SecretActionOff
			}
		}
		if action == SecretActionOff {
			continue
		}
		kinds = append(kinds, k)
		if action == SecretActionDeny {
			out.Deny = append(out.Deny, k)
		}
	}
	sort.Slice(out.Deny, func(i, j int) bool { return out.Deny[i] < out.Deny[j] })
	out.Kinds = kinds
	out.Exact = append([]secretscan.Secret(nil), s.exact...)
	out.PushInspector = s.pushInspector
	return out
}

// ProxyBodyLimit returns max_proxy_body_bytes or its default.
func (s *SecretsConfig) ProxyBodyLimit() int64 {
	if s.MaxProxyBodyBytes > 0 {
		return s.MaxProxyBodyBytes
	}
	return DefaultSecretsMaxProxyBodyBytes
}

// PushLimit returns max_push_bytes or its default.
func (s *SecretsConfig) PushLimit() int64 {
	if s.MaxPushBytes > 0 {
		return s.MaxPushBytes
	}
	return DefaultSecretsMaxPushBytes
}

// SecretScanner compiles the setting (the policy engine holds the same:
// Engine.SecretScanner). The section is validated, so an error here is a
// bug; it is returned wrapped.
func (c *Config) SecretScanner() (*policy.SecretScanner, error) {
	sc, err := policy.NewSecretScanner(c.Secrets.Scan())
	if err != nil {
		return nil, fmt.Errorf("secrets: %w", err)
	}
	return sc, nil
}
