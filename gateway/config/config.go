// Package config is the public entry to the gateway's one configuration
// loader: programs outside the gateway binary (the policy compiler) read
// gateway.yaml through it, with exactly the strict parsing and validation
// `ironcurtain serve` applies (gateway/internal/config), so none of them
// works from a file the gateway would refuse, and verification runs with the
// policy settings the gateway derives from it.
package config

import (
	"sort"

	internal "ironcurtain.dev/gateway/internal/config"
	"ironcurtain.dev/gateway/policy"
)

// Config is a loaded and validated gateway.yaml.
type Config struct {
	c *internal.Config
}

// Server is one configured tool server (servers.<name>).
type Server struct {
	Name           string
	Command        string // set for an external server launched as a child process
	Args           []string
	Env            map[string]string
	AllowedDomains []string
}

// Load reads, parses (unknown keys refused), applies defaults to and
// validates the gateway.yaml at path; errors name the file and the field.
// A leading ~ in paths expands from $HOME, as in the gateway.
func Load(path string) (*Config, error) {
	c, err := internal.Load(path)
	if err != nil {
		return nil, err
	}
	return &Config{c: c}, nil
}

// File is the path the configuration was loaded from.
func (c *Config) File() string { return c.c.File() }

// Sandbox is the agent's workspace as the gateway sees it.
func (c *Config) Sandbox() string { return c.c.Sandbox }

// PolicyDir is the policy directory the gateway loads.
func (c *Config) PolicyDir() string { return c.c.PolicyDir }

// PolicySettings are the policy engine's settings, as the gateway builds
// them (home is left for the caller to set).
func (c *Config) PolicySettings() policy.Settings { return c.c.PolicySettings() }

// Servers lists servers.<name>, sorted by name.
func (c *Config) Servers() []Server {
	out := make([]Server, 0, len(c.c.Servers))
	for name, s := range c.c.Servers {
		env := make(map[string]string, len(s.Env))
		for k, v := range s.Env {
			env[k] = v
		}
		out = append(out, Server{Name: name, Command: s.Command, Args: append([]string(nil), s.Args...), Env: env,
			AllowedDomains: append([]string(nil), s.AllowedDomains...)})
	}
	sort.Slice(out, func(i, j int) bool { return out[i].Name < out[j].Name })
	return out
}
