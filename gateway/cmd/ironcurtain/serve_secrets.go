package main

import (
	"fmt"
	"log/slog"
	"net/url"
	"os"
	"strings"

	"ironcurtain.dev/gateway/config"
	"ironcurtain.dev/gateway/internal/llmprovider"
	"ironcurtain.dev/gateway/secretscan"
)

// setGatewaySecrets gives the secrets section the gateway's own secrets,
// matched exactly wherever something leaves (secretscan.KindExact): the
// agent and operator tokens, the GitHub and git tokens, the model API keys
// and the database password. Values are never logged; a value too short to
// match safely is named (by its label) in a warning.
func setGatewaySecrets(cfg *config.Config, getenv func(string) string, agentTokens map[string]string, log *slog.Logger) error {
	var list []secretscan.Secret
	add := func(label, v string) {
		if v = strings.TrimSpace(v); v != "" {
			list = append(list, secretscan.Secret{Label: label, Value: v})
		}
	}
	for _, name := range sortedKeys(agentTokens) {
		add("agent token "+name, agentTokens[name])
	}
	add("operator token", getenv(envOperatorToken))
	for _, name := range sortedKeys(cfg.Ops.OperatorTokenFiles) {
		if b, err := os.ReadFile(cfg.Ops.OperatorTokenFiles[name]); err == nil {
			add("operator token "+name, string(b))
		}
	}
	add("metrics token", getenv(envMetricsToken))
	for _, name := range sortedKeys(cfg.Ops.MetricsTokenFiles) {
		if b, err := os.ReadFile(cfg.Ops.MetricsTokenFiles[name]); err == nil {
			add("metrics token "+name, string(b))
		}
	}
	gh, err := cfg.GitHub.Token(getenv)
	if err != nil {
		return err
	}
	add("github token", gh)
	if cfg.Git.TokenFile != "" {
		b, err := os.ReadFile(cfg.Git.TokenFile)
		if err != nil {
			return fmt.Errorf("git.token_file: reading the token: %w", err)
		}
		add("git token", string(b))
	} else {
		add("git token", getenv(cfg.Git.TokenVariable()))
	}
	for _, p := range []struct {
		label, def string
		env        *string
	}{
		{"anthropic api key", llmprovider.DefaultAnthropicKeyEnv, cfg.Relay.Anthropic.APIKeyEnv},
		{"openai api key", llmprovider.DefaultOpenAIKeyEnv, cfg.Relay.OpenAI.APIKeyEnv},
	} {
		name := p.def
		if p.env != nil {
			name = *p.env
		}
		if name != "" {
			add(p.label, getenv(name))
		}
	}
	if dsn, err := databaseURL(cfg, getenv); err == nil {
		if u, err := url.Parse(dsn); err == nil && u.User != nil {
			if pw, ok := u.User.Password(); ok {
				add("database password", pw)
			}
		}
	}
	for _, label := range cfg.Secrets.SetExact(list) {
		log.Warn("secret scanning: a gateway secret is too short to match exactly (under 8 bytes); only the format detectors apply to it", "secret", label)
	}
	log.Info("secret scanning", "disabled", cfg.Secrets.Disabled, "exact_values", cfg.Secrets.ExactCount())
	return nil
}
