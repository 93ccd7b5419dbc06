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
	// HTTP is the git smart HTTP door on the agent port (/git/...).
	HTTP GitHTTPConfig `yaml:"http"`
}

// GitHTTPConfig tunes the git smart HTTP door (internal/doors/githttp). It serves
// only hosts in servers.git.allowed_domains; zero values take the door's
// defaults.
//
//	git:
//	  http:
//	    max_pack_bytes: 536870912
//	    max_objects: 1048576
//	    max_refs: 256
//	    timeout: 10m
type GitHTTPConfig struct {
	// Disabled turns the door off (/git/ answers 404).
	Disabled bool `yaml:"disabled"`
	// MaxPackBytes caps one pushed pack; MaxObjects its objects; MaxRefs
	// the ref updates of one push.
	MaxPackBytes int64 `yaml:"max_pack_bytes"`
	MaxObjects   int   `yaml:"max_objects"`
	MaxRefs      int   `yaml:"max_refs"`
	// Timeout bounds receiving, indexing and classifying a push and one
	// upload-pack exchange (not the wait for a human).
	Timeout time.Duration `yaml:"timeout"`
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
	for field, v := range map[string]int64{"http.max_pack_bytes": g.HTTP.MaxPackBytes, "http.max_objects": int64(g.HTTP.MaxObjects),
		"http.max_refs": int64(g.HTTP.MaxRefs), "http.timeout": int64(g.HTTP.Timeout)} {
		if v < 0 {
			errs = append(errs, Errorf(field, "must not be negative"))
		}
	}
	if g.TokenEnv != "" && !validEnvName(g.TokenEnv) {
		errs = append(errs, Errorf("token_env", "%q is not an environment variable name", g.TokenEnv))
	}
	return joinErrs(errs)
}
