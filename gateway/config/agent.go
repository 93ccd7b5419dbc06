package config

import (
	"net"
	"strings"
	"time"
)

// DefaultAgentListen is the agent-facing API's listen address (/mcp, /llm/).
const DefaultAgentListen = ":8080"

// AgentConfig is the agent section of gateway.yaml: the agent-facing API and
// the sessions allowed to use it. Agent tokens are secrets: they come from
// the environment (IRONCURTAIN_AGENT_TOKEN, session "agent") or from files
// named here (one token per session), never from this file itself.
//
//	agent:
//	  listen: ":8080"
//	  token_files:
//	    ci-bot: /run/secrets/agent-ci-bot
type AgentConfig struct {
	Listen     string            `yaml:"listen"`
	TokenFiles map[string]string `yaml:"token_files"`
	// Limits bound connections (listener.go).
	Limits ListenerLimits `yaml:",inline"`
	// StreamMaxDuration bounds one MCP event stream (GET /mcp); default 1h.
	StreamMaxDuration time.Duration `yaml:"stream_max_duration"`
}

// ListenAddr returns Listen or the default.
func (a *AgentConfig) ListenAddr() string {
	if a.Listen == "" {
		return DefaultAgentListen
	}
	return a.Listen
}

// Validate implements Validator.
func (a *AgentConfig) Validate() error {
	var errs []error
	if a.Listen != "" {
		if _, port, err := net.SplitHostPort(a.Listen); err != nil || port == "" {
			errs = append(errs, Errorf("listen", "must be host:port or :port"))
		}
	}
	errs = append(errs, a.Limits.validate()...)
	if a.StreamMaxDuration < 0 || (a.StreamMaxDuration > 0 && a.StreamMaxDuration < time.Minute) || a.StreamMaxDuration > 24*time.Hour {
		errs = append(errs, Errorf("stream_max_duration", "must be between 1m and 24h (0: the default %s), not %s", DefaultStreamMaxDuration, a.StreamMaxDuration))
	}
	for name, path := range a.TokenFiles {
		if strings.TrimSpace(name) == "" {
			errs = append(errs, Errorf("token_files", "empty session name"))
		}
		if path == "" {
			errs = append(errs, Errorf("token_files."+name, "empty path"))
		}
	}
	return joinErrs(errs)
}
