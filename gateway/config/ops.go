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
// Metrics tokens (IRONCURTAIN_METRICS_TOKEN, scraper "metrics", or files
// named here) open GET /metrics and nothing else: give one to Prometheus
// instead of an operator token.
//
//	ops:
//	  listen: ":8081"
//	  operator_token_files:
//	    alice: /run/secrets/ops-alice
//	  metrics_token_files:
//	    prometheus: /run/secrets/metrics-token
type OpsConfig struct {
	Listen             string            `yaml:"listen"`
	OperatorTokenFiles map[string]string `yaml:"operator_token_files"`
	MetricsTokenFiles  map[string]string `yaml:"metrics_token_files"`
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
	errs = append(errs, tokenFiles("operator_token_files", "operator", o.OperatorTokenFiles)...)
	errs = append(errs, tokenFiles("metrics_token_files", "scraper", o.MetricsTokenFiles)...)
	return joinErrs(errs)
}

func joinErrs(errs []error) error {
	if len(errs) == 0 {
		return nil
	}
	return errors.Join(errs...)
}

// tokenFiles checks a name → token file map.
func tokenFiles(field, what string, files map[string]string) []error {
	var errs []error
	for name, path := range files {
		if strings.TrimSpace(name) == "" {
			errs = append(errs, Errorf(field, "empty %s name", what))
		}
		if path == "" {
			errs = append(errs, Errorf(field+"."+name, "empty path"))
		}
	}
	return errs
}
