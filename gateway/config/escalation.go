package config

import (
	"net/url"
	"time"
)

// EscalationConfig is the escalation section of gateway.yaml.
//
//	escalation:
//	  timeout: 300s          # a pending escalation then expires (denied)
//	  webhook_url: ""        # Slack-compatible incoming webhook for new escalations
//	  poll_interval: 5s      # safety re-check besides LISTEN/NOTIFY
//	  sweep_interval: 15s    # how often overdue escalations are expired
//	  auto_approver: {...}   # off by default (autoapprover.go)
type EscalationConfig struct {
	Timeout       time.Duration `yaml:"timeout"`
	WebhookURL    string        `yaml:"webhook_url"`
	PollInterval  time.Duration `yaml:"poll_interval"`
	SweepInterval time.Duration `yaml:"sweep_interval"`
	// AutoApprover may approve rule escalations before a human is asked.
	AutoApprover AutoApproverConfig `yaml:"auto_approver"`
}

// Validate implements Validator.
func (e *EscalationConfig) Validate() error {
	var errs []error
	if e.Timeout < 0 || e.Timeout > 24*time.Hour {
		errs = append(errs, Errorf("timeout", "must be between 1s and 24h (0: default 300s)"))
	} else if e.Timeout > 0 && e.Timeout < time.Second {
		errs = append(errs, Errorf("timeout", "must be at least 1s"))
	}
	if e.WebhookURL != "" {
		u, err := url.Parse(e.WebhookURL)
		if err != nil || (u.Scheme != "https" && u.Scheme != "http") || u.Host == "" {
			errs = append(errs, Errorf("webhook_url", "must be an http(s) URL"))
		}
	}
	if e.PollInterval < 0 {
		errs = append(errs, Errorf("poll_interval", "must not be negative"))
	}
	if e.SweepInterval < 0 {
		errs = append(errs, Errorf("sweep_interval", "must not be negative"))
	}
	errs = append(errs, e.AutoApprover.validate("auto_approver")...)
	return joinErrs(errs)
}
