package config

import (
	"path/filepath"
	"time"
)

// Defaults of the git section.
const (
	DefaultGitMirrorDir = "/var/lib/ironcurtain/git"
	DefaultGitTokenEnv  = "GITHUB_TOKEN"
)

// GitConfig is the git section of gateway.yaml: the built-in git server's
// private mirror directory and credentials. The token itself comes from the
// environment variable TokenEnv or from TokenFile, never from this file.
//
//	git:
//	  mirror_dir: /var/lib/ironcurtain/git
//	  token_file: /run/secrets/github-token
//	  ssh_key_file: /run/secrets/git-ssh-key
//	  ssh_known_hosts_file: /etc/ironcurtain/known_hosts
type GitConfig struct {
	// MirrorDir is gateway-private (never inside the sandbox).
	MirrorDir string `yaml:"mirror_dir"`
	// TokenEnv names the variable holding the HTTPS token (default GITHUB_TOKEN).
	TokenEnv string `yaml:"token_env"`
	// TokenFile holds the HTTPS token; it wins over TokenEnv.
	TokenFile string `yaml:"token_file"`
	// TokenHosts are the hosts the token is sent to (default github.com).
	TokenHosts []string `yaml:"token_hosts"`
	// SSHKeyFile and SSHKnownHostsFile are used for ssh remotes.
	SSHKeyFile        string `yaml:"ssh_key_file"`
	SSHKnownHostsFile string `yaml:"ssh_known_hosts_file"`
	// AuthorName and AuthorEmail sign commits made through the server.
	AuthorName  string `yaml:"author_name"`
	AuthorEmail string `yaml:"author_email"`
	// Timeout bounds local git commands; NetworkTimeout fetch, push, clone.
	Timeout        time.Duration `yaml:"timeout"`
	NetworkTimeout time.Duration `yaml:"network_timeout"`
}

// MirrorPath returns MirrorDir or the default.
func (g *GitConfig) MirrorPath() string {
	if g.MirrorDir == "" {
		return DefaultGitMirrorDir
	}
	return g.MirrorDir
}

// TokenVariable returns the environment variable the token is read from.
func (g *GitConfig) TokenVariable() string {
	if g.TokenEnv == "" {
		return DefaultGitTokenEnv
	}
	return g.TokenEnv
}

// Validate implements Validator.
func (g *GitConfig) Validate() error {
	var errs []error
	for field, p := range map[string]string{"mirror_dir": g.MirrorDir, "token_file": g.TokenFile, "ssh_key_file": g.SSHKeyFile, "ssh_known_hosts_file": g.SSHKnownHostsFile} {
		if p != "" && !filepath.IsAbs(p) {
			errs = append(errs, Errorf(field, "%q must be an absolute path", p))
		}
	}
	if g.Timeout < 0 {
		errs = append(errs, Errorf("timeout", "must not be negative"))
	}
	if g.NetworkTimeout < 0 {
		errs = append(errs, Errorf("network_timeout", "must not be negative"))
	}
	if g.TokenEnv != "" && !validEnvName(g.TokenEnv) {
		errs = append(errs, Errorf("token_env", "%q is not an environment variable name", g.TokenEnv))
	}
	return joinErrs(errs)
}
