// Package gatewayconfig reads what only the compiler needs from the
// gateway's deployment settings: the launch command of each external MCP
// server, and the policy settings verification runs with.
//
// A gateway.yaml is read through the gateway's own package
// (ironcurtain.dev/gateway/config: strict, the whole file validated, so the
// compiler never works from a file `ironcurtain serve` would refuse), and
// its policy settings are the gateway's (config.Config.PolicySettings, the
// function `ironcurtain serve` builds its engine with). An mcp-servers.json
// file in the original's shape, {"mcpServers": {name: {command, args, env}}}
// or the same map without the wrapper, names servers only.
package gatewayconfig

import (
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"sort"
	"strings"

	gwconfig "ironcurtain.dev/gateway/config"
	"ironcurtain.dev/gateway/policy"
)

// Server is one configured tool server.
type Server struct {
	Name           string
	Command        string
	Args           []string
	Env            map[string]string
	AllowedDomains []string
}

// External reports whether the server is launched as a child process.
func (s Server) External() bool { return s.Command != "" }

// Config is what the compiler read.
type Config struct {
	File    string
	Sandbox string
	Servers []Server // sorted by name
	// gateway is the loaded gateway.yaml (nil for an mcp-servers.json).
	gateway *gwconfig.Config
}

// serverYAML is one server of an mcp-servers.json.
type serverYAML struct {
	Command        string            `json:"command"`
	Args           []string          `json:"args"`
	Env            map[string]string `json:"env"`
	AllowedDomains []string          `json:"allowed_domains"`
}

// Load reads a gateway.yaml (.yaml/.yml) or an mcp-servers.json (.json).
// A leading ~ in gateway.yaml paths expands from $HOME, as in the gateway.
func Load(path string) (*Config, error) {
	b, err := os.ReadFile(path)
	if err != nil {
		return nil, fmt.Errorf("loading server config: %w", err)
	}
	var c *Config
	if strings.EqualFold(filepath.Ext(path), ".json") {
		c, err = parseJSON(path, b)
	} else {
		c, err = parseYAML(path)
	}
	if err != nil {
		return nil, fmt.Errorf("loading server config: %w", err)
	}
	return c, nil
}

func parseYAML(path string) (*Config, error) {
	gc, err := gwconfig.Load(path)
	if err != nil {
		return nil, err
	}
	c := &Config{File: path, Sandbox: gc.Sandbox, gateway: gc}
	for _, name := range sortedNames(gc.Servers) {
		sv := gc.Servers[name]
		env := make(map[string]string, len(sv.Env))
		for k, v := range sv.Env {
			env[k] = v
		}
		c.Servers = append(c.Servers, Server{Name: name, Command: sv.Command, Args: append([]string(nil), sv.Args...), Env: env,
			AllowedDomains: append([]string(nil), sv.AllowedDomains...)})
	}
	return c, nil
}

func sortedNames[V any](m map[string]V) []string {
	out := make([]string, 0, len(m))
	for k := range m {
		out = append(out, k)
	}
	sort.Strings(out)
	return out
}

func parseJSON(path string, b []byte) (*Config, error) {
	var wrapped struct {
		MCPServers map[string]serverYAML `json:"mcpServers"`
	}
	dec := json.NewDecoder(bytes.NewReader(b))
	if err := dec.Decode(&wrapped); err != nil {
		return nil, fmt.Errorf("%s: %w", path, err)
	}
	field := "mcpServers"
	servers := wrapped.MCPServers
	if servers == nil {
		field = ""
		if err := json.Unmarshal(b, &servers); err != nil {
			return nil, fmt.Errorf("%s: %w", path, err)
		}
	}
	list, err := convert(path, field, servers)
	if err != nil {
		return nil, err
	}
	return &Config{File: path, Sandbox: gwconfig.DefaultSandbox, Servers: list}, nil
}

func convert(file, field string, m map[string]serverYAML) ([]Server, error) {
	var out []Server
	var errs []error
	for name, s := range m {
		at := name
		if field != "" {
			at = field + "." + name
		}
		if name == "" || strings.Contains(name, "__") {
			errs = append(errs, fmt.Errorf("%s: %s: server names must be non-empty and must not contain \"__\"", file, at))
		}
		for i, d := range s.AllowedDomains {
			if err := policy.ValidateDomainPattern(d); err != nil {
				errs = append(errs, fmt.Errorf("%s: %s.allowed_domains[%d]: %w", file, at, i, err))
			}
		}
		out = append(out, Server{Name: name, Command: s.Command, Args: s.Args, Env: s.Env, AllowedDomains: s.AllowedDomains})
	}
	sort.Slice(out, func(i, j int) bool { return out[i].Name < out[j].Name })
	return out, errors.Join(errs...)
}

// Settings returns the policy settings verification runs with; home
// expands ~ (the gateway's $HOME). For a gateway.yaml they are the gateway's
// own, built by the same function (config.Config.PolicySettings); for an
// mcp-servers.json, the default sandbox and the servers' domain allowlists.
func (c *Config) Settings(home string) policy.Settings {
	if c.gateway != nil {
		s := c.gateway.PolicySettings() // a fresh copy the caller may change
		s.Home = home
		return s
	}
	s := policy.Settings{Sandbox: c.Sandbox, Home: home}
	for _, sv := range c.Servers {
		if len(sv.AllowedDomains) > 0 {
			if s.DomainAllowlists == nil {
				s.DomainAllowlists = map[string][]string{}
			}
			s.DomainAllowlists[sv.Name] = append([]string(nil), sv.AllowedDomains...)
		}
	}
	return s
}
