package config

import "time"

// MCPConfig is the mcp section of gateway.yaml: the agent's MCP endpoint and
// the call pipeline. Zero values mean the hub's defaults.
//
//	mcp:
//	  max_result_bytes: 1048576     # a larger tool result is cut (and marked)
//	  call_timeout: 2m              # a tool's work on one call (not a human's wait)
//	  max_request_bytes: 4194304    # one request to /mcp
//	  session_idle_ttl: 10m         # MCP sessions idle this long end
//	  max_sessions: 4096            # open MCP sessions in all
//	  max_sessions_per_token: 64    # open MCP sessions per agent token
//	  max_calls_in_flight: 8        # requests in flight per agent session (32 more wait)
//	  progress_every: 15s           # progress notices while a call waits for a human
//	  external_start_timeout: 30s   # start, initialize and list tools of an external server
type MCPConfig struct {
	MaxResultBytes       int           `yaml:"max_result_bytes"`
	CallTimeout          time.Duration `yaml:"call_timeout"`
	MaxRequestBytes      int64         `yaml:"max_request_bytes"`
	SessionIdleTTL       time.Duration `yaml:"session_idle_ttl"`
	ProgressEvery        time.Duration `yaml:"progress_every"`
	ExternalStartTimeout time.Duration `yaml:"external_start_timeout"`
	MaxSessions          int           `yaml:"max_sessions"`
	MaxSessionsPerToken  int           `yaml:"max_sessions_per_token"`
	MaxCallsInFlight     int           `yaml:"max_calls_in_flight"`
}

// Validate implements Validator.
func (m *MCPConfig) Validate() error {
	var errs []error
	if m.MaxResultBytes < 0 || m.MaxResultBytes > 64<<20 {
		errs = append(errs, Errorf("max_result_bytes", "must be between 1 and 67108864 (0: default 1 MiB)"))
	}
	if m.CallTimeout < 0 || m.CallTimeout > time.Hour {
		errs = append(errs, Errorf("call_timeout", "must be between 1s and 1h (0: default 2m)"))
	} else if m.CallTimeout > 0 && m.CallTimeout < time.Second {
		errs = append(errs, Errorf("call_timeout", "must be at least 1s"))
	}
	if m.MaxRequestBytes < 0 || m.MaxRequestBytes > 256<<20 {
		errs = append(errs, Errorf("max_request_bytes", "must be between 1 and 268435456 (0: default 4 MiB)"))
	}
	if m.SessionIdleTTL < 0 {
		errs = append(errs, Errorf("session_idle_ttl", "must not be negative"))
	}
	if m.ProgressEvery < 0 || (m.ProgressEvery > 0 && m.ProgressEvery < 100*time.Millisecond) {
		errs = append(errs, Errorf("progress_every", "must be at least 100ms (0: default 15s)"))
	}
	if m.MaxSessions < 0 || m.MaxSessions > 1<<20 {
		errs = append(errs, Errorf("max_sessions", "must be between 1 and 1048576 (0: default 4096), not %d", m.MaxSessions))
	}
	if m.MaxSessionsPerToken < 0 || m.MaxSessionsPerToken > 1<<20 {
		errs = append(errs, Errorf("max_sessions_per_token", "must be between 1 and 1048576 (0: default 64), not %d", m.MaxSessionsPerToken))
	}
	if m.MaxCallsInFlight < 0 || m.MaxCallsInFlight > 1024 {
		errs = append(errs, Errorf("max_calls_in_flight", "must be between 1 and 1024 (0: default 8), not %d", m.MaxCallsInFlight))
	}
	if m.ExternalStartTimeout < 0 {
		errs = append(errs, Errorf("external_start_timeout", "must not be negative"))
	}
	return joinErrs(errs)
}
