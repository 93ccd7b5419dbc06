package config

import (
	"encoding/hex"
	"errors"
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
//	  spool_key_file: /run/secrets/spool-key  # 64 hex digits, 0600; default: a key in memory only
type AuditSpoolConfig struct {
	SpoolDir        string        `yaml:"spool_dir"`
	SpoolKeyFile    string        `yaml:"spool_key_file"`
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
	if a.SpoolKeyFile != "" && !filepath.IsAbs(a.SpoolKeyFile) {
		errs = append(errs, Errorf("spool_key_file", "must be an absolute path"))
	}
	if a.SpoolMaxRecords < 0 || a.SpoolMaxRecords > 10_000_000 {
		errs = append(errs, Errorf("spool_max_records", "must be between 1 and 10000000 (0: default)"))
	}
	if a.OutcomeWait < 0 || a.OutcomeWait > time.Minute {
		errs = append(errs, Errorf("outcome_wait", "must be between 0 and 1m"))
	}
	return errs
}

// SpoolKey returns the spool's MAC key: the 32 bytes written as 64 hex
// digits in spool_key_file (a secret file: 0600, see ReadSecretFile), or
// nil when no key file is set (the gateway then uses a key kept in memory).
func (a *AuditSpoolConfig) SpoolKey() ([]byte, error) {
	if a.SpoolKeyFile == "" {
		return nil, nil
	}
	s, err := ReadSecretFile(a.SpoolKeyFile)
	if err != nil {
		return nil, &FieldError{Field: "audit.spool_key_file", Err: err}
	}
	key, err := hex.DecodeString(s)
	if err != nil || len(key) != 32 {
		return nil, &FieldError{Field: "audit.spool_key_file", Err: errors.New("must hold 64 hex digits (openssl rand -hex 32)")}
	}
	return key, nil
}
