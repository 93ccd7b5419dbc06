package config

import (
	"path/filepath"
	"time"
)

// DefaultAuditSpoolDir is on the gateway's state volume (compose:
// gateway_state mounted at /var/lib/ironcurtain), so spooled outcomes
// survive a gateway restart.
const DefaultAuditSpoolDir = "/var/lib/ironcurtain/audit-spool"

// AuditSpoolConfig is the part of the audit section about the local spool
// that keeps tool-call outcomes the database could not take (down, paused,
// slow) until it can. It is inlined in AuditConfig:
//
//	audit:
//	  spool_dir: /var/lib/ironcurtain/audit-spool  # gateway-private, fsynced
//	  spool_max_records: 100000  # when full, new calls are refused
//	  outcome_wait: 1s           # wait for an outcome's commit before spooling it
type AuditSpoolConfig struct {
	SpoolDir        string        `yaml:"spool_dir"`
	SpoolMaxRecords int           `yaml:"spool_max_records"`
	OutcomeWait     time.Duration `yaml:"outcome_wait"`
}

// SpoolPath returns SpoolDir or the default.
func (a *AuditSpoolConfig) SpoolPath() string {
	if a.SpoolDir == "" {
		return DefaultAuditSpoolDir
	}
	return a.SpoolDir
}

func (a *AuditSpoolConfig) validateSpool() []error {
	var errs []error
	if a.SpoolDir != "" && !filepath.IsAbs(a.SpoolDir) {
		errs = append(errs, Errorf("spool_dir", "must be an absolute path"))
	}
	if a.SpoolMaxRecords < 0 || a.SpoolMaxRecords > 10_000_000 {
		errs = append(errs, Errorf("spool_max_records", "must be between 1 and 10000000 (0: default)"))
	}
	if a.OutcomeWait < 0 || a.OutcomeWait > time.Minute {
		errs = append(errs, Errorf("outcome_wait", "must be between 0 and 1m"))
	}
	return errs
}
