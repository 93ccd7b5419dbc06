package config

// Bounds of the audit argument settings.
const (
	minAuditArgValueBytes = 256
	maxAuditArgValueBytes = 1 << 20
	maxAuditArgsBytes     = 16 << 20
)

// AuditArgsConfig bounds the tool-call arguments stored in audit records
// (and in the JSON-lines copy). It is inlined in AuditConfig:
//
//	audit:
//	  max_arg_value_bytes: 4096  # each string value; longer ones are stored cut, with length and SHA-256
//	  max_args_bytes: 65536      # the whole arguments; longer ones become one marker
//
// Zero means the audit package's default (4 KiB and 64 KiB).
type AuditArgsConfig struct {
	MaxArgValueBytes int `yaml:"max_arg_value_bytes"`
	MaxArgsBytes     int `yaml:"max_args_bytes"`
}

func (a *AuditArgsConfig) validateArgs() []error {
	var errs []error
	v := a.MaxArgValueBytes
	if v < 0 || v != 0 && (v < minAuditArgValueBytes || v > maxAuditArgValueBytes) {
		errs = append(errs, Errorf("max_arg_value_bytes", "must be between %d and %d (0: default 4096)", minAuditArgValueBytes, maxAuditArgValueBytes))
	}
	if w := a.MaxArgsBytes; w != 0 {
		if v == 0 {
			v = 4096
		}
		if w < 2*v || w > maxAuditArgsBytes {
			errs = append(errs, Errorf("max_args_bytes", "must be between twice max_arg_value_bytes (%d) and %d (0: default 65536)", 2*v, maxAuditArgsBytes))
		}
	}
	return errs
}
