package config

import (
	"fmt"
	"net/url"
	"os"
	"path/filepath"
	"strings"
	"time"
)

// Default of GitHubConfig.TokenEnv.
const DefaultGitHubTokenEnv = "GITHUB_TOKEN"

// GitHubConfig is the github section of gateway.yaml: the built-in github
// server's API and credentials. The token itself never appears here.
//
//	github:
//	  api_url: https://api.github.com/   # GitHub Enterprise: https://host/api/v3/
//	  token_env: GITHUB_TOKEN            # variable holding the gateway's token
//	  token_file: ""                     # or: an absolute path to a secret file
//	  timeout: 30s
//	  relay:                             # the GitHub API relay (/github/ on the agent port)
//	    disabled: false
//	    max_body_bytes: 4194304          # REST request bodies (GraphQL: 256 KiB)
//	    timeout: 60s                     # one upstream exchange
//	    hosts: [api.github.localhost, api.github.com]  # Host names served with the API's own paths
type GitHubConfig struct {
	APIURL    string        `yaml:"api_url"`
	TokenEnv  string        `yaml:"token_env"`
	TokenFile string        `yaml:"token_file"`
	Timeout   time.Duration `yaml:"timeout"`
	// Relay tunes the GitHub API relay (internal/doors/githubrelay).
	Relay GitHubRelayConfig `yaml:"relay"`
}

// GitHubRelayConfig tunes the GitHub API relay; zero values take its
// defaults.
type GitHubRelayConfig struct {
	// Disabled turns the relay off (/github/ answers 404).
	Disabled bool `yaml:"disabled"`
	// MaxBodyBytes bounds a REST request body.
	MaxBodyBytes int64 `yaml:"max_body_bytes"`
	// Timeout bounds one upstream exchange (not the wait for a human).
	Timeout time.Duration `yaml:"timeout"`
	// Hosts are Host names whose requests on the agent port carry the
	// API's own paths (default api.github.localhost and api.github.com).
	Hosts []string `yaml:"hosts"`
}

// TokenVariable returns the environment variable the token is read from.
func (g GitHubConfig) TokenVariable() string {
	if g.TokenEnv == "" {
		return DefaultGitHubTokenEnv
	}
	return g.TokenEnv
}

// Token returns the gateway's GitHub token: the content of TokenFile when
// set (surrounding whitespace removed), else the TokenVariable environment
// variable. An empty result is not an error (the github server then answers
// every call that it has no token). The token is never part of an error.
func (g GitHubConfig) Token(getenv func(string) string) (string, error) {
	if g.TokenFile == "" {
		return strings.TrimSpace(getenv(g.TokenVariable())), nil
	}
	b, err := os.ReadFile(g.TokenFile)
	if err != nil {
		return "", &FieldError{Field: "github.token_file", Err: fmt.Errorf("reading the token: %w", err)}
	}
	return strings.TrimSpace(string(b)), nil
}

// Validate implements Validator.
func (g *GitHubConfig) Validate() error {
	var errs []error
	if g.APIURL != "" {
		u, err := url.Parse(g.APIURL)
		if err != nil || (u.Scheme != "https" && u.Scheme != "http") || u.Host == "" || u.User != nil {
			errs = append(errs, Errorf("api_url", "must be an absolute http(s) URL without credentials"))
		}
	}
	if g.TokenEnv != "" && !envNameRE.MatchString(g.TokenEnv) {
		errs = append(errs, Errorf("token_env", "is not a valid environment variable name"))
	}
	if g.TokenFile != "" && !filepath.IsAbs(g.TokenFile) {
		errs = append(errs, Errorf("token_file", "must be an absolute path"))
	}
	if g.Relay.MaxBodyBytes < 0 || g.Relay.MaxBodyBytes > 64<<20 {
		errs = append(errs, Errorf("relay.max_body_bytes", "must be between 0 (default 4 MiB) and 64 MiB"))
	}
	for _, h := range g.Relay.Hosts {
		if h == "" || strings.ContainsAny(h, "/:* \t") || strings.ToLower(h) != h {
			errs = append(errs, Errorf("relay.hosts", "%q must be a lower-case host name without port", h))
		}
	}
	if g.Relay.Timeout < 0 || g.Relay.Timeout > 10*time.Minute {
		errs = append(errs, Errorf("relay.timeout", "must be between 1s and 10m (0: default 60s)"))
	}
	if g.Timeout < 0 || g.Timeout > 10*time.Minute {
		errs = append(errs, Errorf("timeout", "must be between 1s and 10m (0: default 30s)"))
	}
	return joinErrs(errs)
}
