package config

import (
	"errors"
	"net"
	"strings"
)

// DefaultOpsListen is the ops API's listen address.
const DefaultOpsListen = ":8081"

// OpsConfig is the ops section of gateway.yaml: the operator API (never on
// the agent port). Operator tokens are secrets: they come from the
// environment (IRONCURTAIN_OPERATOR_TOKEN, operator "operator") or from
// files named here, never from this file itself.
//
//	ops:
//	  listen: ":8081"
//	  operator_token_files:
//	    alice: /run/secrets/ops-alice
type OpsConfig struct {
	Listen             string            `yaml:"listen"`
	OperatorTokenFiles map[string]string `yaml:"operator_token_files"`
	// Limits bound connections (listener.go).
	Limits ListenerLimits `yaml:",inline"`
}

// ListenAddr returns Listen or the default.
func (o *OpsConfig) ListenAddr() string {
	if o.Listen == "" {
		return DefaultOpsListen
	}
	return o.Listen
}

// Validate implements Validator.
func (o *OpsConfig) Validate() error {
	var errs []error
	if o.Listen != "" {
		if _, port, err := net.SplitHostPort(o.Listen); err != nil || port == "" {
			errs = append(errs, Errorf("listen", "must be host:port or :port"))
		}
	}
	errs = append(errs, o.Limits.validate()...)
	for name, path := range o.OperatorTokenFiles {
		if strings.TrimSpace(name) == "" {
			errs = append(errs, Errorf("operator_token_files", "empty operator name"))
		}
		if path == "" {
			errs = append(errs, Errorf("operator_token_files."+name, "empty path"))
		}
	}
	return joinErrs(errs)
}

func joinErrs(errs []error) error {
	if len(errs) == 0 {
		return nil
	}
	return errors.Join(errs...)
}
