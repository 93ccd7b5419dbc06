package config

import "time"

// LoopBreakerConfig is the loop_breaker section of gateway.yaml: per agent
// session limits that pause a stuck agent's tool calls behind one
// escalation (docs/policy.md, "Loop breaker"). Zero values mean the
// defaults, which an agent working normally never meets. The loop breaker
// cannot be switched off; raise a limit instead.
//
//	loop_breaker:
//	  calls_per_minute: 1200     # tool calls of one session in a minute
//	  identical_calls: 30        # the same tool with the same arguments ...
//	  identical_window: 60s      # ... more often than this within this window
//	  consecutive_denials: 40    # denied calls in a row
//	  cooldown: 10m              # an operator's denial stops the session's calls this long
//	  max_sessions: 10000        # sessions tracked at once (memory bound)
type LoopBreakerConfig struct {
	CallsPerMinute     int           `yaml:"calls_per_minute"`
	IdenticalCalls     int           `yaml:"identical_calls"`
	IdenticalWindow    time.Duration `yaml:"identical_window"`
	ConsecutiveDenials int           `yaml:"consecutive_denials"`
	Cooldown           time.Duration `yaml:"cooldown"`
	MaxSessions        int           `yaml:"max_sessions"`
}

// Validate implements Validator.
func (l *LoopBreakerConfig) Validate() error {
	var errs []error
	if l.CallsPerMinute < 0 || l.CallsPerMinute > 1_000_000 {
		errs = append(errs, Errorf("calls_per_minute", "must be between 1 and 1000000 (0: default 1200)"))
	}
	if l.IdenticalCalls < 0 || l.IdenticalCalls == 1 || l.IdenticalCalls > 100_000 {
		errs = append(errs, Errorf("identical_calls", "must be between 2 and 100000 (0: default 30)"))
	}
	if l.IdenticalWindow < 0 || l.IdenticalWindow > 24*time.Hour || (l.IdenticalWindow > 0 && l.IdenticalWindow < time.Second) {
		errs = append(errs, Errorf("identical_window", "must be between 1s and 24h (0: default 60s)"))
	}
	if l.ConsecutiveDenials < 0 || l.ConsecutiveDenials == 1 || l.ConsecutiveDenials > 100_000 {
		errs = append(errs, Errorf("consecutive_denials", "must be between 2 and 100000 (0: default 40)"))
	}
	if l.Cooldown < 0 || l.Cooldown > 7*24*time.Hour || (l.Cooldown > 0 && l.Cooldown < time.Second) {
		errs = append(errs, Errorf("cooldown", "must be between 1s and 168h (0: default 10m)"))
	}
	if l.MaxSessions < 0 || l.MaxSessions > 10_000_000 {
		errs = append(errs, Errorf("max_sessions", "must be between 1 and 10000000 (0: default 10000)"))
	}
	return joinErrs(errs)
}
