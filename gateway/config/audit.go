package config

import "time"

// AuditConfig is the audit section of gateway.yaml. Records always go to
// Postgres (IRONCURTAIN_DATABASE_URL); the JSON-lines file is an optional
// extra copy. Zero values mean the audit package's defaults.
//
//	audit:
//	  max_batch: 512      # records per group-commit transaction
//	  queue_size: 4096    # records waiting; when full, calls wait, then fail closed
//	  linger: 0s          # extra wait for a fuller batch (0: none)
//	  flushers: 2         # transactions in flight
//	  jsonl_file: ""      # optional JSON-lines copy
//	  jsonl_fsync: false  # fsync the JSON-lines file per record
type AuditConfig struct {
	MaxBatch   int           `yaml:"max_batch"`
	QueueSize  int           `yaml:"queue_size"`
	Linger     time.Duration `yaml:"linger"`
	Flushers   int           `yaml:"flushers"`
	JSONLFile  string        `yaml:"jsonl_file"`
	JSONLFsync bool          `yaml:"jsonl_fsync"`
	// The spool of outcomes waiting for the database (audit_spool.go).
	AuditSpoolConfig `yaml:",inline"`
	// Bounds of the stored tool-call arguments (audit_args.go).
	AuditArgsConfig `yaml:",inline"`
}

// Validate implements Validator.
func (a *AuditConfig) Validate() error {
	var errs []error
	if a.MaxBatch < 0 || a.MaxBatch > 10000 {
		errs = append(errs, Errorf("max_batch", "must be between 1 and 10000 (0: default)"))
	}
	if a.QueueSize < 0 || a.QueueSize > 1_000_000 {
		errs = append(errs, Errorf("queue_size", "must be between 1 and 1000000 (0: default)"))
	}
	if a.Linger < 0 || a.Linger > time.Second {
		errs = append(errs, Errorf("linger", "must be between 0 and 1s"))
	}
	if a.Flushers < 0 || a.Flushers > 64 {
		errs = append(errs, Errorf("flushers", "must be between 1 and 64 (0: default)"))
	}
	errs = append(errs, a.validateSpool()...)
	errs = append(errs, a.validateArgs()...)
	return joinErrs(errs)
}
