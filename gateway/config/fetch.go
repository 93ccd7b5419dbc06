package config

import (
	"errors"
	"fmt"
	"strings"
	"time"
)

// FetchServer is the built-in fetch server's name (servers.fetch).
const FetchServer = "fetch"

// fetchAllowlistErrors checks servers.fetch.allowed_domains the way the
// fetch server's egress guard reads it, so that no command accepts a
// configuration `serve` would refuse. The list is required: without it the
// policy engine skips the structural domain check for fetch-url and the
// compiled rules alone would decide every URL. Entries are host patterns
// ("host", "*.suffix", "*"); the "host/owner/repo" form of other servers'
// lists means nothing to the fetch guard.
func (c *Config) fetchAllowlistErrors() []*FieldError {
	const field = "servers." + FetchServer + ".allowed_domains"
	domains := c.Servers[FetchServer].AllowedDomains
	if len(domains) == 0 {
		return []*FieldError{{Field: field, Err: errors.New(`must list the domains the fetch tool may reach without a human (["*"] lets the compiled rules decide every public host)`)}}
	}
	var out []*FieldError
	for i, d := range domains {
		if strings.Contains(d, "/") {
			out = append(out, &FieldError{Field: indexField(field, i), Err: fmt.Errorf("%q: the fetch allowlist takes host patterns only (no repository path)", d)})
		}
	}
	return out
}

// FetchConfig is the fetch section of gateway.yaml: limits of the built-in
// fetch server. Which sites it reaches is servers.fetch.allowed_domains
// (the same list the policy's domain gate uses). Zero values mean the fetch
// server's defaults.
//
//	fetch:
//	  max_body_bytes: 5242880     # bytes read from one response
//	  max_redirects: 5            # every hop is checked again
//	  timeout: 30s                # one whole call
//	  max_length: 20000           # default characters returned (max_length argument)
//	  allowed_ports: [80, 443]
//	  user_agent: ""
type FetchConfig struct {
	MaxBodyBytes int64         `yaml:"max_body_bytes"`
	MaxRedirects int           `yaml:"max_redirects"`
	Timeout      time.Duration `yaml:"timeout"`
	MaxLength    int           `yaml:"max_length"`
	AllowedPorts []int         `yaml:"allowed_ports"`
	UserAgent    string        `yaml:"user_agent"`
}

// Validate implements Validator.
func (f *FetchConfig) Validate() error {
	var errs []error
	if f.MaxBodyBytes < 0 || f.MaxBodyBytes > 256<<20 {
		errs = append(errs, Errorf("max_body_bytes", "must be between 1 and 268435456 (0: default 5 MiB)"))
	}
	if f.MaxRedirects < 0 || f.MaxRedirects > 20 {
		errs = append(errs, Errorf("max_redirects", "must be between 1 and 20 (0: default 5)"))
	}
	if f.Timeout < 0 || f.Timeout > 10*time.Minute {
		errs = append(errs, Errorf("timeout", "must be between 1s and 10m (0: default 30s)"))
	}
	if f.MaxLength < 0 || f.MaxLength > 200000 {
		errs = append(errs, Errorf("max_length", "must be between 1 and 200000 (0: default 20000)"))
	}
	for i, p := range f.AllowedPorts {
		if p < 1 || p > 65535 {
			errs = append(errs, Errorf(indexField("allowed_ports", i), "port %d is not in 1..65535", p))
		}
	}
	return joinErrs(errs)
}

func indexField(field string, i int) string { return fmt.Sprintf("%s[%d]", field, i) }
